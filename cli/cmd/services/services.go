package services

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/sdk"
)

// AddCommands adds the hand-written commands for running services:
// `pier logs` and `pier rollback`.
func AddCommands(root *cobra.Command, f *cmdutil.Factory) {
	cmdutil.AddOperations(root, NewCmdLogs(f, nil), NewCmdRollback(f, nil))
}

// LogsOptions are `pier logs`'s.
type LogsOptions struct {
	Factory   *cmdutil.Factory
	ServiceID string
	Follow    bool
	// Tail is how many lines to read, the newest; 0 leaves it to the
	// server (200).
	Tail int
	// Since is the time lines start at, "" for none.
	Since string
	// Version reads only that version's lines; 0 reads all.
	Version int
	// FollowFor ends a follow after this long (an explicit --timeout);
	// 0 follows until interrupted or the stream ends.
	FollowFor time.Duration
}

// NewCmdLogs is `pier logs`.
func NewCmdLogs(f *cmdutil.Factory, runF func(*LogsOptions) error) *cobra.Command {
	opts := &LogsOptions{Factory: f}
	var since string
	cmd := &cobra.Command{
		Use:   "logs <service-id>",
		Short: "Print a service's logs, or follow them",
		Long: `Print a service's log lines: its processes' stdout and stderr, and Pier's own
lines about them (stream "system": starts, health checks, exits, restarts).
Each line is printed as TIME STREAM TEXT, oldest first; with --json, each is
one JSON object (the contract's LogLine: seq, at, stream, version, text) on
a line of its own, with and without --follow.

Without --follow it prints the last --tail lines (200 by default) and exits.
With --follow it prints them, then streams new lines as they are written
until interrupted (Ctrl-C exits 0) or the service is torn down; a service
already torn down (or whose first launch failed) just has its lines
printed. A follow is not bound by the default --timeout; an explicit
--timeout ends it after that long, with exit code 0.

--since takes a duration back from now (10m, 2h) or a time (RFC 3339, such as
2026-11-25T07:00:00Z). --version reads only the lines of one version.`,
		Example: `  pier logs svc_123
  pier logs svc_123 --follow
  pier logs svc_123 --since 10m --tail 500
  pier logs svc_123 --version 2 --json | jq -r .text
  pier logs svc_123 --follow --timeout 30s`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ServiceID = args[0]
			if opts.Tail < 0 || opts.Tail > 5000 {
				return cmdutil.UsageErrorf(cmd.CommandPath(), "--tail must be between 1 and 5000")
			}
			if opts.Version < 0 {
				return cmdutil.UsageErrorf(cmd.CommandPath(), "--version must be a version number, 1 or more")
			}
			if since != "" {
				t, err := parseSince(since, time.Now())
				if err != nil {
					return cmdutil.UsageErrorf(cmd.CommandPath(), "--since: %v", err)
				}
				opts.Since = t.UTC().Format(time.RFC3339Nano)
			}
			if opts.Follow && cmd.Flags().Changed("timeout") {
				opts.FollowFor = f.Config.Timeout
			}
			if runF != nil {
				return runF(opts)
			}
			return runLogs(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&opts.Follow, "follow", "f", false, "Stream new lines as they are written, until interrupted")
	fl.IntVar(&opts.Tail, "tail", 0, "Print at most this many lines, the newest (default 200)")
	fl.StringVar(&since, "since", "", "Only lines written since this `duration` ago, or this RFC 3339 time")
	fl.IntVar(&opts.Version, "version", 0, "Only the lines of this version")
	return cmd
}

// parseSince reads --since: a duration back from now, or a time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, errors.New("a duration back from now must not be negative")
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither a duration (10m, 2h) nor a time (2026-11-25T07:00:00Z)", s)
}

func (o *LogsOptions) query() url.Values {
	q := url.Values{}
	if o.Tail > 0 {
		q.Set("tail", strconv.Itoa(o.Tail))
	}
	if o.Since != "" {
		q.Set("since", o.Since)
	}
	if o.Version > 0 {
		q.Set("version", strconv.Itoa(o.Version))
	}
	return q
}

func runLogs(ctx context.Context, o *LogsOptions) error {
	f := o.Factory
	c, err := f.Client()
	if err != nil {
		return err
	}
	if o.Follow {
		return followLogs(ctx, f, c, o)
	}
	return printLogs(ctx, f, c, o)
}

// printLogs reads the lines once and prints them.
func printLogs(ctx context.Context, f *cmdutil.Factory, c *sdk.Client, o *LogsOptions) error {
	ctx, cancel := f.Context(ctx)
	defer cancel()
	resp, err := c.Call(ctx, "GET", "/v1/services/"+url.PathEscape(o.ServiceID)+"/logs", o.query(), nil, nil)
	if err != nil {
		return err
	}
	var env struct {
		Data struct {
			Lines []json.RawMessage `json:"lines"`
		} `json:"data"`
	}
	if err := json.Unmarshal(resp.Body, &env); err != nil {
		return fmt.Errorf("reading the logs: %w", err)
	}
	w := newLogWriter(f)
	for _, raw := range env.Data.Lines {
		if _, err := w.write(raw); err != nil {
			return err
		}
	}
	return nil
}

// logWriter prints log lines: TIME STREAM TEXT, or each line's JSON with
// --json.
type logWriter struct {
	f   *cmdutil.Factory
	out io.Writer
}

func newLogWriter(f *cmdutil.Factory) *logWriter { return &logWriter{f: f, out: f.IO.Out} }

// write prints one LogLine given as JSON and returns it decoded.
func (w *logWriter) write(raw []byte) (sdk.LogLine, error) {
	var l sdk.LogLine
	if err := json.Unmarshal(raw, &l); err != nil {
		return l, fmt.Errorf("a log line that is not JSON: %w", err)
	}
	if w.f.Config.JSON {
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return l, err
		}
		b.WriteByte('\n')
		_, err := w.out.Write(b.Bytes())
		return l, err
	}
	_, err := fmt.Fprintln(w.out, formatLogLine(l))
	return l, err
}

// formatLogLine is TIME STREAM TEXT, the time in UTC to the millisecond.
func formatLogLine(l sdk.LogLine) string {
	return l.At.UTC().Format("2006-01-02T15:04:05.000Z07:00") + " " + fmt.Sprintf("%-6s", string(l.Stream)) + " " + l.Text
}

// followLogs streams the log over REST as NDJSON until ctx ends (Ctrl-C,
// or an explicit --timeout), which exits 0, or the service writes no more:
// the server ends the stream then. A stream that ends while the service
// still runs (the server closes a follow after an hour) is opened again
// from the last line printed.
func followLogs(ctx context.Context, f *cmdutil.Factory, c *sdk.Client, o *LogsOptions) error {
	if o.FollowFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.FollowFor)
		defer cancel()
	}
	// A service that writes no more (torn down, or never started) has
	// nothing to follow: its lines are printed and the command ends.
	svc, err := c.GetService(ctx, o.ServiceID)
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return err
	}
	if ended(svc.Data.State) {
		return printLogs(ctx, f, c, o)
	}
	w := newLogWriter(f)
	q := o.query()
	var last int64
	for {
		q.Set("follow", "true")
		if last > 0 {
			q.Set("after", strconv.FormatInt(last, 10))
			q.Del("since")
			q.Del("tail")
		}
		n, err := streamLogs(ctx, c, o.ServiceID, q, func(raw []byte) error {
			l, err := w.write(raw)
			if err == nil && l.Seq > last {
				last = l.Seq
			}
			return err
		})
		if ctx.Err() != nil {
			return nil // interrupted, or followed as long as asked
		}
		if err != nil {
			return err
		}
		// The stream ended: the service was torn down (or failed), or
		// the server closed a long follow. Go on only while it runs.
		svc, err := c.GetService(ctx, o.ServiceID)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if ended(svc.Data.State) {
			return nil
		}
		if n == 0 {
			// Nothing came and the stream ended: wait a little before
			// asking again, so a server that keeps closing is not hammered.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	}
}

// ended reports whether a service in this state writes no more lines.
func ended(s sdk.ServiceInfoState) bool {
	return s == sdk.ServiceInfoStateTornDown || s == sdk.ServiceInfoStateFailed
}

// streamLogs opens one follow of the log and calls line with every LogLine
// as it arrives; blank lines are the server's keep-alives. It returns how
// many lines came, when the stream ends.
func streamLogs(ctx context.Context, c *sdk.Client, id string, q url.Values, line func([]byte) error) (int, error) {
	u := c.BaseURL() + "/v1/services/" + url.PathEscape(id) + "/logs?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := c.Do(req) // the client's key, user agent and retries
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, responseError(resp)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-ndjson") {
		return 0, fmt.Errorf("the server answered a follow with %q, not application/x-ndjson", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	n := 0
	for sc.Scan() {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue // keep-alive
		}
		if err := line(b); err != nil {
			return n, err
		}
		n++
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return n, fmt.Errorf("following the logs: %w", err)
	}
	return n, nil
}

// responseError reads a non-success answer into an *sdk.Error, as the
// SDK's own calls do.
func responseError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	e := &sdk.Error{StatusCode: resp.StatusCode, Body: body}
	var env sdk.ErrorEnvelope
	if json.Unmarshal(body, &env) == nil && env.BlockedBy != "" {
		e.BlockedBy, e.Message, e.Retryable, e.Actions = env.BlockedBy, env.Message, env.Retryable, env.Actions
		if env.Details != nil {
			e.Details = *env.Details
		}
		return e
	}
	e.Message = strings.TrimSpace(string(body))
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// RollbackOptions are `pier rollback`'s.
type RollbackOptions struct {
	Factory   *cmdutil.Factory
	ServiceID string
	// Version is the version to serve again; 0 is the one before the
	// serving version.
	Version int
	Wait    bool
}

// NewCmdRollback is `pier rollback`.
func NewCmdRollback(f *cmdutil.Factory, runF func(*RollbackOptions) error) *cobra.Command {
	opts := &RollbackOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "rollback <service-id>",
		Short: "Serve an earlier version of a service again",
		Long: `Serve an earlier version of a service again: by default the one before the
version serving now, or the one --version names. A static site switches at
once. A process's earlier version starts from its stored bundle and takes
the traffic once healthy; the version serving before stops after its
requests drain. pier services get lists the versions.

It waits for the rollback task, showing its step on stderr (a spinner on a
terminal), then prints which version serves. --no-wait returns the task
handle at once; --json prints the finished task's envelope. A version that
never becomes healthy exits 10, after its last log lines; the version
serving before goes on serving.`,
		Example: `  pier rollback svc_123
  pier rollback svc_123 --version 1
  pier rollback svc_123 --no-wait --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ServiceID = args[0]
			if cmd.Flags().Changed("version") && opts.Version < 1 {
				return cmdutil.UsageErrorf(cmd.CommandPath(), "--version must be a version number, 1 or more")
			}
			opts.Wait = !f.Config.NoWait
			if runF != nil {
				return runF(opts)
			}
			return runRollback(cmd.Context(), opts)
		},
	}
	cmd.Flags().IntVar(&opts.Version, "version", 0, "The version to serve again (default: the one before the serving version)")
	return cmd
}

func runRollback(ctx context.Context, o *RollbackOptions) error {
	f := o.Factory
	ctx, cancel := f.Context(ctx)
	defer cancel()
	c, err := f.Client()
	if err != nil {
		return err
	}
	var body sdk.RollbackServiceJSONRequestBody
	if o.Version > 0 {
		v := o.Version
		body.Version = &v
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	resp, err := c.Call(ctx, "POST", "/v1/services/"+url.PathEscape(o.ServiceID)+"/rollback", nil, b, nil)
	if err != nil {
		return err
	}
	if id := cmdutil.PendingTask(resp.Body); id != "" && o.Wait {
		if resp, err = cmdutil.WaitTask(ctx, f, c, id); err != nil {
			return err
		}
	}
	var env struct {
		Data sdk.TaskHandle `json:"data"`
	}
	if err := json.Unmarshal(resp.Body, &env); err != nil {
		return fmt.Errorf("reading the rollback task: %w", err)
	}
	t := env.Data
	if f.Config.JSON {
		if err := cmdutil.WriteRaw(f.IO.Out, resp.Body); err != nil {
			return err
		}
	} else {
		printRollback(f, o, t)
	}
	if err := cmdutil.WaitingForHuman(resp.Body); err != nil {
		return err
	}
	return cmdutil.TaskFailed(resp.Body)
}

func printRollback(f *cmdutil.Factory, o *RollbackOptions, t sdk.TaskHandle) {
	out := f.IO.Out
	svc := o.ServiceID
	if t.ServiceId != nil {
		svc = *t.ServiceId
	}
	switch t.State {
	case sdk.TaskHandleStateSucceeded:
		version, previous := cmdutil.ResultInt(t, "version"), cmdutil.ResultInt(t, "previous")
		switch {
		case version > 0 && previous > 0:
			fmt.Fprintf(out, "service %s serves version %d (was %d)\n", svc, version, previous)
		case version > 0:
			fmt.Fprintf(out, "service %s serves version %d\n", svc, version)
		default:
			fmt.Fprintf(out, "service %s rolled back\n", svc)
		}
		if t.PreviewUrl != nil {
			fmt.Fprintln(out, *t.PreviewUrl)
		}
		fmt.Fprintf(out, "task    %s (%s)\n", t.TaskId, t.State)
		if previous > 0 {
			fmt.Fprintf(out, "Undo:   pier rollback %s --version %d\n", svc, previous)
		}
	case sdk.TaskHandleStateQueued, sdk.TaskHandleStateRunning:
		fmt.Fprintf(out, "service %s\ntask    %s (%s)\nNext: pier tasks get %s\n", svc, t.TaskId, t.State, t.TaskId)
	default:
		fmt.Fprintf(out, "service %s\ntask    %s (%s)\n", svc, t.TaskId, t.State)
		if serving := cmdutil.ResultInt(t, "serving"); serving > 0 {
			fmt.Fprintf(out, "version %d still serves\n", serving)
		}
	}
}
