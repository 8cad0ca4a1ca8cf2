package cli

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
)

// Ctrl-C while a command waits for its task (here a teardown) exits 130
// and says that the task goes on on the server and how to follow it,
// instead of blaming the network or the --timeout.
func TestInterruptWhileWaitingForATask(t *testing.T) {
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			once.Do(func() { clitest.Interrupt(t) })
		}
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusAccepted)
		}
		fmt.Fprint(w, `{"data":{"taskId":"tsk_1","kind":"teardown","state":"running","steps":[{"name":"undeploy","state":"running"}]},"actions":[{"kind":"stop","reason":"done"}],"formatVersion":"1"}`)
	}))
	defer srv.Close()

	f, ts := clitest.NewFactory(map[string]string{"PIER_BASE_URL": srv.URL, "PIER_API_KEY": "agk_1"})
	code := run(f, []string{"services", "teardown", "svc_1", "--timeout", "20s"})
	errOut := ts.Err.String()
	if code != cmdutil.ExitInterrupted {
		t.Fatalf("exit %d, want %d\nstderr: %s", code, cmdutil.ExitInterrupted, errOut)
	}
	for _, w := range []string{"interrupted (Ctrl-C)", "Task tsk_1 goes on on the server", "pier tasks get tsk_1"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
	if strings.Contains(errOut, "--timeout") || strings.Contains(errOut, "Is Pier running") {
		t.Errorf("an interruption blamed on the timeout or the network:\n%s", errOut)
	}
}

// A wait that runs past --timeout says so and how to follow the task; it
// does not ask whether Pier is running, since the server answered.
func TestWaitPastTimeoutBlamesTheTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusAccepted)
		}
		fmt.Fprint(w, `{"data":{"taskId":"tsk_1","kind":"teardown","state":"running","steps":[]},"actions":[{"kind":"stop","reason":"done"}],"formatVersion":"1"}`)
	}))
	defer srv.Close()

	f, ts := clitest.NewFactory(map[string]string{"PIER_BASE_URL": srv.URL, "PIER_API_KEY": "agk_1"})
	code := run(f, []string{"services", "teardown", "svc_1", "--timeout", "300ms"})
	errOut := ts.Err.String()
	if code != cmdutil.ExitServer {
		t.Fatalf("exit %d, want %d\nstderr: %s", code, cmdutil.ExitServer, errOut)
	}
	for _, w := range []string{"pier tasks get tsk_1", "ran past its --timeout of 300ms", "--timeout 0"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
	if strings.Contains(errOut, "Is Pier running") {
		t.Errorf("a timeout blamed on the server:\n%s", errOut)
	}
}

// Ctrl-C during an upload exits 130 and says that running the command
// again resumes it, never that the server is unreachable.
func TestInterruptDuringAnUpload(t *testing.T) {
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // so that the hang-up is seen
		once.Do(func() { clitest.Interrupt(t) })
		select { // the CLI hangs up once interrupted
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte("<p>hi</p>"), 0o644); err != nil {
		t.Fatal(err)
	}

	f, ts := clitest.NewFactory(map[string]string{"PIER_BASE_URL": srv.URL, "PIER_API_KEY": "agk_1", "PIER_WATCHER": "off"})
	code := run(f, []string{"bundles", "upload", dir, "--project", "prj_1", "--timeout", "20s"})
	errOut := ts.Err.String()
	if code != cmdutil.ExitInterrupted {
		t.Fatalf("exit %d, want %d\nstderr: %s", code, cmdutil.ExitInterrupted, errOut)
	}
	if !strings.Contains(errOut, "interrupted (Ctrl-C)") || !strings.Contains(errOut, "an upload resumes where it stopped") || strings.Contains(errOut, "Is Pier running") {
		t.Errorf("stderr:\n%s", errOut)
	}
}
