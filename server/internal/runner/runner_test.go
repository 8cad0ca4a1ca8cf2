package runner

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type events struct {
	mu     sync.Mutex
	lines  []string
	health []Health
}

func (e *events) Log(_ string, _ int, stream, text string, _ time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lines = append(e.lines, stream+": "+text)
}

func (e *events) Health(_ string, _ int, h Health) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.health = append(e.health, h)
}

func (e *events) last() Health {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.health) == 0 {
		return Health{}
	}
	return e.health[len(e.health)-1]
}

func (e *events) text() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.lines, "\n")
}

func newSupervisor(t *testing.T, ev *events) *Supervisor {
	t.Helper()
	dir, err := os.MkdirTemp("", "pier-apps-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s, err := New(Config{Dir: dir, Events: ev, RestartBase: 20 * time.Millisecond, RestartMax: 50 * time.Millisecond, AllowUnsandboxed: !sandboxRequired(),
		CrashRestarts: 3, CrashWindow: time.Minute, StopGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s
}

// sandboxRequired: CI (PIER_TEST_SANDBOX=require) runs every version in
// its sandbox and fails when there is none; elsewhere versions may run as
// bare processes where no sandbox can be had.
func sandboxRequired() bool { return os.Getenv("PIER_TEST_SANDBOX") == "require" }

func files(m map[string]string) func(context.Context, string) error {
	return func(_ context.Context, dir string) error {
		for name, body := range m {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
}

const app = `import http.server, os, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("hello " + os.environ.get("GREETING", "") + " " + os.getcwd()).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
print("listening on", os.environ["PORT"], flush=True)
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
`

func TestProcessRunsHealthyWithItsEnvironment(t *testing.T) {
	ev := &events{}
	s := newSupervisor(t, ev)
	ctx := context.Background()
	inst, err := s.Start(ctx, Spec{ServiceID: "svc_a", Version: 1, Command: "python3 app.py", Env: map[string]string{"GREETING": "world", "PORT": "1"},
		Materialize: files(map[string]string{"app.py": app}), HealthTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// What the process wrote before it answered is reported before Start
	// returns, and before the word that it is healthy.
	out := ev.text()
	listening, healthy := strings.Index(out, "stdout: listening on"), strings.Index(out, "system: version 1 is healthy")
	if listening < 0 || healthy < 0 || listening > healthy {
		t.Fatalf("the first line is not reported before the version is healthy:\n%s", out)
	}
	resp, err := http.Get("http://" + inst.Addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	home := inst.Dir
	if inst.Sandboxed {
		home = "/app"
	}
	if !strings.HasPrefix(string(b), "hello world "+home) {
		t.Fatalf("answer %q, want the variable and the version's own directory %s", b, home)
	}
	if err := s.Stop(ctx, "svc_a", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(inst.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the version's files outlived it: %v", err)
	}
	if _, err := http.Get("http://" + inst.Addr + "/"); err == nil {
		t.Fatal("the stopped process still answers")
	}
}

func TestNeverHealthyCarriesTheLastLines(t *testing.T) {
	s := newSupervisor(t, &events{})
	_, err := s.Start(context.Background(), Spec{ServiceID: "svc_b", Version: 1, Command: "echo about to fail; echo boom >&2; exit 3", HealthTimeout: 5 * time.Second})
	var ue *UnhealthyError
	if !errors.As(err, &ue) {
		t.Fatalf("err = %v, want an UnhealthyError", err)
	}
	if !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("error lacks the last lines or the status: %v", err)
	}
	if s.Running("svc_b", 1) {
		t.Fatal("a failed version is still supervised")
	}
	_, err = s.Start(context.Background(), Spec{ServiceID: "svc_c", Version: 1, Command: "exec sleep 30", HealthTimeout: 300 * time.Millisecond})
	if !errors.Is(err, ErrUnhealthy) || !strings.Contains(err.Error(), "no healthy answer within") {
		t.Fatalf("a process that never answers: %v", err)
	}
}

func TestCrashLoopStopsAsCrashed(t *testing.T) {
	ev := &events{}
	s := newSupervisor(t, ev)
	// Healthy at first (a worker up for its grace period), then exits every time.
	_, err := s.Start(context.Background(), Spec{ServiceID: "svc_d", Version: 1, Worker: true,
		Command: `if [ -f started ]; then echo crash again; exit 1; fi; touch started; sleep 0.3; echo crash; exit 1`, Grace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for ev.last().State != "crashed" {
		if time.Now().After(deadline) {
			t.Fatalf("no crash loop detected; health %+v\n%s", ev.last(), ev.text())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if h := ev.last(); !strings.Contains(h.Detail, "crash again") || h.Restarts < 2 {
		t.Fatalf("crashed health %+v lacks the restarts or the last lines", h)
	}
}

func TestStopIsGracefulThenKills(t *testing.T) {
	ev := &events{}
	s := newSupervisor(t, ev)
	_, err := s.Start(context.Background(), Spec{ServiceID: "svc_e", Version: 1, Worker: true,
		Command: `trap 'echo got TERM; exit 0' TERM; echo trapped; while true; do sleep 0.05; done`, Grace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// The shell is the sandbox's first process, which ignores a signal it
	// has no handler for: stop it only once its trap is set.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(ev.text(), "trapped"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the trap was never set:\n%s", ev.text())
		}
	}
	if err := s.Stop(context.Background(), "svc_e", 1); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ev.text(), "got TERM") || !strings.Contains(ev.text(), "stopped (SIGTERM)") {
		t.Fatalf("not stopped with SIGTERM:\n%s", ev.text())
	}
	_, err = s.Start(context.Background(), Spec{ServiceID: "svc_f", Version: 1, Worker: true,
		Command: `trap '' TERM; while true; do sleep 0.05; done`, Grace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s.cfg.StopGrace = 200 * time.Millisecond
	if err := s.Stop(context.Background(), "svc_f", 1); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ev.text(), "killed (SIGKILL") {
		t.Fatalf("a process ignoring SIGTERM was not killed:\n%s", ev.text())
	}
}

func TestVersionCannotReadPiersFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("versions run as a user of their own only when Pier runs as root")
	}
	data := t.TempDir() // 0700, as Pier keeps its data directory
	if err := os.WriteFile(filepath.Join(data, "pier.db"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	s := newSupervisor(t, ev)
	_, err := s.Start(context.Background(), Spec{ServiceID: "svc_g", Version: 1, Worker: true, Grace: 300 * time.Millisecond,
		Command: "id -u; cat " + data + "/pier.db || echo cannot read the database; ls " + data + " || echo cannot list the data directory; sleep 5"})
	if err != nil {
		t.Fatal(err)
	}
	out := ev.text()
	if strings.Contains(out, "secret") || !strings.Contains(out, "cannot read the database") || !strings.Contains(out, "cannot list the data directory") {
		t.Fatalf("the version read Pier's data directory:\n%s", out)
	}
	if strings.Contains(out, "stdout: 0\n") {
		t.Fatalf("the version ran as root:\n%s", out)
	}
}

// A line is cut at 8 KiB, so a process printing without newlines cannot
// grow Pier's memory; what follows the cut comes as further lines.
func TestLongLinesAreCut(t *testing.T) {
	ev := &events{}
	s := newSupervisor(t, ev)
	_, err := s.Start(context.Background(), Spec{ServiceID: "svc_h", Version: 1, Worker: true, Grace: 300 * time.Millisecond,
		Command: `head -c 20000 /dev/zero | tr '\0' x; echo; echo done; sleep 5`})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(ev.text(), "stdout: done") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	total := 0
	for _, l := range ev.lines {
		text, ok := strings.CutPrefix(l, "stdout: ")
		if !ok {
			continue
		}
		if len(text) > 8192 {
			t.Fatalf("a line of %d bytes reached the log", len(text))
		}
		total += strings.Count(text, "x")
	}
	if total != 20000 {
		t.Fatalf("%d of 20000 bytes reached the log", total)
	}
}

// chunks reads its data a few bytes at a time, as a pipe may.
type chunks struct {
	data []byte
	n    int
}

func (c *chunks) Read(b []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(c.n, len(b), len(c.data))
	copy(b, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// However the pipe delivers a long line, every byte reaches the log, in
// pieces of at most 8 KiB.
func TestLongLinesAreCutWhateverTheReads(t *testing.T) {
	line := strings.Repeat("x", 20000)
	for _, size := range []int{1, 7, 3000, 4096, 8191, 8192, 8193, 20001} {
		ev := &events{}
		p := &proc{s: &Supervisor{cfg: Config{Events: ev, Now: time.Now}}, spec: Spec{ServiceID: "svc_c", Version: 1}, tail: newRing(30)}
		p.capture("stdout", &chunks{data: []byte(line + "\nafter\n"), n: size})
		total := 0
		for _, l := range ev.lines {
			text := strings.TrimPrefix(l, "stdout: ")
			if len(text) > 8192 {
				t.Fatalf("reads of %d: a line of %d bytes", size, len(text))
			}
			total += strings.Count(text, "x")
		}
		if total != 20000 || ev.lines[len(ev.lines)-1] != "stdout: after" {
			t.Fatalf("reads of %d: %d of 20000 bytes, last line %q", size, total, ev.lines[len(ev.lines)-1])
		}
	}
}
