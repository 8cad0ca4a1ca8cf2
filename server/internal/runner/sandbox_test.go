package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tests below are each finding of an attack from one tenant's service
// on another's and on the host, run against the sandbox. Each fails with
// versions run as bare processes.

// sandboxed is a supervisor whose versions must run sandboxed; the test is
// skipped where there is no sandbox, unless PIER_TEST_SANDBOX=require.
func sandboxed(t testing.TB, ev *events, limits Limits) *Supervisor {
	t.Helper()
	dir, err := os.MkdirTemp("", "pier-apps-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s, err := New(Config{Dir: dir, Events: ev, Limits: limits, RestartBase: 20 * time.Millisecond, RestartMax: 50 * time.Millisecond,
		CrashRestarts: 3, CrashWindow: time.Minute, StopGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	if _, err := s.Isolation(); err != nil {
		if sandboxRequired() {
			t.Fatalf("PIER_TEST_SANDBOX=require: %v", err)
		}
		t.Skipf("no sandbox here: %v", err)
	}
	return s
}

// waitFor waits until the version's output has a line starting with
// "DONE", and returns the output.
func waitFor(t *testing.T, ev *events, what string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if out := ev.text(); strings.Contains(out, what) {
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %q in the version's output:\n%s", what, ev.text())
	return ""
}

// probe is a worker that tries what an attacker's service would and
// prints one line per try: "name: ok" when it could, "name: refused"
// when it could not.
const probe = `import os, socket, sys
def tcp(name, host, port, bind=False):
    s = socket.socket(); s.settimeout(1.5)
    try:
        if bind: s.bind((host, port)); s.listen()
        else: s.connect((host, port))
        print(name + ": ok", flush=True)
    except OSError as e:
        print(name + ": refused (" + str(e) + ")", flush=True)
    finally:
        s.close()
def tryfile(name, f):
    try:
        f(); print(name + ": ok", flush=True)
    except OSError as e:
        print(name + ": refused (" + str(e) + ")", flush=True)
env = os.environ
tcp("bind-victim", env["VICTIM_HOST"], int(env["VICTIM_PORT"]), bind=True)
tcp("connect-victim", env["VICTIM_HOST"], int(env["VICTIM_PORT"]))
tcp("connect-host-loopback", "127.0.0.1", int(env["HOST_PORT"]))
tcp("connect-host-gateway", env["GATEWAY"], int(env["HOST_PORT"]))
tcp("connect-metadata", "169.254.169.254", 80)
tryfile("see-host-tmp", lambda: os.stat(env["HOST_TMP_FILE"]))
tryfile("see-host-shm", lambda: os.stat(env["HOST_SHM_FILE"]))
tryfile("write-usr", lambda: open("/usr/pier-probe", "w").close())
tryfile("write-etc", lambda: open("/etc/pier-probe", "w").close())
pids = [p for p in os.listdir("/proc") if p.isdigit()]
print("see-host-pid: " + ("ok" if env["HOST_PID"] in pids else "refused") + " (" + str(len(pids)) + " processes)", flush=True)
print("DONE", flush=True)
import time; time.sleep(600)
`

func TestSandboxIsolatesTenants(t *testing.T) {
	ev := &events{}
	s := sandboxed(t, ev, Limits{})
	ctx := context.Background()
	victim, err := s.Start(ctx, Spec{ServiceID: "svc_victim", Version: 1, Command: "python3 app.py", Env: map[string]string{"GREETING": "victim"},
		Materialize: files(map[string]string{"app.py": app}), HealthTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// A listener of the host's on every address, as Pier's are.
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	hostPort := ln.Addr().(*net.TCPAddr).Port
	tmpFile := filepath.Join(os.TempDir(), fmt.Sprintf("pier-probe-%d", time.Now().UnixNano()))
	os.WriteFile(tmpFile, []byte("host"), 0o644)
	defer os.Remove(tmpFile)
	shmFile := fmt.Sprintf("/dev/shm/pier-probe-%d", time.Now().UnixNano())
	os.WriteFile(shmFile, []byte("host"), 0o644)
	defer os.Remove(shmFile)

	vhost, vport, _ := net.SplitHostPort(victim.Addr)
	attacker, err := s.Start(ctx, Spec{ServiceID: "svc_attacker", Version: 1, Worker: true, Grace: 300 * time.Millisecond, Command: "python3 probe.py",
		Materialize: files(map[string]string{"probe.py": probe}),
		Env: map[string]string{"VICTIM_HOST": vhost, "VICTIM_PORT": vport, "HOST_PORT": fmt.Sprint(hostPort),
			"GATEWAY": gatewayOf(t, vhost), "HOST_TMP_FILE": tmpFile, "HOST_SHM_FILE": shmFile, "HOST_PID": fmt.Sprint(os.Getpid())}})
	if err != nil {
		t.Fatal(err)
	}
	out := waitFor(t, ev, "DONE")
	for _, try := range []string{"bind-victim", "connect-victim", "connect-host-loopback", "connect-host-gateway", "connect-metadata",
		"see-host-tmp", "see-host-shm", "write-usr", "write-etc", "see-host-pid"} {
		if !strings.Contains(out, "stdout: "+try+": refused") {
			t.Errorf("%s was not refused:\n%s", try, out)
		}
	}
	// The victim still answers, itself, on its address.
	resp, err := http.Get("http://" + victim.Addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(b), "hello victim") {
		t.Fatalf("the victim's address answered %q", b)
	}
	if victim.UID == attacker.UID {
		t.Fatalf("two live versions share the user id %d", victim.UID)
	}
}

// gatewayOf is the host's end of the pair whose version's end is addr.
func gatewayOf(t *testing.T, addr string) string {
	ip := net.ParseIP(addr).To4()
	if ip == nil {
		t.Fatalf("%q is not an IPv4 address", addr)
	}
	ip[3]--
	return ip.String()
}

// A port of its own: a version that exits restarts on its own address and
// port, whatever else binds the same port number elsewhere meanwhile.
func TestRestartNeverWaitsForAPort(t *testing.T) {
	ev := &events{}
	s := sandboxed(t, ev, Limits{})
	ctx := context.Background()
	// Exits once after it answered, then serves for good.
	flaky := `import os, sys
if not os.path.exists("ran"):
    open("ran", "w").close()
    import threading
    threading.Timer(1.0, lambda: os._exit(1)).start()
` + app
	inst, err := s.Start(ctx, Spec{ServiceID: "svc_flaky", Version: 1, Command: "python3 app.py", Env: map[string]string{"GREETING": "flaky"},
		Materialize: files(map[string]string{"app.py": flaky}), HealthTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Another tenant takes the same port number meanwhile.
	if _, err := s.Start(ctx, Spec{ServiceID: "svc_squatter", Version: 1, Command: "python3 app.py", Env: map[string]string{"GREETING": "squatter"},
		Materialize: files(map[string]string{"app.py": app}), HealthTimeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ev, "system: process exit status 1; restarting")
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + inst.Addr + "/")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.HasPrefix(string(b), "hello flaky") {
				t.Fatalf("after its restart the version's address answered %q", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the version did not answer after its restart: %v\n%s", err, ev.text())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A child that leaves its process group and session still ends with its
// version.
func TestStopEndsEveryProcess(t *testing.T) {
	ev := &events{}
	s := sandboxed(t, ev, Limits{})
	mark := fmt.Sprint(900000 + time.Now().UnixNano()%99999)
	_, err := s.Start(context.Background(), Spec{ServiceID: "svc_setsid", Version: 1, Worker: true, Grace: 300 * time.Millisecond,
		Command: "setsid sh -c 'exec sleep " + mark + "' & setsid -f sleep " + mark + "; sleep 600"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(processesWith(mark)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the escaping children never ran:\n%s", ev.text())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.Stop(context.Background(), "svc_setsid", 1); err != nil {
		t.Fatal(err)
	}
	if left := processesWith(mark); len(left) > 0 {
		t.Fatalf("processes %v outlived their version", left)
	}
}

// processesWith lists the host's processes whose command line has s.
func processesWith(s string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), s) && !strings.Contains(string(b), "sh\x00-c") {
			found = append(found, e.Name())
		}
	}
	return found
}

// limitsProbe tries to take more than its limits allow: memory across
// children, processes, and disk in its directory, /tmp and /dev/shm.
const limitsProbe = `import os, subprocess, sys, time
kids = [subprocess.Popen([sys.executable, "-c", "b = bytearray(48 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nimport time; time.sleep(3)"]) for _ in range(3)]
codes = [k.wait() for k in kids]
print("memory-children: " + ("killed" if -9 in codes else "all lived") + " " + str(codes), flush=True)
forked = []
for i in range(64):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30); os._exit(0)
    forked.append(pid)
print("forks: " + str(len(forked)), flush=True)
for p in forked:
    os.kill(p, 9); os.waitpid(p, 0)
def fill(name, path, mib):
    try:
        with open(path, "wb") as f:
            for _ in range(mib): f.write(b"x" * (1 << 20))
            f.flush(); os.fsync(f.fileno())
        print(name + ": wrote " + str(mib) + " MiB", flush=True)
    except OSError as e:
        print(name + ": refused (" + str(e) + ")", flush=True)
    try: os.remove(path)
    except OSError: pass
fill("disk-app", "big", 64)
fill("disk-tmp", "/tmp/big", 32)
fill("disk-shm", "/dev/shm/big", 32)
print("DONE", flush=True)
time.sleep(600)
`

func TestLimitsBindTheWholeVersion(t *testing.T) {
	ev := &events{}
	s := sandboxed(t, ev, Limits{MemoryBytes: 96 << 20, Processes: 32, DiskBytes: 16 << 20, TmpBytes: 8 << 20})
	if _, err := s.Start(context.Background(), Spec{ServiceID: "svc_greedy", Version: 1, Worker: true, Grace: 300 * time.Millisecond,
		Command: "python3 probe.py", Materialize: files(map[string]string{"probe.py": limitsProbe})}); err != nil {
		t.Fatal(err)
	}
	out := waitFor(t, ev, "DONE")
	if !strings.Contains(out, "memory-children: killed") {
		t.Errorf("three children of 48 MiB each all lived under a limit of 96 MiB:\n%s", out)
	}
	var forks int
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "stdout: forks: ") {
			fmt.Sscan(strings.TrimPrefix(line, "stdout: forks: "), &forks)
		}
	}
	if forks == 0 || forks >= 32 {
		t.Errorf("forked %d processes under a limit of 32:\n%s", forks, out)
	}
	for _, d := range []string{"disk-app", "disk-tmp", "disk-shm"} {
		if !strings.Contains(out, "stdout: "+d+": refused") {
			t.Errorf("%s was not refused:\n%s", d, out)
		}
	}
}

// User ids come from a table every supervisor on the host shares: no two
// live versions hold the same one, whichever supervisor runs them.
func TestUIDsAreUniqueAcrossSupervisors(t *testing.T) {
	a := sandboxed(t, &events{}, Limits{})
	b := sandboxed(t, &events{}, Limits{})
	seen := map[int]string{}
	for i, s := range []*Supervisor{a, b, a, b} {
		id := fmt.Sprintf("svc_uid%d", i)
		inst, err := s.Start(context.Background(), Spec{ServiceID: id, Version: 1, Worker: true, Grace: 100 * time.Millisecond, Command: "sleep 600"})
		if err != nil {
			t.Fatal(err)
		}
		if other, ok := seen[inst.UID]; ok {
			t.Fatalf("%s and %s both run as %d", other, id, inst.UID)
		}
		seen[inst.UID] = id
	}
}

// Without a sandbox a version does not start, and the error names what is
// missing.
func TestNoSandboxFailsClosed(t *testing.T) {
	dir := t.TempDir()
	s, err := New(Config{Dir: dir, Runc: "/nonexistent/runc", SlotDir: filepath.Join(dir, "slots")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	if _, err := s.Isolation(); !errors.Is(err, ErrNoSandbox) || !strings.Contains(err.Error(), "runc") {
		t.Fatalf("Isolation() = %v, want ErrNoSandbox naming runc", err)
	}
	_, err = s.Start(context.Background(), Spec{ServiceID: "svc_bare", Version: 1, Worker: true, Command: "sleep 600"})
	var se *SandboxError
	if !errors.As(err, &se) {
		t.Fatalf("Start without a sandbox = %v, want a *SandboxError", err)
	}
	if s.Running("svc_bare", 1) {
		t.Fatal("the version runs anyway")
	}
}

// A version of a project whose policy denies egress is in the firewall's
// no_egress set while it runs, and only then.
func TestNoEgressIsInTheFirewall(t *testing.T) {
	s := sandboxed(t, &events{}, Limits{})
	inst, err := s.Start(context.Background(), Spec{ServiceID: "svc_noegress", Version: 1, Command: "python3 app.py",
		Materialize: files(map[string]string{"app.py": app}), HealthTimeout: 10 * time.Second, NoEgress: true})
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ := net.SplitHostPort(inst.Addr)
	set := func() string {
		out, _ := exec.Command("nft", "list", "set", "inet", firewallTable, "no_egress").CombinedOutput()
		return string(out)
	}
	if !strings.Contains(set(), host) {
		t.Fatalf("%s is not in no_egress:\n%s", host, set())
	}
	s.Stop(context.Background(), "svc_noegress", 1)
	if strings.Contains(set(), host+",") || strings.Contains(set(), host+" ") {
		t.Fatalf("%s stayed in no_egress after its version stopped:\n%s", host, set())
	}
}

// The edge's dialer reaches a sandboxed app from inside its namespace, at
// its loopback port: the app sees the request come from 127.0.0.1.
func TestDialVersionFromInsideItsNamespace(t *testing.T) {
	s := sandboxed(t, &events{}, Limits{})
	peer := `import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = self.client_address[0].encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
`
	inst, err := s.Start(context.Background(), Spec{ServiceID: "svc_dial", Version: 1, Command: "python3 app.py",
		Materialize: files(map[string]string{"app.py": peer}), HealthTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c, err := DialVersion(context.Background(), "tcp", inst.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.0\r\nHost: x\r\n\r\n")
	b, _ := io.ReadAll(c)
	if !strings.HasSuffix(string(b), "\r\n\r\n127.0.0.1") {
		t.Fatalf("the app saw the request from elsewhere:\n%s", b)
	}
}
