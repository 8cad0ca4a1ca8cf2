package cmdutil

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/pierhq/pier/sdk"
)

// OperationSpec describes one contract operation as a command. The
// generated cli/cmd/operations/commands.gen.go holds one per operation.
type OperationSpec struct {
	ID     string // operationId, also the MCP tool name
	Method string
	Path   string // path template, such as /v1/projects/{id}/launch
	Use    string
	Short  string
	Long   string
	// Example is indented, one command a line.
	Example string
	// Anonymous operations never send the API key: some of them refuse an
	// Authorization header.
	Anonymous bool
	// Idempotent operations declare an Idempotency-Key; the command gains
	// --idempotency-key.
	Idempotent   bool
	HasBody      bool
	BodyRequired bool
	Args         []ArgSpec
	Flags        []FlagSpec
	// Table, when set, renders data[Table.Path] as a table in human output.
	Table *TableSpec
}

// ArgSpec is one positional argument.
type ArgSpec struct {
	Name string // the parameter or field name, such as gateId
	In   string // path, query or body
}

// FlagSpec is one flag bound to a query parameter or a top-level body field.
type FlagSpec struct {
	Flag  string // kebab-case flag name
	Field string // parameter or JSON field name
	In    string // query or body
	// Kind is string, int, number, bool, strings or json.
	Kind     string
	Required bool
	Usage    string
	Enum     []string
}

// TableSpec names the array in data to render as a table and its columns.
type TableSpec struct {
	Path    string
	Columns []string
}

// OperationOptions are what a command collected from its flags and
// arguments, and the request built from them.
type OperationOptions struct {
	IO      *IOStreams
	Factory *Factory
	Spec    *OperationSpec

	// Args are the positional arguments, in spec order.
	Args []string
	// Values holds the text of every operation flag that was set, by flag
	// name; strings flags hold their comma-joined values.
	Values map[string]string
	// Data is --data: "@file.json", "-" for stdin, or inline JSON.
	Data           string
	IdempotencyKey string
	JSON           bool
	// PollWait (signup poll --wait) repeats the poll until the human has
	// finished or the signup expired.
	PollWait bool

	// The request built from the above.
	Path  string     // path with parameters filled in and escaped
	Query url.Values // nil when there are none
	Body  []byte     // JSON object, or nil for no body

	root *cobra.Command
}

// Header returns the request headers the options call for.
func (o *OperationOptions) Header() http.Header {
	h := http.Header{}
	if o.IdempotencyKey != "" {
		h.Set("Idempotency-Key", o.IdempotencyKey)
	}
	return h
}

// NewCmdOperation builds the command for one operation. runF, when not nil,
// replaces the API call, so tests can check what the flags produce.
func NewCmdOperation(f *Factory, spec *OperationSpec, runF func(*OperationOptions) error) *cobra.Command {
	opts := &OperationOptions{IO: f.IO, Factory: f, Spec: spec}
	values := map[string]flagValue{}

	long := spec.Long
	if long == "" {
		long = spec.Short
	}
	cmd := &cobra.Command{
		Use:     spec.Use,
		Short:   spec.Short,
		Long:    long,
		Example: spec.Example,
		Annotations: map[string]string{
			specAnnotation: spec.ID,
		},
		Args: func(cmd *cobra.Command, args []string) error {
			return checkArgs(cmd, spec, args)
		},
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.settle(cmd, args, values); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runOperation(cmd.Context(), opts)
		},
	}

	fl := cmd.Flags()
	bindSpecFlags(cmd, f, spec, values)
	if spec.HasBody {
		fl.StringVar(&opts.Data, "data", "", "The whole request body as `json`: inline, @file.json or - for stdin; flags override its top-level fields")
	}
	f.registerSpec(cmd, spec)
	if spec.ID == "poll_signup" {
		// A local --wait shadows the root's deprecated one: polling a
		// signup waits only when asked, since a human may take hours.
		fl.BoolVar(&opts.PollWait, "wait", false, "poll until the human has finished (or the signup expired), within --timeout")
	}
	if spec.Idempotent {
		fl.StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send; a retry with the same key replays the first answer (default: a new key)")
	}
	return cmd
}

// settle fills the options from the command line: the arguments, the
// flags given (--project falling back to PIER_PROJECT) and the request
// they build.
func (o *OperationOptions) settle(cmd *cobra.Command, args []string, values map[string]flagValue) error {
	o.Args = args
	o.root = cmd.Root()
	o.JSON = o.Factory.Config.JSON
	// --project (or its alias --project-id) falls back to
	// PIER_PROJECT, as on the hand-written commands; --data's own
	// projectId wins over the environment.
	if _, ok := values["project"]; ok && !cmd.Flags().Changed("project") && o.Data == "" {
		if p := strings.TrimSpace(o.Factory.Env("PIER_PROJECT")); p != "" {
			if err := cmd.Flags().Set("project", p); err != nil {
				return UsageErrorf(cmd.CommandPath(), "PIER_PROJECT: %v", err)
			}
		}
	}
	o.Values = map[string]string{}
	for name, v := range values {
		if cmd.Flags().Changed(name) {
			o.Values[name] = v.String()
		}
	}
	return o.build(cmd, values)
}

// bindSpecFlags binds a flag for each of the spec's flags, of its kind,
// with its completions, into values.
func bindSpecFlags(cmd *cobra.Command, f *Factory, spec *OperationSpec, values map[string]flagValue) {
	fl := cmd.Flags()
	for _, fs := range spec.Flags {
		usage := flagUsage(fs)
		var v flagValue
		switch fs.Kind {
		case "bool":
			v = &boolValue{}
			fl.Var(v, fs.Flag, usage)
			fl.Lookup(fs.Flag).NoOptDefVal = "true"
		case "strings":
			v = &stringsValue{}
			fl.Var(v, fs.Flag, usage)
		case "vars":
			v = &varsValue{flag: "--" + fs.Flag, getenv: f.Env}
			fl.Var(v, fs.Flag, usage)
		default:
			v = &textValue{kind: kindOrString(fs.Kind), enum: fs.Enum}
			fl.Var(v, fs.Flag, usage)
		}
		values[fs.Flag] = v
		if fs.Required {
			fl.SetAnnotation(fs.Flag, RequiredAnnotation, []string{"true"})
		}
		if len(fs.Enum) > 0 {
			enum := fs.Enum
			cmd.RegisterFlagCompletionFunc(fs.Flag, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				return enum, cobra.ShellCompDirectiveNoFileComp
			})
		}
	}
}

// RequiredAnnotation marks a flag the operation requires. It is not
// cobra's own mark, because a body field may come from --data instead.
const RequiredAnnotation = "pier_required"

func kindOrString(k string) string {
	if k == "" {
		return "string"
	}
	return k
}

func flagUsage(fs FlagSpec) string {
	// Backquotes in pflag usage name the flag's value; the contract's
	// prose uses them for code, so drop them.
	u := strings.ReplaceAll(strings.TrimSpace(fs.Usage), "`", "")
	if u == "" {
		u = fmt.Sprintf("The %s %s", fs.Field, map[string]string{"query": "parameter", "body": "field"}[fs.In])
	}
	u = strings.TrimSuffix(u, ".")
	switch fs.Kind {
	case "json":
		if fs.In == "query" {
			u += "; a JSON array or a comma-separated list"
		} else {
			u += "; JSON, or @file.json"
		}
	case "strings":
		u += "; comma-separated"
	case "vars":
		u += "; NAME=VALUE, or NAME to pass yours (repeatable), or a JSON object"
	}
	if len(fs.Enum) > 0 {
		u += " (one of: " + strings.Join(fs.Enum, ", ") + ")"
	}
	if fs.Flag == "project" {
		u += " (env PIER_PROJECT)"
	}
	if fs.Required {
		u += " (required)"
	}
	return u
}

func argName(name string) string { return "<" + kebab(name) + ">" }

// kebab turns gateId into gate-id.
func kebab(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r + 'a' - 'A')
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func checkArgs(cmd *cobra.Command, spec *OperationSpec, args []string) error {
	if len(args) < len(spec.Args) {
		var missing []string
		for _, a := range spec.Args[len(args):] {
			missing = append(missing, argName(a.Name))
		}
		return UsageErrorf(cmd.CommandPath(), "missing argument %s (usage: %s)", strings.Join(missing, " "), cmd.UseLine())
	}
	if len(args) > len(spec.Args) {
		return UsageErrorf(cmd.CommandPath(), "unexpected argument %q (usage: %s)", args[len(spec.Args)], cmd.UseLine())
	}
	for i, a := range args {
		if a == "" {
			return UsageErrorf(cmd.CommandPath(), "argument %s must not be empty", argName(spec.Args[i].Name))
		}
	}
	return nil
}

// build fills Path, Query and Body from the arguments, --data and flags.
func (o *OperationOptions) build(cmd *cobra.Command, values map[string]flagValue) error {
	spec := o.Spec
	where := cmd.CommandPath()
	// The body starts from --data; flags override its top-level fields.
	body, err := o.readData(where)
	if err != nil {
		return err
	}
	path := spec.Path
	query := url.Values{}
	for i, a := range spec.Args {
		switch a.In {
		case "path":
			path = strings.ReplaceAll(path, "{"+a.Name+"}", url.PathEscape(o.Args[i]))
		case "query":
			query.Set(a.Name, o.Args[i])
		case "body":
			s, _ := json.Marshal(o.Args[i])
			body.set(a.Name, s)
		}
	}
	if err := o.applyFlags(cmd, values, query, &body); err != nil {
		return err
	}
	o.Path = path
	if len(query) > 0 {
		o.Query = query
	}
	switch {
	case !spec.HasBody:
		o.Body = nil
	case body.raw != nil && !body.overridden:
		o.Body = body.raw // send --data exactly as given
	case body.fields != nil:
		b, err := marshalObject(body.fields)
		if err != nil {
			return UsageErrorf(where, "building the body: %v", err)
		}
		o.Body = b
	case spec.BodyRequired:
		o.Body = []byte("{}")
	}
	return nil
}

// requestBody is the body being built: --data as given, its top-level
// fields, and whether an argument or a flag overrode one.
type requestBody struct {
	fields     map[string]json.RawMessage
	raw        []byte
	overridden bool
}

func (b *requestBody) set(field string, v json.RawMessage) {
	b.overridden = true
	if b.fields == nil {
		b.fields = map[string]json.RawMessage{}
	}
	b.fields[field] = v
}

// readData reads --data, which must be a JSON object.
func (o *OperationOptions) readData(where string) (requestBody, error) {
	var body requestBody
	if o.Data == "" {
		return body, nil
	}
	b, err := ReadDataArg(o.Data, o.IO)
	if err != nil {
		return body, UsageErrorf(where, "--data: %v", err)
	}
	b = bytes.TrimSpace(b)
	if !json.Valid(b) {
		return body, UsageErrorf(where, "--data is not valid JSON")
	}
	if err := json.Unmarshal(b, &body.fields); err != nil || body.fields == nil {
		return body, UsageErrorf(where, "--data must be a JSON object")
	}
	body.raw = b
	return body, nil
}

// applyFlags puts the flags given into the query or the body, and refuses
// a required flag that is neither given nor a field of --data.
func (o *OperationOptions) applyFlags(cmd *cobra.Command, values map[string]flagValue, query url.Values, body *requestBody) error {
	where := cmd.CommandPath()
	var missing []string
	for _, fs := range o.Spec.Flags {
		v := values[fs.Flag]
		if !cmd.Flags().Changed(fs.Flag) {
			if fs.Required {
				_, inData := body.fields[fs.Field]
				if fs.In != "body" || !inData {
					missing = append(missing, "--"+fs.Flag)
				}
			}
			continue
		}
		switch fs.In {
		case "query":
			query.Set(fs.Field, v.QueryText())
		case "body":
			j, err := v.JSON(o.IO)
			if err != nil {
				return UsageErrorf(where, "--%s: %v", fs.Flag, err)
			}
			body.set(fs.Field, j)
		}
	}
	if len(missing) > 0 {
		return UsageErrorf(where, "required flag %s not set", strings.Join(missing, ", "))
	}
	return nil
}

// marshalObject writes fields in sorted order, keeping each value's text
// (so a number such as 12.5 is sent exactly as typed).
func marshalObject(m map[string]json.RawMessage) ([]byte, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		var c bytes.Buffer
		if err := json.Compact(&c, m[k]); err != nil {
			return nil, fmt.Errorf("field %s: %w", k, err)
		}
		b.Write(c.Bytes())
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// ReadDataArg reads "@file", "-" (stdin) or returns the text itself.
func ReadDataArg(s string, streams *IOStreams) ([]byte, error) {
	switch {
	case s == "-":
		if streams == nil || streams.In == nil {
			return nil, errors.New("no standard input")
		}
		return io.ReadAll(io.LimitReader(streams.In, 64<<20))
	case strings.HasPrefix(s, "@"):
		return os.ReadFile(s[1:])
	}
	return []byte(s), nil
}

// flagValue is an operation flag: a pflag.Value that can also render
// itself as a query value and as a JSON body value.
type flagValue interface {
	pflag.Value
	QueryText() string
	JSON(*IOStreams) (json.RawMessage, error)
}

// textValue keeps the flag's text as typed. Its kind validates it: int and
// number must be JSON numbers; json must be JSON (or, for a query list, a
// comma-separated list); an enum restricts the values.
type textValue struct {
	kind string
	enum []string
	s    string
}

func (v *textValue) String() string { return v.s }
func (v *textValue) Type() string   { return v.kind }

func (v *textValue) Set(s string) error {
	switch v.kind {
	case "int":
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			return errors.New("not an integer")
		}
	case "number":
		if !isJSONNumber(s) {
			return errors.New("not a number")
		}
	}
	if len(v.enum) > 0 && !slices.Contains(v.enum, s) {
		return fmt.Errorf("must be one of %s", strings.Join(v.enum, ", "))
	}
	v.s = s
	return nil
}

func (v *textValue) QueryText() string {
	if v.kind != "json" {
		return v.s
	}
	// A JSON list is sent the way the contract's form/explode=false
	// parameters expect: one comma-joined value.
	t := strings.TrimSpace(v.s)
	var list []json.RawMessage
	if strings.HasPrefix(t, "[") && json.Unmarshal([]byte(t), &list) == nil {
		parts := make([]string, len(list))
		for i, e := range list {
			parts[i] = scalarText(e)
		}
		return strings.Join(parts, ",")
	}
	if strings.HasPrefix(t, `"`) {
		return scalarText(json.RawMessage(t))
	}
	return v.s
}

func scalarText(e json.RawMessage) string {
	var s string
	if json.Unmarshal(e, &s) == nil {
		return s
	}
	return string(e)
}

func (v *textValue) JSON(streams *IOStreams) (json.RawMessage, error) {
	switch v.kind {
	case "int", "number":
		return json.RawMessage(v.s), nil
	case "json":
		b, err := ReadDataArg(v.s, streams)
		if err != nil {
			return nil, err
		}
		b = bytes.TrimSpace(b)
		if !json.Valid(b) {
			return nil, errors.New("not valid JSON")
		}
		return b, nil
	}
	return json.Marshal(v.s)
}

func isJSONNumber(s string) bool {
	var n json.Number
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		return false
	}
	return string(n) == s
}

type boolValue struct{ b bool }

func (v *boolValue) String() string { return strconv.FormatBool(v.b) }
func (v *boolValue) Type() string   { return "bool" }
func (v *boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("not true or false")
	}
	v.b = b
	return nil
}
func (v *boolValue) QueryText() string { return v.String() }
func (v *boolValue) JSON(*IOStreams) (json.RawMessage, error) {
	return json.RawMessage(v.String()), nil
}

// stringsValue collects comma-separated values; repeating the flag adds more.
type stringsValue struct{ list []string }

func (v *stringsValue) String() string { return strings.Join(v.list, ",") }
func (v *stringsValue) Type() string   { return "strings" }
func (v *stringsValue) Set(s string) error {
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			v.list = append(v.list, p)
		}
	}
	return nil
}
func (v *stringsValue) QueryText() string { return v.String() }
func (v *stringsValue) JSON(*IOStreams) (json.RawMessage, error) {
	if v.list == nil {
		return json.RawMessage("[]"), nil
	}
	return json.Marshal(v.list)
}

// varsValue is a map of variables, set as NAME=VALUE once per variable
// (NAME alone passes the caller's own), the way launch --env takes them;
// a JSON object (inline or @file) still works for scripts that send one.
type varsValue struct {
	flag   string
	getenv func(string) string
	vars   map[string]string
	raw    string // a JSON object given instead
}

func (v *varsValue) String() string {
	if v.raw != "" {
		return v.raw
	}
	names := make([]string, 0, len(v.vars))
	for k := range v.vars {
		names = append(names, k+"="+v.vars[k])
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}
func (v *varsValue) Type() string { return "NAME=VALUE" }
func (v *varsValue) Set(s string) error {
	if t := strings.TrimSpace(s); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "@") || t == "-" {
		if len(v.vars) > 0 {
			return errors.New("give NAME=VALUE pairs or one JSON object, not both")
		}
		v.raw = s
		return nil
	}
	if v.raw != "" {
		return errors.New("give NAME=VALUE pairs or one JSON object, not both")
	}
	m, err := ParseAssignments(v.flag, []string{s}, v.getenv)
	if err != nil {
		return err
	}
	if v.vars == nil {
		v.vars = map[string]string{}
	}
	for k, val := range m {
		v.vars[k] = val
	}
	return nil
}
func (v *varsValue) QueryText() string { return v.String() }
func (v *varsValue) JSON(streams *IOStreams) (json.RawMessage, error) {
	if v.raw != "" {
		b, err := ReadDataArg(v.raw, streams)
		if err != nil {
			return nil, err
		}
		b = bytes.TrimSpace(b)
		var m map[string]string
		if json.Unmarshal(b, &m) != nil {
			return nil, errors.New("not a JSON object of strings; or give NAME=VALUE")
		}
		return b, nil
	}
	if v.vars == nil {
		return json.RawMessage("{}"), nil
	}
	return json.Marshal(v.vars)
}

// runOperation calls the API and renders the answer.
func runOperation(ctx context.Context, o *OperationOptions) error {
	f := o.Factory
	client, err := f.Client()
	if o.Spec.Anonymous {
		client, err = f.AnonymousClient()
	}
	if err != nil {
		return err
	}
	ctx, cancel := f.Context(ctx)
	defer cancel()
	resp, err := client.Call(ctx, o.Spec.Method, o.Path, o.Query, o.Body, o.Header())
	if err != nil {
		return err
	}
	if o.PollWait {
		if resp, err = waitSignup(ctx, f, client, o, resp); err != nil {
			return err
		}
	}
	// One rule for every command whose answer is a task: wait until it
	// ends or needs a human, unless --no-wait asks for the handle.
	if id := PendingTask(resp.Body); id != "" && !f.Config.NoWait {
		final, err := WaitTask(ctx, f, client, id)
		if err != nil {
			return err
		}
		resp = final
	}
	if err := renderResponse(o, resp); err != nil {
		return err
	}
	if err := WaitingForHuman(resp.Body); err != nil {
		return err
	}
	return TaskFailed(resp.Body)
}

// PendingTask is the id of the task an answer carries while it is queued
// or running, or "".
func PendingTask(body []byte) string {
	var env struct {
		Data struct {
			TaskID string `json:"taskId"`
			State  string `json:"state"`
			Kind   string `json:"kind"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &env) != nil || env.Data.TaskID == "" {
		return ""
	}
	if env.Data.State == "queued" || env.Data.State == "running" {
		return env.Data.TaskID
	}
	return ""
}

// WaitTask polls a task until it leaves queued and running, showing its
// step on stderr (a spinner on a terminal), and returns the last answer.
func WaitTask(ctx context.Context, f *Factory, c *sdk.Client, id string) (*sdk.Response, error) {
	p := NewProgress(f)
	defer p.Done()
	goesOn := fmt.Sprintf("Task %s goes on on the server: follow it with pier tasks get %s", id, id)
	for {
		resp, err := c.Call(ctx, "GET", "/v1/tasks/"+url.PathEscape(id), nil, nil, nil)
		if err != nil {
			return nil, Interrupted(ctx, err, goesOn)
		}
		var env struct {
			Data sdk.TaskHandle `json:"data"`
		}
		if err := json.Unmarshal(resp.Body, &env); err != nil {
			return nil, err
		}
		t := env.Data
		if t.State != sdk.TaskHandleStateQueued && t.State != sdk.TaskHandleStateRunning {
			return resp, nil
		}
		step := string(t.State)
		for _, s := range t.Steps {
			if s.State == sdk.TaskStepStateRunning {
				step = string(s.Name) + " (running)"
				break
			}
		}
		p.Step("task " + id + ": " + step)
		select {
		case <-ctx.Done():
			err := fmt.Errorf("task %s still %s when the wait ended (--timeout); follow it with: pier tasks get %s: %w", id, t.State, id, ctx.Err())
			return nil, Interrupted(ctx, err, goesOn)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// signupPollEvery is how often signup poll --wait asks again.
const signupPollEvery = 2 * time.Second

// waitSignup repeats a signup poll while the human has not finished
// (pending_review, pending_card), showing the state on stderr, and returns
// the first answer past them.
func waitSignup(ctx context.Context, f *Factory, c *sdk.Client, o *OperationOptions, resp *sdk.Response) (*sdk.Response, error) {
	p := NewProgress(f)
	defer p.Done()
	for {
		var env struct {
			Data struct {
				State string `json:"state"`
			} `json:"data"`
		}
		if err := json.Unmarshal(resp.Body, &env); err != nil {
			return nil, err
		}
		if env.Data.State != "pending_review" && env.Data.State != "pending_card" {
			return resp, nil
		}
		p.Step("signup: " + env.Data.State + " (waiting for the human)")
		select {
		case <-ctx.Done():
			// The human has yet to act: exit 5, as a task waiting for
			// one does.
			return nil, &ErrInputRequired{Message: "the signup is still " + env.Data.State + " when the wait ended (--timeout): the human has not finished; poll again later"}
		case <-time.After(signupPollEvery):
		}
		var err error
		if resp, err = c.Call(ctx, o.Spec.Method, o.Path, o.Query, o.Body, o.Header()); err != nil {
			return nil, err
		}
	}
}

// TaskFailed turns an answer carrying a failed or canceled task into
// *sdk.TaskFailedError, which exits with the code of its cause.
func TaskFailed(body []byte) error {
	var env struct {
		Data sdk.TaskHandle `json:"data"`
	}
	if json.Unmarshal(body, &env) != nil || env.Data.TaskId == "" {
		return nil
	}
	if env.Data.State == sdk.TaskHandleStateFailed || env.Data.State == sdk.TaskHandleStateCanceled {
		t := env.Data
		return &sdk.TaskFailedError{Task: &t}
	}
	return nil
}

// WaitingForHuman turns an answer carrying a task in input_required (a
// launch, a budget raise, or polling such a task) into ErrInputRequired, so
// every command that can produce that state exits 5 after printing it.
func WaitingForHuman(body []byte) error {
	var env struct {
		Data struct {
			TaskID      string `json:"taskId"`
			State       string `json:"state"`
			ApprovalURL string `json:"approvalUrl"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &env) != nil || env.Data.TaskID == "" || env.Data.State != "input_required" {
		return nil
	}
	return &ErrInputRequired{ApprovalURL: env.Data.ApprovalURL, TaskID: env.Data.TaskID, Message: "task " + env.Data.TaskID + " waits for a human"}
}

// OperationAnnotation is the cobra annotation holding a command's
// operationId, for tools that map commands back to the contract.
const OperationAnnotation = specAnnotation

// FlagEnum is the values an operation flag accepts, or nil when it takes
// any.
func FlagEnum(fl *pflag.Flag) []string {
	if tv, ok := fl.Value.(*textValue); ok {
		return tv.enum
	}
	return nil
}
