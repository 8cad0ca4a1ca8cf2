package services

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
)

func TestLogsOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want LogsOptions
	}{
		{[]string{"svc_1"}, LogsOptions{ServiceID: "svc_1"}},
		{[]string{"svc_1", "-f", "--tail", "5", "--version", "2"}, LogsOptions{ServiceID: "svc_1", Follow: true, Tail: 5, Version: 2}},
		{[]string{"svc_1", "--since", "2026-11-25T07:00:00+01:00"}, LogsOptions{ServiceID: "svc_1", Since: "2026-11-25T06:00:00Z"}},
		{[]string{"svc_1", "--follow", "--timeout", "3s"}, LogsOptions{ServiceID: "svc_1", Follow: true, FollowFor: 3 * time.Second}},
		{[]string{"svc_1", "--timeout", "3s"}, LogsOptions{ServiceID: "svc_1"}},
	} {
		f, ts := clitest.NewFactory(nil)
		var got *LogsOptions
		if code := clitest.RunWith(t, f, NewCmdLogs(f, func(o *LogsOptions) error { got = o; return nil }), c.args...); code != 0 {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.Err)
		}
		got.Factory = nil
		if *got != c.want {
			t.Errorf("%v: %+v, want %+v", c.args, *got, c.want)
		}
	}
	f, _ := clitest.NewFactory(nil)
	var got *LogsOptions
	before := time.Now()
	clitest.RunWith(t, f, NewCmdLogs(f, func(o *LogsOptions) error { got = o; return nil }), "svc_1", "--since", "10m")
	if since, err := time.Parse(time.RFC3339Nano, got.Since); err != nil || since.Before(before.Add(-10*time.Minute)) || since.After(time.Now().Add(-10*time.Minute)) {
		t.Errorf("--since 10m: %q %v", got.Since, err)
	}
	for _, args := range [][]string{{}, {"svc_1", "--since", "yesterday"}, {"svc_1", "--tail", "-1"}, {"svc_1", "--tail", "9999"}, {"svc_1", "--version", "-2"}} {
		f, _ := clitest.NewFactory(nil)
		if code := clitest.RunWith(t, f, NewCmdLogs(f, func(*LogsOptions) error { return nil }), args...); code != cmdutil.ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, cmdutil.ExitUsage)
		}
	}
}

// pier logs prints TIME STREAM TEXT, or each line's JSON with --json.
func TestLogsPrint(t *testing.T) {
	fs := clitest.NewFakeServices(t, &clitest.FakeServices{Lines: []string{"#starting", "listening on 127.0.0.1:5000", "!warning: slow"}})
	f, ts := fs.Factory()
	if code := clitest.RunWith(t, f, NewCmdLogs(f, nil), "svc_1", "--tail", "2", "--version", "1", "--since", "2026-11-25T07:00:00Z"); code != 0 {
		t.Fatalf("exit %d: %s", code, ts.Err)
	}
	want := "2026-11-25T07:16:18.500Z stdout listening on 127.0.0.1:5000\n2026-11-25T07:16:19.500Z stderr warning: slow\n"
	if ts.Out.String() != want {
		t.Errorf("stdout:\n%s\nwant\n%s", ts.Out, want)
	}
	if q := fs.LogQueries[0]; q.Encode() != "since=2026-11-25T07%3A00%3A00Z&tail=2&version=1" {
		t.Errorf("query %s", q.Encode())
	}

	f, ts = fs.Factory()
	if code := clitest.RunWith(t, f, NewCmdLogs(f, nil), "svc_1", "--json"); code != 0 {
		t.Fatalf("exit %d: %s", code, ts.Err)
	}
	lines := strings.Split(strings.TrimSpace(ts.Out.String()), "\n")
	if len(lines) != 3 || lines[0] != `{"seq":1,"at":"2026-11-25T07:16:17.5Z","stream":"system","version":1,"text":"starting"}` {
		t.Errorf("--json:\n%s", ts.Out)
	}

	f, ts = fs.Factory()
	if code := clitest.RunWith(t, f, NewCmdLogs(f, nil), "svc_404"); code != cmdutil.ExitNotFound {
		t.Errorf("an unknown service: exit %d: %s", code, ts.Err)
	}
}

// --follow streams NDJSON, skips keep-alives, opens the stream again from
// the last line while the service runs, and stops once it is torn down.
func TestLogsFollow(t *testing.T) {
	fs := clitest.NewFakeServices(t, &clitest.FakeServices{Lines: []string{"one", "two"}})
	f, ts := fs.Factory()
	done := make(chan int)
	go func() { done <- clitest.RunWith(t, f, NewCmdLogs(f, nil), "svc_1", "--follow", "--tail", "10") }()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, ts.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the follow did not end with the service")
	}
	if want := "2026-11-25T07:16:17.500Z stdout one\n2026-11-25T07:16:18.500Z stdout two\n"; ts.Out.String() != want {
		t.Errorf("stdout:\n%s\nwant\n%s", ts.Out, want)
	}
	if len(fs.LogQueries) != 2 || fs.LogQueries[0].Encode() != "follow=true&tail=10" || fs.LogQueries[1].Encode() != "after=2&follow=true" {
		t.Errorf("follow queries: %v", fs.LogQueries)
	}

	// A service already torn down has its lines printed, not followed.
	fs = clitest.NewFakeServices(t, &clitest.FakeServices{Lines: []string{"one", "#stopped (SIGTERM)"}, TornDown: true})
	f, ts = fs.Factory()
	if code := clitest.RunWith(t, f, NewCmdLogs(f, nil), "svc_1", "--follow"); code != 0 {
		t.Fatalf("exit %d: %s", code, ts.Err)
	}
	if !strings.HasSuffix(ts.Out.String(), "system stopped (SIGTERM)\n") || fs.Follows != 0 {
		t.Errorf("a torn-down service: %d follows, stdout:\n%s", fs.Follows, ts.Out)
	}
}

// A follow ends with exit 0 when interrupted, or when an explicit --timeout
// runs out, while the stream stays open.
func TestLogsFollowUntilTimeout(t *testing.T) {
	var accept string
	fs := clitest.NewFakeServices(t, &clitest.FakeServices{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/services/svc_1" {
			clitest.WriteEnvelope(w, 200, `{"actions":[{"kind":"stop","reason":"done"}],"data":`+fs.Service("live", 1)+`,"formatVersion":"1"}`)
			return
		}
		accept = r.Header.Get("Accept")
		w.Header().Set("Content-Type", "application/x-ndjson")
		io.WriteString(w, `{"seq":1,"at":"2026-11-25T07:16:17Z","stream":"stdout","version":1,"text":"tick"}`+"\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	f, ts := clitest.NewFactory(map[string]string{"PIER_BASE_URL": srv.URL, "PIER_API_KEY": "pk_test"})
	start := time.Now()
	if code := clitest.RunWith(t, f, NewCmdLogs(f, nil), "svc_1", "--follow", "--timeout", "300ms", "--json"); code != 0 {
		t.Fatalf("exit %d: %s", code, ts.Err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("the follow outlived its --timeout")
	}
	if ts.Out.String() != `{"seq":1,"at":"2026-11-25T07:16:17Z","stream":"stdout","version":1,"text":"tick"}`+"\n" || accept != "application/x-ndjson" {
		t.Errorf("stdout %q, Accept %q", ts.Out, accept)
	}
}

func TestRollbackOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want RollbackOptions
	}{
		{[]string{"svc_1"}, RollbackOptions{ServiceID: "svc_1", Wait: true}},
		{[]string{"svc_1", "--version", "3", "--no-wait"}, RollbackOptions{ServiceID: "svc_1", Version: 3}},
	} {
		f, ts := clitest.NewFactory(nil)
		var got *RollbackOptions
		if code := clitest.RunWith(t, f, NewCmdRollback(f, func(o *RollbackOptions) error { got = o; return nil }), c.args...); code != 0 {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.Err)
		}
		got.Factory = nil
		if *got != c.want {
			t.Errorf("%v: %+v, want %+v", c.args, *got, c.want)
		}
	}
	for _, args := range [][]string{{}, {"svc_1", "--version", "0"}, {"svc_1", "svc_2"}} {
		f, _ := clitest.NewFactory(nil)
		if code := clitest.RunWith(t, f, NewCmdRollback(f, func(*RollbackOptions) error { return nil }), args...); code != cmdutil.ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, cmdutil.ExitUsage)
		}
	}
}

// pier rollback waits for the task and says which version serves; --no-wait
// returns the handle; --json prints the finished task; a version that never
// becomes healthy exits 10.
func TestRollback(t *testing.T) {
	fs := clitest.NewFakeServices(t, &clitest.FakeServices{})
	f, ts := fs.Factory()
	if code := clitest.RunWith(t, f, NewCmdRollback(f, nil), "svc_1", "--version", "1"); code != 0 {
		t.Fatalf("exit %d: %s", code, ts.Err)
	}
	want := "service svc_1 serves version 1 (was 2)\nhttps://api--prj-1.localhost:8443/\ntask    tsk_3 (succeeded)\nUndo:   pier rollback svc_1 --version 2\n"
	if ts.Out.String() != want {
		t.Errorf("stdout:\n%s\nwant\n%s", ts.Out, want)
	}
	if got := clitest.JSONText(fs.Rollback); got != `[{"version":1}]` {
		t.Errorf("rollback bodies: %s", got)
	}

	fs = clitest.NewFakeServices(t, &clitest.FakeServices{})
	f, ts = fs.Factory()
	if code := clitest.RunWith(t, f, NewCmdRollback(f, nil), "svc_1", "--no-wait"); code != 0 {
		t.Fatalf("--no-wait: exit %d: %s", code, ts.Err)
	}
	if !strings.Contains(ts.Out.String(), "task    tsk_3 (queued)\nNext: pier tasks get tsk_3\n") || fs.TaskPolls["tsk_3"] != 0 {
		t.Errorf("--no-wait: %s (%d polls)", ts.Out, fs.TaskPolls["tsk_3"])
	}
	if got := clitest.JSONText(fs.Rollback); got != `[{}]` {
		t.Errorf("rollback bodies: %s", got)
	}

	fs = clitest.NewFakeServices(t, &clitest.FakeServices{})
	f, ts = fs.Factory()
	if code := clitest.RunWith(t, f, NewCmdRollback(f, nil), "svc_1", "--json"); code != 0 {
		t.Fatalf("--json: exit %d: %s", code, ts.Err)
	}
	var env struct {
		Data struct {
			State  string         `json:"state"`
			Result map[string]any `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(ts.Out.Bytes(), &env); err != nil || env.Data.State != "succeeded" || env.Data.Result["version"] != 1.0 {
		t.Errorf("--json: %s (%v)", ts.Out, err)
	}

	fs = clitest.NewFakeServices(t, &clitest.FakeServices{RollbackFails: true})
	f, ts = fs.Factory()
	if code := clitest.RunWith(t, f, NewCmdRollback(f, nil), "svc_1"); code != cmdutil.ExitServiceFailed {
		t.Fatalf("a failed rollback: exit %d, want %d: %s", code, cmdutil.ExitServiceFailed, ts.Err)
	}
	if !strings.Contains(ts.Err.String(), "service:unhealthy: version 1 of api never became healthy") {
		t.Errorf("stderr: %s", ts.Err)
	}
}
