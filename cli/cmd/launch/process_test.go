package launch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
)

func appDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "api")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"Procfile": "web: python3 app.py\n", "app.py": "print('hi')\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A first launch of a process quotes it as a service, sends its command,
// variables and health check, prints the first log lines while it waits,
// then the preview URL, the service and its version.
func TestLaunchProcess(t *testing.T) {
	fs := clitest.NewFakeServices(t, &clitest.FakeServices{States: []string{"queued", "start", "start", "deploy", "succeeded"},
		Lines: []string{"#starting version 1: python3 app.py", "listening on 127.0.0.1:5000", "#version 1 is healthy"}})
	f, ts := fs.Factory()
	code := clitest.RunWith(t, f, NewCmdLaunch(f, nil), appDir(t), "--project", "prj_1", "--target", "process", "--run", "python3 app.py",
		"--env", "GREETING=hello", "--secret", "API_TOKEN=s3cr3t", "--health-path", "/healthz", "--health-timeout", "30")
	out, errOut := ts.Out.String(), ts.Err.String()
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if len(fs.Quotes) != 1 {
		t.Fatalf("%d quotes, want 1", len(fs.Quotes))
	}
	if got := clitest.JSONText(fs.Quotes[0]["items"]); got != `[{"kind":"service","months":1,"name":"api","target":"process","workload":"dynamic_service"}]` {
		t.Errorf("quote items: %s", got)
	}
	want := `{"bundleId":"bnd_1","env":{"GREETING":"hello"},"healthCheck":{"path":"/healthz","timeoutSeconds":30},"name":"api","quoteId":"quo_1","run":"python3 app.py","secrets":{"API_TOKEN":"s3cr3t"},"target":"process"}`
	if got := clitest.JSONText(fs.LaunchBody); got != want {
		t.Errorf("launch body:\n%s\nwant\n%s", got, want)
	}
	for _, w := range []string{"… quoting api\n", "… start (running)\n", "  system starting version 1: python3 app.py\n", "  stdout listening on 127.0.0.1:5000\n", "  system version 1 is healthy\n", "… deploy (running)\n"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
	if strings.Count(errOut, "listening on") != 1 {
		t.Errorf("a log line printed twice:\n%s", errOut)
	}
	wantOut := "https://api--prj-1.localhost:8443/\nservice svc_1\nversion 1\ntask    tsk_2 (succeeded)\nNext: pier logs svc_1 --follow\n      pier services get svc_1\n      pier services teardown svc_1\n"
	if out != wantOut {
		t.Errorf("stdout:\n%s\nwant\n%s", out, wantOut)
	}
	// The logs were read for the launch's version, on from the last line;
	// only reads on from a line wait for more.
	if q := fs.LogQueries[0]; q.Get("waitSeconds") != "0" || q.Get("after") != "" {
		t.Errorf("the first log read: %v", q)
	}
	var sawAfter bool
	for _, q := range fs.LogQueries {
		if q.Get("version") != "1" {
			t.Errorf("log read without the version: %v", q)
		}
		sawAfter = sawAfter || q.Get("after") == "3"
		if q.Get("after") != "" && q.Get("waitSeconds") != "1" && q.Get("after") != "3" {
			t.Errorf("a read on from a line that does not wait: %v", q)
		}
	}
	if !sawAfter {
		t.Errorf("the log reads never went on from the last line: %v", fs.LogQueries)
	}
}

// A launch of a name the project already runs is a new version: no quote,
// and the output says which version serves and how to roll back.
func TestLaunchProcessRelaunch(t *testing.T) {
	fs := clitest.NewFakeServices(t, &clitest.FakeServices{Existing: true, States: []string{"start", "succeeded"}, Lines: []string{"listening again"}})
	f, ts := fs.Factory()
	code := clitest.RunWith(t, f, NewCmdLaunch(f, nil), appDir(t), "--project", "prj_1", "--target", "process")
	out, errOut := ts.Out.String(), ts.Err.String()
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if len(fs.Quotes) != 0 {
		t.Errorf("a relaunch was quoted: %v", fs.Quotes)
	}
	if got := clitest.JSONText(fs.LaunchBody); got != `{"bundleId":"bnd_1","name":"api","target":"process"}` {
		t.Errorf("launch body: %s", got)
	}
	if !strings.Contains(errOut, "a new version of svc_1") || !strings.Contains(errOut, "  stdout listening again") {
		t.Errorf("stderr:\n%s", errOut)
	}
	if !strings.Contains(out, "version 2 (was 1)\n") || !strings.Contains(out, "pier rollback svc_1\n") {
		t.Errorf("stdout:\n%s", out)
	}
	for _, q := range fs.LogQueries {
		if q.Get("version") != "2" {
			t.Errorf("a relaunch read the logs of another version: %v", q)
		}
	}
}

// A version that never becomes healthy prints the result's message, with
// its last log lines, and the action to read the logs, and exits 10.
func TestLaunchProcessUnhealthy(t *testing.T) {
	fs := clitest.NewFakeServices(t, &clitest.FakeServices{States: []string{"start", "failed"}, Lines: []string{"booting", "!ImportError: no module named flask"}})
	f, ts := fs.Factory()
	code := clitest.RunWith(t, f, NewCmdLaunch(f, nil), appDir(t), "--project", "prj_1", "--target", "process")
	out, errOut := ts.Out.String(), ts.Err.String()
	if code != cmdutil.ExitServiceFailed {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, cmdutil.ExitServiceFailed, out, errOut)
	}
	for _, w := range []string{
		"  stderr ImportError: no module named flask\n",
		"error: task tsk_2 failed: service:unhealthy: version 1 of api never became healthy: no healthy answer within 1s\n  last lines:\n  booting\n  ImportError: no module named flask\n",
		"pier services logs svc_1 --version 1",
	} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
}

// A worker with the PostgreSQL add-on is quoted as a database-backed app on
// the worker target; a typed refusal of the launch exits with its code.
func TestLaunchWorkerQuoteAndRefusal(t *testing.T) {
	fs := clitest.NewFakeServices(t, &clitest.FakeServices{LaunchError: clitest.ErrorEnvelope("plan:no_command", "a worker launch needs a command: add a Procfile", false, "")})
	f, ts := fs.Factory()
	code := clitest.RunWith(t, f, NewCmdLaunch(f, nil), appDir(t), "--project", "prj_1", "--target", "worker", "--name", "api", "--addon", "managed_postgres", "--health-grace", "2s")
	if code != cmdutil.ExitBlocked {
		t.Fatalf("exit %d, want %d\n%s", code, cmdutil.ExitBlocked, ts.Err)
	}
	if got := clitest.JSONText(fs.Quotes[0]["items"]); got != `[{"kind":"service","months":1,"name":"api","target":"worker","workload":"database_backed_app"}]` {
		t.Errorf("quote items: %s", got)
	}
	if got := clitest.JSONText(fs.LaunchBody["addons"]); got != `["managed_postgres"]` {
		t.Errorf("addons: %s", got)
	}
	if got := clitest.JSONText(fs.LaunchBody["healthCheck"]); got != `{"graceSeconds":2}` {
		t.Errorf("healthCheck: %s", got)
	}
	if !strings.Contains(ts.Err.String(), "plan:no_command") {
		t.Errorf("stderr: %s", ts.Err)
	}
}
