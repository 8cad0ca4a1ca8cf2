package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/sdk"
)

// LaunchOptions are `pier launch`'s.
type LaunchOptions struct {
	Factory                    *cmdutil.Factory
	Dir, Project, Name, Domain string
	Years                      int
	Wait                       bool
	// JSONStream prints every envelope in turn (bundle, quote, launch,
	// finished task); --json alone prints only the last.
	JSONStream bool
	// Target is edge (a static site), process (an HTTP service) or
	// worker (a process with no HTTP).
	Target string
	// Run is the command of a process or worker; "" leaves it to the
	// bundle's Procfile.
	Run string
	// Env and Secrets are the variables a process or worker gets; secret
	// values are write-only.
	Env, Secrets map[string]string
	// HealthPath and HealthTimeout (seconds) say when a process counts as
	// healthy; "" and 0 leave the server's defaults (/ within 60 s).
	HealthPath    string
	HealthTimeout int
	// HealthGrace (seconds) is how long a worker must stay up to count as
	// healthy; 0 leaves the server's default (3 s).
	HealthGrace int
	// Addons are add-ons such as managed_postgres.
	Addons []string
}

// runs reports whether the launch runs a process (target process or
// worker).
func (o *LaunchOptions) runs() bool { return o.Target == "process" || o.Target == "worker" }

// workload is what a quote prices a process or worker launch as.
func (o *LaunchOptions) workload() sdk.Workload {
	switch {
	case slices.Contains(o.Addons, "managed_postgres"):
		return sdk.WorkloadDatabaseBackedApp
	case o.Target == "worker":
		return sdk.Workload("worker")
	}
	return sdk.WorkloadDynamicService
}

var labelRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`[^a-z0-9-]+`)
})

func defaultName(dir string) string {
	abs, _ := filepath.Abs(dir)
	n := strings.Trim(labelRE().ReplaceAllString(strings.ToLower(filepath.Base(abs)), "-"), "-")
	if n == "" || n[0] < 'a' || n[0] > 'z' {
		n = "site"
	}
	if len(n) > 40 {
		n = n[:40]
	}
	return n
}

const launchLong = `Upload a directory, quote what the launch costs, launch it and wait until it
is served over HTTPS.

--target edge (the default) serves the directory as a static site; it is
quoted only when --domain registers a domain. A --domain your
organisation owns already is not bought again: the launch attaches it (and
a service of that name that runs gets it attached first); when another
service holds it, the error names that service and the pier domains detach
and attach that move it. --target process runs an HTTP
service, --target worker a process with no HTTP. Their command is the
bundle's Procfile line (web: for a process, worker: for a worker) or --run;
the process gets PORT, the variables of --env and --secret (NAME=VALUE, or
NAME alone to pass the value of that variable in your environment; secret
values are never shown again), and, with --addon managed_postgres, a
database of its own in DATABASE_URL. A process counts as healthy once GET
--health-path answers below 500 within --health-timeout (by default / within
60s); a worker once it stayed up --health-grace (3s). Their launch is quoted
first (a monthly price), unless the project already runs a service of that
name: then the launch is its next version, which takes the traffic only once
healthy, and pier rollback serves the version before again.

Progress goes to stderr: each step and, once a process starts, its first
log lines. Stdout gets the preview URL (and the domain's URL) first, then
the service, its version and the task; with --json, one envelope: the
finished task (serviceId, taskId, previewUrl, domainUrl), or the launch's
answer with --no-wait, so jq .data.previewUrl prints the URL once.
--json-stream prints each envelope in turn instead, one a line: the
bundle, the quote, the launch and the finished task. It waits by default; --no-wait returns once the launch is
accepted. A version that never becomes healthy ends the task failed: its
message, with the last log lines, goes to stderr and the command exits 10
(pier help exit-codes). When a human must approve (buying a domain without
the buy_domain scope, or a quote over the project's approval threshold),
the service, preview URL and task are printed, the approval URL goes to
stderr, and the command exits with code 5, with --no-wait too; run pier
tasks get TASK_ID later.`

const launchExample = `  pier launch ./examples/site
  pier launch ./site --project prj_123 --domain acme.dev
  pier launch ./site --name blog --domain acme.dev    # acme.dev already yours: attached, no quote
  pier launch ./site --project prj_123 --json --no-wait
  pier launch ./examples/app --target process --env GREETING=hello --secret API_TOKEN
  pier launch ./api --target process --run "python3 server.py" --health-path /healthz --health-timeout 90s
  pier launch ./examples/worker --target worker --env INTERVAL=5 --health-grace 5s
  pier launch ./app --target process --addon managed_postgres`

// NewCmdLaunch is `pier launch`.
func NewCmdLaunch(f *cmdutil.Factory, runF func(*LaunchOptions) error) *cobra.Command {
	opts := &LaunchOptions{Factory: f}
	var env, secrets []string
	var healthTimeout, healthGrace string
	cmd := &cobra.Command{
		Use:     "launch <dir>",
		Short:   "Upload a site or an app, quote it, launch it and wait until it serves",
		Long:    launchLong,
		Example: launchExample,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Dir = args[0]
			if opts.Name == "" {
				opts.Name = defaultName(opts.Dir)
			}
			opts.Wait = !f.Config.NoWait
			if opts.JSONStream {
				f.Config.JSON = true
			}
			if err := opts.resolve(cmd, f, env, secrets, healthTimeout, healthGrace); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			if opts.Project == "" {
				p, err := cmdutil.OnlyProject(cmd.Context(), f)
				if err != nil {
					return err
				}
				opts.Project = p
			}
			return runLaunch(cmd.Context(), f, opts)
		},
	}
	launchFlags(cmd, f, opts, &env, &secrets, &healthTimeout, &healthGrace)
	return cmd
}

// launchFlags binds `pier launch`'s flags.
func launchFlags(cmd *cobra.Command, f *cmdutil.Factory, opts *LaunchOptions, env, secrets *[]string, healthTimeout, healthGrace *string) {
	fl := cmd.Flags()
	fl.StringVar(&opts.Project, "project", f.Env("PIER_PROJECT"), "project id (env PIER_PROJECT)")
	fl.StringVar(&opts.Name, "name", "", "service name (default: the directory's name)")
	fl.StringVar(&opts.Domain, "domain", "", "serve the launch on this domain: registered for it, or attached if your organisation owns it")
	fl.IntVar(&opts.Years, "years", 1, "registration years for --domain")
	fl.BoolVar(&opts.JSONStream, "json-stream", false, "print every envelope in turn (bundle, quote, launch, task), one a line; --json prints only the last")
	fl.StringVar(&opts.Target, "target", "edge", "what runs it: edge (a static site), process (an HTTP service) or worker (no HTTP)")
	fl.StringVar(&opts.Run, "run", "", "process or worker: the `command` to run (default: the bundle's Procfile line)")
	fl.StringArrayVar(env, "env", nil, "process or worker: a variable, NAME=VALUE or NAME to pass yours (repeatable)")
	fl.StringArrayVar(secrets, "secret", nil, "process or worker: a write-only variable, NAME=VALUE or NAME to pass yours (repeatable)")
	fl.StringVar(&opts.HealthPath, "health-path", "", "process: the `path` whose GET must answer below 500 (default /)")
	fl.StringVar(healthTimeout, "health-timeout", "", "process: the `duration` a new version has to answer healthy, such as 90s (default 60s)")
	fl.StringVar(healthGrace, "health-grace", "", "worker: the `duration` a new version must stay up to count as healthy (default 3s)")
	fl.StringArrayVar(&opts.Addons, "addon", nil, "process or worker: an add-on, managed_postgres (a database in DATABASE_URL)")
	cmd.RegisterFlagCompletionFunc("target", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"edge", "process", "worker"}, cobra.ShellCompDirectiveNoFileComp
	})
	cmd.RegisterFlagCompletionFunc("addon", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"managed_postgres"}, cobra.ShellCompDirectiveNoFileComp
	})
}

// resolve checks the target's flags and reads --env, --secret,
// --health-timeout and --health-grace into the options.
func (o *LaunchOptions) resolve(cmd *cobra.Command, f *cmdutil.Factory, env, secrets []string, healthTimeout, healthGrace string) error {
	where := cmd.CommandPath()
	switch o.Target {
	case "edge", "process", "worker":
	default:
		return cmdutil.UsageErrorf(where, "--target must be edge, process or worker, not %q", o.Target)
	}
	if !o.runs() {
		for _, name := range []string{"run", "env", "secret", "health-path", "health-timeout", "health-grace", "addon"} {
			if cmd.Flags().Changed(name) {
				return cmdutil.UsageErrorf(where, "--%s is for --target process or worker; an edge site runs nothing", name)
			}
		}
		return nil
	}
	var err error
	if o.Env, err = cmdutil.ParseAssignments("--env", env, f.Env); err != nil {
		return cmdutil.UsageErrorf(where, "%v", err)
	}
	if o.Secrets, err = cmdutil.ParseAssignments("--secret", secrets, f.Env); err != nil {
		return cmdutil.UsageErrorf(where, "%v", err)
	}
	for name := range o.Env {
		if _, ok := o.Secrets[name]; ok {
			return cmdutil.UsageErrorf(where, "%s is given with both --env and --secret", name)
		}
	}
	if cmd.Flags().Changed("run") && strings.TrimSpace(o.Run) == "" {
		return cmdutil.UsageErrorf(where, "--run must not be empty")
	}
	if o.Target == "worker" && (o.HealthPath != "" || healthTimeout != "") {
		return cmdutil.UsageErrorf(where, "--health-path and --health-timeout are for a process; a worker is healthy once it stays up --health-grace")
	}
	if o.Target == "process" && healthGrace != "" {
		return cmdutil.UsageErrorf(where, "--health-grace is for a worker; a process is healthy once --health-path answers")
	}
	if o.HealthPath != "" && !strings.HasPrefix(o.HealthPath, "/") {
		return cmdutil.UsageErrorf(where, "--health-path must start with /, such as /healthz")
	}
	if healthGrace != "" {
		secs, err := parseSeconds(healthGrace)
		if err != nil || secs < 1 || secs > 120 {
			return cmdutil.UsageErrorf(where, "--health-grace must be between 1s and 2m, such as 5s")
		}
		o.HealthGrace = secs
	}
	if healthTimeout != "" {
		secs, err := parseSeconds(healthTimeout)
		if err != nil || secs < 1 || secs > 600 {
			return cmdutil.UsageErrorf(where, "--health-timeout must be between 1s and 10m, such as 90s")
		}
		o.HealthTimeout = secs
		// The wait must outlast the health check: the default --timeout
		// grows to fit it, an explicit one is kept.
		if need := time.Duration(secs)*time.Second + time.Minute; !cmd.Flags().Changed("timeout") && f.Config.Timeout > 0 && f.Config.Timeout < need {
			f.Config.Timeout = need
		}
	}
	for _, a := range o.Addons {
		if a != "managed_postgres" {
			return cmdutil.UsageErrorf(where, "--addon %q is not offered; the one add-on is managed_postgres", a)
		}
	}
	if len(o.Addons) > 1 {
		o.Addons = o.Addons[:1]
	}
	return nil
}

// parseSeconds reads a duration such as 90s or 2m, or a bare number of
// seconds, rounded up to whole seconds.
func parseSeconds(s string) (int, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return n, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	return int((d + time.Second - 1) / time.Second), nil
}

// runLaunch launches. With --json it prints one envelope, the last it
// received, so a script reads one document; --json-stream prints each as
// it comes. An API error's own envelope is the one printed then.
func runLaunch(ctx context.Context, f *cmdutil.Factory, o *LaunchOptions) error {
	var last any
	emit := func(v any) error {
		if !f.Config.JSON {
			return nil
		}
		if o.JSONStream {
			return cmdutil.PrintJSON(f.IO.Out, v)
		}
		last = v
		return nil
	}
	err := launchSteps(ctx, f, o, emit)
	var apiErr *sdk.Error
	if f.Config.JSON && !o.JSONStream && last != nil && !errors.As(err, &apiErr) {
		if perr := cmdutil.PrintJSON(f.IO.Out, last); perr != nil && err == nil {
			err = perr
		}
	}
	return err
}

func launchSteps(ctx context.Context, f *cmdutil.Factory, o *LaunchOptions, emit func(any) error) error {
	ctx, cancel := f.Context(ctx)
	defer cancel()
	c, err := f.Client()
	if err != nil {
		return err
	}
	if o.Target == "" {
		o.Target = "edge"
	}
	progress := cmdutil.NewProgress(f)
	defer progress.Done()

	progress.Step("uploading " + o.Dir)
	bundle, _, err := uploadDir(ctx, f, progress, o.Dir, o.Project)
	if err != nil {
		return err
	}
	if err := emit(bundle); err != nil {
		return err
	}
	body := sdk.LaunchServiceJSONRequestBody{Name: o.Name, Target: sdk.TargetName(o.Target), BundleId: &bundle.Data.BundleId}
	if o.runs() {
		o.fillProcess(&body)
	}
	running, err := o.prepareLaunch(ctx, c, progress, &body, emit)
	if err != nil {
		return err
	}
	if running != nil {
		progress.Step(fmt.Sprintf("launching %s: a new version of %s", o.Name, running.Id))
	} else {
		progress.Step("launching " + o.Name)
	}
	launched, err := c.LaunchService(ctx, o.Project, &sdk.LaunchServiceParams{}, body)
	if err != nil {
		return cmdutil.Interrupted(ctx, err, launchMayHaveStarted(o.Name, body.QuoteId))
	}
	if err := emit(launched); err != nil {
		return err
	}
	if !o.Wait {
		progress.Done()
		t := launched.Data
		if t.State == sdk.TaskHandleStateInputRequired {
			return launchAwaitsHuman(f, o, t, launched.Data)
		}
		if !f.Config.JSON {
			printLaunchHandle(f, t)
			fmt.Fprintf(f.IO.Out, "Next: pier tasks get %s\n", t.TaskId)
		}
		return nil
	}
	return o.waitLaunch(ctx, c, progress, launched, emit)
}

// prepareLaunch quotes what costs money: a domain to buy, and a process
// or worker by the month. A service of that name that already runs is not
// quoted: the launch is its next version, which the server does not
// charge again. A domain the organisation owns is not bought again: the
// launch attaches it, and a running service gets it attached first. It
// returns the running service, if any.
func (o *LaunchOptions) prepareLaunch(ctx context.Context, c *sdk.Client, progress *cmdutil.Progress, body *sdk.LaunchServiceJSONRequestBody, emit func(any) error) (*sdk.ServiceInfo, error) {
	var items []sdk.QuoteItem
	if o.runs() {
		workload, target, months := o.workload(), sdk.TargetName(o.Target), 1
		items = append(items, sdk.QuoteItem{Kind: sdk.QuoteItemKind("service"), Workload: &workload, Target: &target, Name: &o.Name, Months: &months})
	}
	owned := false
	if o.Domain != "" {
		progress.Step("checking whether your organisation owns " + o.Domain)
		var err error
		if owned, err = ownsDomain(ctx, c, o.Domain); err != nil {
			return nil, err
		}
		body.Domain = &o.Domain
	}
	if o.Domain != "" && !owned {
		years := o.Years
		items = append(items, sdk.QuoteItem{Kind: sdk.Domain, Domain: &o.Domain, Years: &years})
		body.Years = &years
	}
	var running *sdk.ServiceInfo
	if len(items) > 0 || owned {
		progress.Step("checking whether " + o.Name + " already runs")
		var err error
		if running, err = runningService(ctx, c, o.Project, o.Name); err != nil {
			return nil, err
		}
	}
	if owned && running != nil && cmdutil.Deref(running.Domain) != o.Domain {
		progress.Step(fmt.Sprintf("attaching %s to %s", o.Domain, running.Id))
		a, err := c.AttachDomain(ctx, o.Domain, &sdk.AttachDomainParams{}, sdk.AttachDomainJSONRequestBody{ServiceId: running.Id})
		if err != nil {
			return nil, err
		}
		if err := emit(a); err != nil {
			return nil, err
		}
	}
	if len(items) == 0 || running != nil {
		return running, nil
	}
	quoteID, err := o.quote(ctx, c, progress, items, emit)
	body.QuoteId = quoteID
	return nil, err
}

// ownsDomain reports whether the organisation owns domain.
func ownsDomain(ctx context.Context, c *sdk.Client, domain string) (bool, error) {
	_, err := c.GetDomain(ctx, domain)
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) && apiErr.StatusCode == 404 {
		return false, nil
	}
	return err == nil, err
}

// quote creates the launch's quote and returns its id. A quote over the
// approval threshold still launches: the launch waits on the quote's
// gate, in input_required with its approval URL.
func (o *LaunchOptions) quote(ctx context.Context, c *sdk.Client, progress *cmdutil.Progress, items []sdk.QuoteItem, emit func(any) error) (*string, error) {
	what := o.Name
	if !o.runs() {
		what = o.Domain
	}
	progress.Step("quoting " + what)
	q, err := c.CreateQuote(ctx, &sdk.CreateQuoteParams{}, sdk.CreateQuoteJSONRequestBody{ProjectId: o.Project, Items: items})
	if err != nil {
		return nil, err
	}
	if err := emit(q); err != nil {
		return nil, err
	}
	if q.Data.Decision != sdk.ALLOW && q.Data.Decision != sdk.REQUIRESAPPROVAL {
		reasons := make([]string, len(q.Data.Reasons))
		for i, r := range q.Data.Reasons {
			reasons[i] = string(r)
		}
		code := sdk.BlockedBy("budget:insufficient")
		if len(q.Data.Reasons) > 0 {
			code = q.Data.Reasons[0]
		}
		return nil, &sdk.Error{StatusCode: 201, BlockedBy: code, Message: fmt.Sprintf("the quote was %s (%s)", q.Data.Decision, strings.Join(reasons, ", ")), Actions: q.Actions}
	}
	return &q.Data.QuoteId, nil
}

// waitLaunch waits for the launch task, showing its steps (and a
// process's first log lines) on stderr, and prints where it serves.
func (o *LaunchOptions) waitLaunch(ctx context.Context, c *sdk.Client, progress *cmdutil.Progress, launched *sdk.TaskEnvelope, emit func(any) error) error {
	f := o.Factory
	var logs *launchLogs
	if o.runs() {
		logs = &launchLogs{c: c, p: progress, taskID: launched.Data.TaskId}
	}
	final, err := c.WaitForTask(ctx, launched.Data.TaskId, sdk.WaitOptions{Interval: 200 * time.Millisecond, FirstInterval: 4 * time.Millisecond, OnProgress: func(t *sdk.TaskHandle) {
		step := string(t.State)
		for _, s := range t.Steps {
			if s.State == sdk.TaskStepStateRunning || s.State == sdk.TaskStepStateInputRequired {
				step = string(s.Name) + " (" + string(s.State) + ")"
				break
			}
		}
		// A step shows before the lines written during it; the lines a
		// finished task left unread show before its end.
		finished := t.State != sdk.TaskHandleStateQueued && t.State != sdk.TaskHandleStateRunning
		if logs != nil && finished {
			logs.poll(ctx, t)
		}
		progress.Step(step)
		if logs != nil && !finished {
			logs.poll(ctx, t)
		}
	}})
	progress.Done()
	if final != nil {
		if err := emit(final); err != nil {
			return err
		}
	}
	var ir *sdk.InputRequiredError
	if errors.As(err, &ir) {
		t := launched.Data
		if ir.Task != nil {
			t = *ir.Task
		}
		if t.ApprovalUrl == nil && ir.ApprovalURL != "" {
			t.ApprovalUrl = &ir.ApprovalURL
		}
		return launchAwaitsHuman(f, o, t, launched.Data)
	}
	if err != nil {
		// A failed task's message (for a process, its last log lines)
		// and actions are printed with the error; it exits with the code
		// of its blockedBy.
		return cmdutil.Interrupted(ctx, err, launchGoesOn(launched.Data))
	}
	if !f.Config.JSON {
		o.printLaunched(ctx, c, final.Data)
	}
	return nil
}

// launchMayHaveStarted says, after Ctrl-C during the launch request, how
// to tell whether it reached the server, and what a quote made for it
// holds if it did not.
func launchMayHaveStarted(name string, quoteID *string) string {
	msg := "The launch of " + name + " may have reached the server before the interruption: " +
		"pier tasks list shows its task if it did; run pier launch again if it did not."
	if quoteID != nil && *quoteID != "" {
		msg += fmt.Sprintf(" Until then quote %s holds its budget (15 minutes at most); pier quotes release %s gives it back.", *quoteID, *quoteID)
	}
	return msg
}

// launchGoesOn says, after Ctrl-C during the wait, that the launch is a
// task of the server's that keeps running, and how to follow or undo it.
func launchGoesOn(t sdk.TaskHandle) string {
	msg := fmt.Sprintf("The launch goes on on the server as task %s: follow it with pier tasks get %s", t.TaskId, t.TaskId)
	if t.ServiceId != nil && *t.ServiceId != "" {
		msg += fmt.Sprintf(", or stop it with pier services teardown %s", *t.ServiceId)
	}
	return msg + "."
}

// printLaunched prints a finished launch: its URLs, service, version and
// task, and the next steps.
func (o *LaunchOptions) printLaunched(ctx context.Context, c *sdk.Client, t sdk.TaskHandle) {
	out := o.Factory.IO.Out
	if t.PreviewUrl != nil {
		fmt.Fprintln(out, *t.PreviewUrl)
	}
	if t.DomainUrl != nil {
		fmt.Fprintln(out, *t.DomainUrl)
	}
	fmt.Fprintf(out, "service %s\n", cmdutil.Deref(t.ServiceId))
	version := 0
	if o.runs() && t.ServiceId != nil {
		if version = cmdutil.ResultInt(t, "version"); version == 0 {
			if svc, err := c.GetService(ctx, *t.ServiceId); err == nil && svc.Data.Version != nil {
				version = *svc.Data.Version
			}
		}
		if previous := cmdutil.ResultInt(t, "previous"); version > 0 && previous > 0 {
			fmt.Fprintf(out, "version %d (was %d)\n", version, previous)
		} else if version > 0 {
			fmt.Fprintf(out, "version %d\n", version)
		}
	}
	fmt.Fprintf(out, "task    %s (%s)\n", t.TaskId, t.State)
	if id := t.ServiceId; id != nil {
		next := []string{}
		if o.runs() {
			next = append(next, "pier logs "+*id+" --follow")
			if version > 1 {
				next = append(next, "pier rollback "+*id)
			}
		}
		if o.Domain != "" && t.DomainUrl != nil {
			next = append(next, "pier domains detach "+o.Domain)
		}
		next = append(next, "pier services get "+*id, "pier services teardown "+*id)
		fmt.Fprintf(out, "Next: %s\n", strings.Join(next, "\n      "))
	}
}

// fillProcess puts a process or worker's command, variables, health check
// and add-ons into the launch body.
func (o *LaunchOptions) fillProcess(body *sdk.LaunchServiceJSONRequestBody) {
	if o.Run != "" {
		body.Run = &o.Run
	}
	if len(o.Env) > 0 {
		body.Env = &o.Env
	}
	if len(o.Secrets) > 0 {
		body.Secrets = &o.Secrets
	}
	if o.HealthPath != "" || o.HealthTimeout > 0 || o.HealthGrace > 0 {
		hc := &sdk.HealthCheck{}
		if o.HealthPath != "" {
			hc.Path = &o.HealthPath
		}
		if o.HealthTimeout > 0 {
			hc.TimeoutSeconds = &o.HealthTimeout
		}
		if o.HealthGrace > 0 {
			hc.GraceSeconds = &o.HealthGrace
		}
		body.HealthCheck = hc
	}
	if len(o.Addons) > 0 {
		addons := make([]sdk.LaunchRequestAddons, len(o.Addons))
		for i, a := range o.Addons {
			addons[i] = sdk.LaunchRequestAddons(a)
		}
		body.Addons = &addons
	}
}

// runningService is the project's service of that name that a launch
// would make a new version of (launching, live, crashed or tearing down:
// every state but failed and torn down), or nil.
func runningService(ctx context.Context, c *sdk.Client, project, name string) (*sdk.ServiceInfo, error) {
	limit := 500
	l, err := c.ListServices(ctx, &sdk.ListServicesParams{ProjectId: &project, Limit: &limit})
	if err != nil {
		return nil, err
	}
	for i, s := range l.Data.Services {
		if s.Name == name && s.State != sdk.ServiceInfoStateFailed && s.State != sdk.ServiceInfoStateTornDown {
			return &l.Data.Services[i], nil
		}
	}
	return nil, nil
}

// launchLogLines is how many of a new version's log lines a launch prints
// while it waits.
const launchLogLines = 20

// launchLogs prints a process's first log lines while its launch waits:
// once the start step runs, it reads the new version's lines on from the
// last it printed, waiting briefly for more.
type launchLogs struct {
	c      *sdk.Client
	p      *cmdutil.Progress
	taskID string

	started   bool
	serviceID string
	version   int // 0 when the version could not be told
	after     int64
	printed   int
	done      bool
}

func (l *launchLogs) poll(ctx context.Context, t *sdk.TaskHandle) {
	if l.done {
		return
	}
	if !l.started {
		if t.ServiceId == nil || !startReached(t) {
			return
		}
		l.started, l.serviceID = true, *t.ServiceId
		l.version = versionOfTask(ctx, l.c, l.serviceID, l.taskID)
	}
	finished := t.State != sdk.TaskHandleStateQueued && t.State != sdk.TaskHandleStateRunning
	// Later reads wait a moment for new lines; the first does not, since a
	// read of the newest lines that waits answers only lines written after
	// it woke.
	tail, wait := launchLogLines, 1
	if finished || l.after == 0 {
		wait = 0
	}
	params := &sdk.GetServiceLogsParams{Tail: &tail, WaitSeconds: &wait}
	if l.version > 0 {
		params.Version = &l.version
	}
	if l.after > 0 {
		params.After = &l.after
	}
	body, err := l.c.GetServiceLogs(ctx, l.serviceID, params)
	if err != nil {
		return // the logs are a courtesy; the task says how the launch went
	}
	var env sdk.ServiceLogsEnvelope
	if json.Unmarshal(body, &env) != nil {
		return
	}
	for _, line := range env.Data.Lines {
		if l.printed == launchLogLines {
			l.p.Line(fmt.Sprintf("  … more with: pier logs %s --follow", l.serviceID))
			l.done = true
			return
		}
		l.p.Line(fmt.Sprintf("  %-6s %s", string(line.Stream), line.Text))
		l.printed++
	}
	if env.Data.NextAfter > l.after {
		l.after = env.Data.NextAfter
	}
	if finished {
		l.done = true
	}
}

// startReached reports whether the task's start step runs or ran.
func startReached(t *sdk.TaskHandle) bool {
	for _, s := range t.Steps {
		if s.Name == "start" {
			return s.State != sdk.TaskStepStatePending
		}
	}
	return false
}

// versionOfTask is the number of the version a task launches, from the
// service's versions; 0 when none names the task.
func versionOfTask(ctx context.Context, c *sdk.Client, serviceID, taskID string) int {
	svc, err := c.GetService(ctx, serviceID)
	if err != nil || svc.Data.Versions == nil {
		return 0
	}
	for _, v := range *svc.Data.Versions {
		if v.TaskId != nil && *v.TaskId == taskID {
			return v.Number
		}
	}
	return 0
}

// printLaunchHandle prints what a launch made that is not finished yet:
// the service, its preview URL (and domain URL), and the task.
func printLaunchHandle(f *cmdutil.Factory, t sdk.TaskHandle) {
	fmt.Fprintf(f.IO.Out, "service %s\n", cmdutil.Deref(t.ServiceId))
	if t.PreviewUrl != nil {
		fmt.Fprintf(f.IO.Out, "preview %s\n", *t.PreviewUrl)
	}
	if t.DomainUrl != nil {
		fmt.Fprintf(f.IO.Out, "domain  %s\n", *t.DomainUrl)
	}
	fmt.Fprintf(f.IO.Out, "task    %s (%s)\n", t.TaskId, t.State)
}

// launchAwaitsHuman reports a launch in input_required, whether the launch's
// own answer or the wait found it there: the service, preview URL and task
// on stdout, the approval URL on stderr, and exit code 5. accepted is the
// launch's 202 answer, whose ids fill in what t lacks.
func launchAwaitsHuman(f *cmdutil.Factory, o *LaunchOptions, t, accepted sdk.TaskHandle) error {
	if t.ServiceId == nil {
		t.ServiceId = accepted.ServiceId
	}
	if t.PreviewUrl == nil {
		t.PreviewUrl = accepted.PreviewUrl
	}
	url := cmdutil.Deref(t.ApprovalUrl)
	if !f.Config.JSON {
		printLaunchHandle(f, t)
		fmt.Fprintf(f.IO.ErrOut, "A human must approve this launch: %s\nThen follow the task with: pier tasks get %s\n", url, t.TaskId)
	}
	msg := "a human must approve this launch"
	if o.Domain != "" {
		msg += " of " + o.Domain
	}
	return &cmdutil.ErrInputRequired{ApprovalURL: url, TaskID: t.TaskId, Message: msg}
}
