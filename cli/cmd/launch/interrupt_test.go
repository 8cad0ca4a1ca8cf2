package launch

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
)

// Ctrl-C while a launch waits for its task stops the CLI with exit 130 and
// says that the launch goes on on the server, naming the task to follow
// and the service to tear down, never that the server is unreachable.
func TestLaunchInterruptedWhileWaiting(t *testing.T) {
	var once sync.Once
	fs := clitest.NewFakeServices(t, &clitest.FakeServices{States: []string{"start"}})
	fs.OnTaskPoll = func(id string, n int) { once.Do(func() { clitest.Interrupt(t) }) }
	f, ts := fs.Factory()
	code := clitest.RunWith(t, f, NewCmdLaunch(f, nil), appDir(t), "--project", "prj_1", "--target", "process", "--timeout", "20s")
	errOut := ts.Err.String()
	if code != cmdutil.ExitInterrupted {
		t.Fatalf("exit %d, want %d\nstderr: %s", code, cmdutil.ExitInterrupted, errOut)
	}
	for _, w := range []string{"interrupted (Ctrl-C)", "pier tasks get tsk_2", "pier services teardown svc_1"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
	if strings.Contains(errOut, "Is Pier running") || strings.Contains(errOut, "context canceled") {
		t.Errorf("an interruption reported as a failure:\n%s", errOut)
	}
}

// Ctrl-C during the launch request itself says how to tell whether it
// reached the server and names the quote that holds budget for it.
func TestLaunchInterruptedWhileLaunching(t *testing.T) {
	fs := clitest.NewFakeServices(t, &clitest.FakeServices{OnLaunch: func(r *http.Request) {
		clitest.Interrupt(t)
		select { // the CLI hangs up once interrupted
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}})
	f, ts := fs.Factory()
	code := clitest.RunWith(t, f, NewCmdLaunch(f, nil), appDir(t), "--project", "prj_1", "--target", "process", "--timeout", "20s")
	errOut := ts.Err.String()
	if code != cmdutil.ExitInterrupted {
		t.Fatalf("exit %d, want %d\nstderr: %s", code, cmdutil.ExitInterrupted, errOut)
	}
	for _, w := range []string{"may have reached the server", "pier tasks list", "pier quotes release quo_1"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
}
