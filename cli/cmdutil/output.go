package cmdutil

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/pierhq/pier/sdk"
	"github.com/spf13/cobra"
)

// renderResponse writes a successful answer: as received with --json,
// otherwise as a summary of data and the next actions.
func renderResponse(o *OperationOptions, resp *sdk.Response) error {
	out := o.IO.Out
	if o.JSON {
		return WriteRaw(out, resp.Body)
	}
	env, ok := decodeOrdered(resp.Body)
	if !ok || env.kind != kindObject || env.get("data") == nil {
		// Not an envelope, such as a published artifact or a script.
		return WriteRaw(out, resp.Body)
	}
	st := NewStyles(o.Factory, o.IO.StdoutIsTerminal)
	var b strings.Builder
	data := env.get("data")
	if text, ok := decodedJWS(resp.Body); ok {
		// A signed artifact (a sandbox proof): its header and payload
		// decoded, and every JWS inside them, so a person can read it.
		b.WriteString(text)
		writeActions(&b, st, o.Factory, o.root, env.get("actions"))
		_, err := io.WriteString(out, b.String())
		return err
	}
	skip := ""
	if o.Spec.Table != nil {
		if arr := data.get(o.Spec.Table.Path); arr != nil && arr.kind == kindArray {
			skip = o.Spec.Table.Path
		}
	}
	if skip != "" {
		b.WriteString(renderTable(st, data.get(skip), o.Spec.Table.Columns))
		b.WriteString("\n")
		if data.kind == kindObject && len(data.keys) > 1 {
			b.WriteString("\n")
		}
	}
	if data.kind == kindObject {
		// The undo is a tool action: shown as the pier command that
		// makes it, as every next step is.
		undo := data.get("undo")
		if cmd := undoCommand(o.Factory, o.root, undo); cmd != "" {
			data = withoutKey(data, "undo")
		} else {
			undo = nil
		}
		writeFields(&b, st, data, 0, skip)
		if undo != nil {
			fmt.Fprintf(&b, "%s %s\n", st.Key.Render("undo:"), undoCommand(o.Factory, o.root, undo))
		}
	} else {
		writeValue(&b, st, "", data, 0)
	}
	if env.get("replayed") != nil && env.get("replayed").text == "true" {
		b.WriteString(st.Faint.Render("(a stored replay of an earlier answer)") + "\n")
	}
	writeActions(&b, st, o.Factory, o.root, env.get("actions"))
	_, err := io.WriteString(out, b.String())
	return err
}

// undoCommand is an undo's reversal as the command that makes it, or ""
// when it has none (irreversible) or none renders.
func undoCommand(f *Factory, root *cobra.Command, undo *node) string {
	cmd := undo.get("command")
	if cmd == nil || cmd.kind != kindObject {
		return ""
	}
	raw, err := json.Marshal(cmd)
	if err != nil {
		return ""
	}
	var t sdk.ToolAction
	if json.Unmarshal(raw, &t) != nil || t.Tool == "" {
		return ""
	}
	return commandHint(f, root, t)
}

// withoutKey is obj without one of its members.
func withoutKey(obj *node, key string) *node {
	out := &node{kind: obj.kind}
	for i, k := range obj.keys {
		if k != key {
			out.keys = append(out.keys, k)
			out.vals = append(out.vals, obj.vals[i])
		}
	}
	return out
}

// WriteRaw writes b as it is, ending it with a newline when it lacks one.
func WriteRaw(w io.Writer, b []byte) error {
	if _, err := w.Write(b); err != nil {
		return err
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		_, err := io.WriteString(w, "\n")
		return err
	}
	return nil
}

// PrintError reports err: in human mode on stderr, with the details and
// next actions of an API error; with --json an API error's envelope also
// goes to stdout, as received.
func PrintError(f *Factory, root *cobra.Command, err error) {
	if err == nil {
		return
	}
	st := NewStyles(f, f.IO.StderrIsTerminal)
	var apiErr *sdk.Error
	var usage *UsageError
	var failed *sdk.TaskFailedError
	var interrupted *ErrInterrupted
	var b strings.Builder
	switch {
	case errors.As(err, &interrupted):
		// Checked first: the request it cut short looks like a network
		// error, and the server is not the reason it stopped.
		fmt.Fprintf(&b, "%s interrupted (Ctrl-C) before the command finished\n", st.Err.Render("error:"))
		next := interrupted.Next
		if next == "" {
			next = interruptedNext
		}
		b.WriteString("  " + next + "\n")
	case errors.As(err, &apiErr):
		writeAPIError(&b, st, f, root, apiErr)
	case errors.As(err, &failed) && failedCause(failed) != "":
		// A failed task's result says why: its blockedBy, its message (for
		// a process, the last lines it wrote) and what to do next.
		res := *failed.Task.Result
		msg, _ := res["message"].(string)
		first, rest, _ := strings.Cut(strings.TrimRight(msg, "\n"), "\n")
		fmt.Fprintf(&b, "%s task %s %s: %s: %s\n", st.Err.Render("error:"), failed.Task.TaskId, failed.Task.State, failedCause(failed), first)
		if rest != "" {
			for _, l := range strings.Split(rest, "\n") {
				b.WriteString("  " + l + "\n")
			}
		}
		if acts, ok := res["actions"]; ok && !f.Config.JSON {
			if raw, err := json.Marshal(acts); err == nil {
				if n, ok := decodeOrdered(raw); ok {
					writeActions(&b, st, f, root, n)
				}
			}
		}
	case errors.As(err, &usage):
		fmt.Fprintf(&b, "%s %s\n", st.Err.Render("error:"), usage.Err)
		if usage.Command != "" {
			b.WriteString(st.Faint.Render(fmt.Sprintf("Run '%s --help' for usage.", usage.Command)) + "\n")
		}
		writeCLIEnvelope(f, "input:invalid", usage.Err.Error(), false, cliAction{Kind: "manual", Actor: "agent", Step: "fix_input"})
	case isNetworkError(err):
		fmt.Fprintf(&b, "%s %s\n", st.Err.Render("error:"), err)
		writeCLIEnvelope(f, "internal:unavailable", fmt.Sprintf("no answer from %s: %v", f.BaseURL(), err), true,
			cliAction{Kind: "manual", Actor: "human", Step: "contact_operator"})
		hint := fmt.Sprintf("Is Pier running at %s? Set --base-url or PIER_BASE_URL.", f.BaseURL())
		if errors.Is(err, syscall.ECONNREFUSED) && loopback(f.BaseURL()) {
			hint = fmt.Sprintf("Nothing answers at %s. Start a server on this machine with: pier server (it says where it serves), or point at one with --base-url or PIER_BASE_URL.", f.BaseURL())
		}
		if errors.Is(err, context.DeadlineExceeded) && f.Config.Timeout > 0 {
			// The server may well have answered every call: the command's
			// own limit ran out, such as while waiting for a task.
			hint = fmt.Sprintf("The command ran past its --timeout of %s: raise it, or pass --timeout 0 for no limit.", f.Config.Timeout)
		}
		b.WriteString(st.Faint.Render(hint) + "\n")
	default:
		fmt.Fprintf(&b, "%s %s\n", st.Err.Render("error:"), err)
	}
	io.WriteString(f.IO.ErrOut, b.String())
}

// cliEnvelope is the contract's error envelope (error.json) for an error
// the CLI makes itself, which --json writes to stdout as it writes the
// server's: a script reading stdout gets an envelope whichever side
// refused. A usage error is input:invalid; a server that does not answer
// (refused, unreachable, past --timeout) is internal:unavailable, which
// retrying can mend.
type cliEnvelope struct {
	BlockedBy     string      `json:"blockedBy"`
	Code          string      `json:"code"`
	Message       string      `json:"message"`
	Retryable     bool        `json:"retryable"`
	Actions       []cliAction `json:"actions"`
	FormatVersion string      `json:"formatVersion"`
}

// cliAction is a manual action: the contract's closed list of steps.
type cliAction struct {
	Kind  string `json:"kind"`
	Actor string `json:"actor"`
	Step  string `json:"step"`
}

func writeCLIEnvelope(f *Factory, code, msg string, retryable bool, next cliAction) {
	if !f.Config.JSON {
		return
	}
	b, err := json.Marshal(cliEnvelope{BlockedBy: code, Code: code, Message: msg, Retryable: retryable, Actions: []cliAction{next}, FormatVersion: "1"})
	if err == nil {
		WriteRaw(f.IO.Out, b)
	}
}

// writeAPIError writes an API error: with --json its envelope to stdout as
// received; on stderr its cause, message, details and, in human mode, its
// next actions.
func writeAPIError(b *strings.Builder, st Styles, f *Factory, root *cobra.Command, apiErr *sdk.Error) {
	if f.Config.JSON {
		body := apiErr.Body
		if !json.Valid(body) {
			body, _ = json.Marshal(map[string]any{
				"blockedBy": apiErr.BlockedBy, "message": apiErr.Message,
				"retryable": apiErr.Retryable, "actions": []any{},
			})
		}
		WriteRaw(f.IO.Out, body)
	}
	msg := cliAuthMessage(f, apiErr)
	fmt.Fprintf(b, "%s %s: %s\n", st.Err.Render("error:"), apiErr.BlockedBy, msg)
	for _, d := range apiErr.Details {
		fmt.Fprintf(b, "  %s: %s\n", st.Key.Render(d.Field), d.Problem)
	}
	if apiErr.Retryable {
		msg := "  retryable"
		if apiErr.RetryAfterSeconds > 0 {
			msg += fmt.Sprintf(", after %ds", apiErr.RetryAfterSeconds)
		}
		b.WriteString(st.Faint.Render(msg) + "\n")
	}
	if !f.Config.JSON {
		if env, ok := decodeOrdered(apiErr.Body); ok && env.kind == kindObject {
			writeActions(b, st, f, root, env.get("actions"))
		}
	}
}

// cliAuthMessage is the message of an API error, in the CLI's words for
// an auth error the server words for HTTP callers: a CLI user sets a
// variable or a flag, and a key that the server does not know is most
// often another server's or a revoked one.
func cliAuthMessage(f *Factory, apiErr *sdk.Error) string {
	key := f.APIKey()
	switch {
	case apiErr.BlockedBy == "auth:missing_credentials" && key == "":
		return "this command needs an API key, and none is set: export PIER_API_KEY=agk_… or pass --api-key agk_…\n" +
			"  Get a key: on the server's machine, pier admin create-key (it prints one); or sign up with pier signup create, and a human's review returns one.\n" +
			"  Check it with: pier whoami"
	case apiErr.BlockedBy == "auth:invalid_credentials" && key != "":
		from := "PIER_API_KEY"
		if f.Config.APIKey != "" {
			from = "--api-key"
		}
		return fmt.Sprintf("%s (the key in %s is unknown to the server at %s: revoked, mistyped, or made by another server)\n", apiErr.Message, from, f.BaseURL()) +
			"  Get a new key: on that server's machine, pier admin create-key (it prints one); or a person of the organisation makes one on its keys page.\n" +
			"  Then export PIER_API_KEY=agk_… and check it with: pier whoami"
	}
	return apiErr.Message
}

// failedCause is the blockedBy a failed task's result names, or "".
func failedCause(e *sdk.TaskFailedError) string {
	if e.Task == nil || e.Task.Result == nil {
		return ""
	}
	code, _ := (*e.Task.Result)["blockedBy"].(string)
	return code
}

// writeActions prints the typed next steps as "Next:" lines.
func writeActions(b *strings.Builder, st Styles, f *Factory, root *cobra.Command, actions *node) {
	if actions == nil || actions.kind != kindArray || len(actions.items) == 0 {
		return
	}
	b.WriteString(st.Bold.Render("Next:") + "\n")
	for _, item := range actions.items {
		raw, _ := json.Marshal(item)
		var a sdk.Action
		if a.UnmarshalJSON(raw) != nil {
			continue
		}
		fmt.Fprintf(b, "  %s %s\n", st.Faint.Render("→"), describeAction(f, root, a))
	}
}

// describeAction renders one action on one line.
func describeAction(f *Factory, root *cobra.Command, a sdk.Action) string {
	kind, _ := a.Discriminator()
	switch kind {
	case "tool":
		t, err := a.AsToolAction()
		if err != nil {
			break
		}
		call := fmt.Sprintf("%s %s", t.Http.Method, t.Http.Path)
		s := ""
		if hint := commandHint(f, root, t); hint != "" {
			s = fmt.Sprintf("%s  (%s, %s)", hint, t.Tool, call)
		} else {
			s = fmt.Sprintf("%s  (%s)", t.Tool, call)
		}
		if t.RetryAfterSeconds != nil {
			s += fmt.Sprintf(" after %ds", *t.RetryAfterSeconds)
		}
		return actorPrefix(string(t.Actor)) + s
	case "url":
		u, err := a.AsUrlAction()
		if err != nil {
			break
		}
		return actorPrefix(string(u.Actor)) + fmt.Sprintf("open %s  (%s)", u.Url, u.Purpose)
	case "manual":
		m, err := a.AsManualAction()
		if err != nil {
			break
		}
		return actorPrefix(string(m.Actor)) + string(m.Step)
	case "stop":
		s, err := a.AsStopAction()
		if err != nil {
			break
		}
		return "stop: " + string(s.Reason)
	case "request":
		r, err := a.AsRequestAction()
		if err != nil {
			break
		}
		if cmd := sandboxCommand(r); cmd != "" {
			return actorPrefix(string(r.Actor)) + fmt.Sprintf("%s  (%s %s)", cmd, r.Method, r.Url)
		}
		return actorPrefix(string(r.Actor)) + fmt.Sprintf("%s %s", r.Method, r.Url)
	}
	raw, _ := a.MarshalJSON()
	return string(raw)
}

// sandboxCommand is the pier command that makes a sandbox request action's
// call, by the step it names, with the ids its URL carries; values the
// reader supplies are placeholders.
func sandboxCommand(r sdk.RequestAction) string {
	if r.Id == nil {
		return ""
	}
	u, err := url.Parse(r.Url)
	if err != nil {
		return ""
	}
	seg := strings.Split(strings.Trim(u.Path, "/"), "/")
	at := func(i int) string {
		if i < len(seg) {
			return seg[i]
		}
		return Placeholder("id")
	}
	// /v1/sandbox/sessions/{id}/... and /v1/sandbox/proofs/{id}
	switch *r.Id {
	case "create_session":
		return "pier sandbox sessions create"
	case "fetch_issuer_key":
		return "pier reference issuer-jwks"
	case "register_mandate":
		return "pier holder mandate --session " + at(3) + " --registration-secret " + Placeholder("registrationSecret") + " --key " + Placeholder("keyFile")
	case "attempt":
		return "pier sandbox attempts create " + at(3) + " --scenario " + Placeholder("scenario") + " --api-key " + Placeholder("capability")
	case "decide_gate":
		return "pier holder decide --session " + at(3) + " --key " + Placeholder("keyFile") + " --gate-file " + Placeholder("attemptJson")
	case "read_proof":
		return "pier sandbox proofs get " + at(3)
	case "read_session":
		return "pier sandbox sessions get " + at(3)
	}
	return ""
}

func actorPrefix(actor string) string {
	if actor == "" || actor == "agent" {
		return ""
	}
	return actor + ": "
}

// commandHint finds the command of a tool action's operation and writes
// the call as a pier command line.
func commandHint(f *Factory, root *cobra.Command, t sdk.ToolAction) string {
	if root == nil {
		return ""
	}
	cmd := FindOperationCommand(root, t.Tool)
	if cmd == nil {
		return ""
	}
	spec := f.specFor(cmd)
	if spec == nil {
		return cmd.CommandPath()
	}
	args := map[string]any{}
	if t.Arguments != nil {
		for k, v := range *t.Arguments {
			args[k] = v
		}
	}
	for k, v := range pathParams(spec.Path, t.Http.Path) {
		if _, ok := args[k]; !ok && !strings.HasPrefix(v, "{") {
			args[k] = v
		}
	}
	missing := map[string]bool{}
	if t.MissingArguments != nil {
		for _, m := range *t.MissingArguments {
			missing[m] = true
		}
	}
	// A hint runs as printed once its placeholders, written <LIKE-THIS>,
	// are filled in: every argument the action carries is spelt as the
	// command takes it, and every one it lacks but needs is a placeholder.
	parts := []string{cmd.CommandPath()}
	for _, a := range spec.Args {
		v, ok := args[a.Name]
		if !ok {
			parts = append(parts, Placeholder(a.Name))
			continue
		}
		parts = append(parts, shellWord(argText(v)))
		delete(args, a.Name)
	}
	for _, fs := range spec.Flags {
		v, ok := args[fs.Field]
		switch {
		case !ok && (missing[fs.Field] || fs.Required):
			parts = append(parts, "--"+fs.Flag, Placeholder(fs.Field))
		case !ok:
		case fs.Kind == "bool":
			// A boolean flag takes no separate value: --flag or --flag=false.
			if b, _ := v.(bool); b {
				parts = append(parts, "--"+fs.Flag)
			} else {
				parts = append(parts, "--"+fs.Flag+"=false")
			}
		case fs.Kind == "strings":
			parts = append(parts, "--"+fs.Flag, shellWord(listText(v)))
		case fs.Kind == "vars":
			// One NAME=VALUE a variable, in name order.
			m, _ := v.(map[string]any)
			names := make([]string, 0, len(m))
			for k := range m {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				parts = append(parts, "--"+fs.Flag, shellWord(k+"="+argText(m[k])))
			}
		default:
			parts = append(parts, "--"+fs.Flag, shellWord(argText(v)))
		}
	}
	return strings.Join(parts, " ")
}

// Placeholder is how a hint marks a value the reader must supply: the
// argument's name in capitals between angle brackets, such as <PROJECT-ID>.
func Placeholder(name string) string { return "<" + strings.ToUpper(kebab(name)) + ">" }

// listText renders a list argument as the comma-separated value a
// strings flag takes.
func listText(v any) string {
	l, ok := v.([]any)
	if !ok {
		return argText(v)
	}
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = argText(e)
	}
	return strings.Join(parts, ",")
}

func argText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@=,+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// pathParams matches a concrete path against a template.
func pathParams(template, path string) map[string]string {
	t := strings.Split(strings.Trim(template, "/"), "/")
	p := strings.Split(strings.Trim(path, "/"), "/")
	out := map[string]string{}
	if len(t) != len(p) {
		return out
	}
	for i := range t {
		if strings.HasPrefix(t[i], "{") && strings.HasSuffix(t[i], "}") {
			out[t[i][1:len(t[i])-1]] = p[i]
		}
	}
	return out
}

const specAnnotation = "operation"

// FindOperationCommand is the command below c that carries operation id
// in its OperationAnnotation, or nil.
func FindOperationCommand(c *cobra.Command, id string) *cobra.Command {
	if c.Annotations[specAnnotation] == id {
		return c
	}
	for _, sub := range c.Commands() {
		if found := FindOperationCommand(sub, id); found != nil {
			return found
		}
	}
	return nil
}

// --- human rendering of JSON -------------------------------------------

const nullText = "—"

func renderTable(st Styles, arr *node, columns []string) string {
	headers := make([]string, len(columns))
	for i, c := range columns {
		headers[i] = strings.ToUpper(strings.ReplaceAll(kebab(c), "-", " "))
	}
	rows := make([][]string, 0, len(arr.items))
	for _, item := range arr.items {
		row := make([]string, len(columns))
		for i, c := range columns {
			row[i] = cellText(c, item.get(c))
		}
		rows = append(rows, row)
	}
	return renderRows(st, headers, rows)
}

// cellText formats a scalar: null as "—", booleans as yes/no, amounts in
// fields ending in Usd as $0.00, other numbers as sent.
func cellText(key string, n *node) string {
	if n == nil {
		return nullText
	}
	switch n.kind {
	case kindNull:
		return nullText
	case kindBool:
		if n.text == "true" {
			return "yes"
		}
		return "no"
	case kindNumber:
		if strings.HasSuffix(key, "Usd") {
			if v, err := strconv.ParseFloat(n.text, 64); err == nil {
				return fmt.Sprintf("$%.2f", v)
			}
		}
		return n.text
	case kindString:
		return n.text
	case kindArray:
		if allScalar(n.items) {
			parts := make([]string, len(n.items))
			for i, e := range n.items {
				parts[i] = cellText(key, e)
			}
			return strings.Join(parts, ", ")
		}
	}
	b, _ := json.Marshal(n)
	return string(b)
}

func allScalar(items []*node) bool {
	for _, e := range items {
		if e.kind == kindObject || e.kind == kindArray {
			return false
		}
	}
	return true
}

func writeFields(b *strings.Builder, st Styles, obj *node, indent int, skip string) {
	for i, k := range obj.keys {
		if k == skip && indent == 0 {
			continue
		}
		writeValue(b, st, k, obj.vals[i], indent)
	}
}

func writeValue(b *strings.Builder, st Styles, key string, v *node, indent int) {
	pad := strings.Repeat("  ", indent)
	label := ""
	if key != "" {
		label = st.Key.Render(key) + ": "
	}
	switch {
	case v.kind == kindObject:
		if len(v.keys) == 0 {
			fmt.Fprintf(b, "%s%s%s\n", pad, label, st.Faint.Render("{}"))
			return
		}
		if key != "" {
			fmt.Fprintf(b, "%s%s\n", pad, st.Key.Render(key)+":")
			writeFields(b, st, v, indent+1, "")
		} else {
			writeFields(b, st, v, indent, "")
		}
	case v.kind == kindArray && !allScalar(v.items):
		fmt.Fprintf(b, "%s%s\n", pad, st.Key.Render(key)+":")
		for _, e := range v.items {
			var sub strings.Builder
			writeValue(&sub, st, "", e, 0)
			lines := strings.Split(strings.TrimRight(sub.String(), "\n"), "\n")
			for j, l := range lines {
				lead := "  "
				if j == 0 {
					lead = "- "
				}
				fmt.Fprintf(b, "%s  %s%s\n", pad, lead, l)
			}
		}
	case v.kind == kindArray && len(v.items) == 0:
		fmt.Fprintf(b, "%s%s%s\n", pad, label, st.Faint.Render("none"))
	default:
		fmt.Fprintf(b, "%s%s%s\n", pad, label, cellText(key, v))
	}
}

// --- ordered JSON --------------------------------------------------------

type nodeKind int

const (
	kindNull nodeKind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

// node is decoded JSON that keeps object key order and number text.
type node struct {
	kind  nodeKind
	text  string // bool, number or string value
	keys  []string
	vals  []*node
	items []*node
}

func (n *node) get(key string) *node {
	if n == nil || n.kind != kindObject {
		return nil
	}
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

func (n *node) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	switch n.kind {
	case kindNull:
		b.WriteString("null")
	case kindBool, kindNumber:
		b.WriteString(n.text)
	case kindString:
		s, _ := json.Marshal(n.text)
		b.Write(s)
	case kindArray:
		b.WriteByte('[')
		for i, e := range n.items {
			if i > 0 {
				b.WriteByte(',')
			}
			s, _ := e.MarshalJSON()
			b.Write(s)
		}
		b.WriteByte(']')
	case kindObject:
		b.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			ks, _ := json.Marshal(k)
			b.Write(ks)
			b.WriteByte(':')
			s, _ := n.vals[i].MarshalJSON()
			b.Write(s)
		}
		b.WriteByte('}')
	}
	return b.Bytes(), nil
}

func decodeOrdered(b []byte) (*node, bool) {
	if !json.Valid(b) {
		return nil, false
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	n, err := decodeNode(d)
	return n, err == nil
}

func decodeNode(d *json.Decoder) (*node, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &node{kind: kindNull}, nil
	case bool:
		return &node{kind: kindBool, text: strconv.FormatBool(t)}, nil
	case json.Number:
		return &node{kind: kindNumber, text: t.String()}, nil
	case string:
		return &node{kind: kindString, text: t}, nil
	case json.Delim:
		switch t {
		case '[':
			n := &node{kind: kindArray}
			for d.More() {
				e, err := decodeNode(d)
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, e)
			}
			_, err := d.Token()
			return n, err
		case '{':
			n := &node{kind: kindObject}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeNode(d)
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, kt.(string))
				n.vals = append(n.vals, v)
			}
			_, err := d.Token()
			return n, err
		}
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

var compactJWS = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]{16,}$`)
})

// decodedJWS renders an envelope whose data is a flattened JWS with its
// protected header and payload decoded, and every compact JWS found in
// them decoded in turn, as indented JSON.
func decodedJWS(body []byte) (string, bool) {
	var env struct {
		Data struct {
			Protected, Payload, Signature string
		} `json:"data"`
	}
	if json.Unmarshal(body, &env) != nil || env.Data.Protected == "" || env.Data.Signature == "" {
		return "", false
	}
	header, ok1 := b64JSON(env.Data.Protected)
	payload, ok2 := b64JSON(env.Data.Payload)
	if !ok1 || !ok2 {
		return "", false
	}
	view := map[string]any{"protected (decoded)": header, "payload (decoded)": ExpandJWS(payload), "signature": env.Data.Signature}
	b, err := json.MarshalIndent(view, "", "  ")
	if err != nil {
		return "", false
	}
	return string(b) + "\n", true
}

func b64JSON(s string) (any, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, false
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil, false
	}
	return v, true
}

// ExpandJWS replaces every compact JWS string in v with its decoded header
// and payload (the signature kept as it is).
func ExpandJWS(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = ExpandJWS(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = ExpandJWS(e)
		}
		return out
	case string:
		if !compactJWS().MatchString(x) {
			return x
		}
		parts := strings.Split(x, ".")
		h, ok1 := b64JSON(parts[0])
		p, ok2 := b64JSON(parts[1])
		if !ok1 || !ok2 {
			return x
		}
		return map[string]any{"jws": map[string]any{"header": h, "payload": ExpandJWS(p), "signature": parts[2]}}
	}
	return v
}

// loopback says whether base names this machine, where pier server would
// be the server to start.
func loopback(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
