package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeBlock is a ```sh block of README.md marked <!-- readme-test -->
// (or <!-- readme-test: source-tree --> for one that runs in the source
// tree) on the line before its fence.
type readmeBlock struct {
	line       int
	text       string
	sourceTree bool
}

// readmeBlocks reads README.md's runnable blocks, in order.
func readmeBlocks(t *testing.T, readme string) []readmeBlock {
	var out []readmeBlock
	lines := strings.Split(readme, "\n")
	for i := 0; i+1 < len(lines); i++ {
		mark := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(mark, "<!-- readme-test") {
			continue
		}
		fence := lines[i+1]
		indent := fence[:len(fence)-len(strings.TrimLeft(fence, " "))]
		if strings.TrimSpace(fence) != "```sh" {
			t.Fatalf("README.md:%d: <!-- readme-test --> is not followed by a ```sh block", i+1)
		}
		b := readmeBlock{line: i + 3, sourceTree: strings.Contains(mark, "source-tree")}
		var body []string
		for j := i + 2; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == "```" {
				i = j
				break
			}
			body = append(body, strings.TrimPrefix(lines[j], indent))
		}
		b.text = strings.Join(body, "\n")
		out = append(out, b)
	}
	return out
}

// exitComment is a trailing "# exit N…" (or "# …, exit N") comment: the
// exit code the README says the command ends with.
var exitComment = regexp.MustCompile(`\s+#(?:[^#]*[,;:]|)\s*exit (\d+)\b[^#]*$`)

// readmeScript turns the blocks into one bash script: each command must
// exit 0, or the code its comment documents; the first that does not
// stops the script and names its README line.
func readmeScript(blocks []readmeBlock, subst func(string) string) string {
	var s strings.Builder
	s.WriteString("set -uo pipefail\n")
	s.WriteString(`fail() { echo "README.md:$1: exited $2, want $3" >&2; exit 99; }` + "\n")
	for _, b := range blocks {
		// Join continued lines, keeping each command's first line number.
		var cmds []struct {
			line int
			text string
		}
		lines := strings.Split(b.text, "\n")
		for i := 0; i < len(lines); i++ {
			start, text := b.line+i, lines[i]
			for strings.HasSuffix(text, "\\") && i+1 < len(lines) {
				i++
				text += "\n" + lines[i]
			}
			// A pipe at the end of a line goes on on the next.
			for strings.HasSuffix(strings.TrimSpace(text), "|") && i+1 < len(lines) {
				i++
				text += "\n" + lines[i]
			}
			if strings.TrimSpace(text) == "" || strings.HasPrefix(strings.TrimSpace(text), "#") {
				continue
			}
			cmds = append(cmds, struct {
				line int
				text string
			}{start, text})
		}
		if b.sourceTree {
			s.WriteString(`pushd "$PIER_SOURCE" >/dev/null` + "\n")
		}
		for _, c := range cmds {
			want := "0"
			text := subst(c.text)
			if m := exitComment.FindStringSubmatch(text); m != nil {
				want = m[1]
			}
			fmt.Fprintf(&s, "echo '+ README.md:%d' >&2\n", c.line)
			if strings.HasPrefix(strings.TrimSpace(text), "export ") {
				// An export's own status is 0 whatever its $( ) did; check
				// the value instead.
				name := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(text), "export "), "=", 2)[0]
				fmt.Fprintf(&s, "%s\n[ -n \"${%s:-}\" ] && [ \"${%s}\" != null ] || fail %d empty %s\n", text, name, name, c.line, "a value")
				continue
			}
			fmt.Fprintf(&s, "if %s\nthen rc=0; else rc=$?; fi\n[ $rc -eq %s ] || fail %d $rc %s\n", text, want, c.line, want)
		}
		if b.sourceTree {
			s.WriteString("popd >/dev/null\n")
		}
	}
	return s.String()
}

func freePort(t *testing.T, network string) int {
	t.Helper()
	if network == "udp" {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestREADMERuns runs README.md's blocks marked <!-- readme-test --> as
// one bash script, the way a newcomer pastes them: `make install` into a
// temporary GOBIN put first on the PATH, the installed `pier server`
// running with no flags but its ports and data directory, and every other
// command the installed pier, from a fresh home directory. Each command
// must exit 0, or the code its "# exit N" comment documents (5 when a
// person must decide, 10 for a service that never gets healthy). pier
// admin is given no data directory: it finds the running server's.
// The ports the README names (8080, 8443, 5353) are replaced by free ones.
func TestREADMERuns(t *testing.T) {
	if testing.Short() {
		t.Skip("installs the binaries and runs the README against a real server")
	}
	for _, tool := range []string{"bash", "curl", "jq", "make", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("README's commands need %s", tool)
		}
	}
	r := newReadmeRun(t)
	// The install block first, alone: the server it installs must run
	// before anything else can.
	var install, rest []readmeBlock
	for _, b := range r.blocks {
		if b.sourceTree {
			install = append(install, b)
		} else {
			rest = append(rest, b)
		}
	}
	r.run("install", readmeScript(install, r.subst), 5*time.Minute)
	for _, bin := range []string{"pier", "pier-server"} {
		if _, err := os.Stat(filepath.Join(r.gobin, bin)); err != nil {
			t.Fatalf("make install did not install %s into GOBIN: %v", bin, err)
		}
	}
	r.startServer()
	r.run("README", readmeScript(rest, r.subst), 3*time.Minute)
}

// readmeRun is the README's marked blocks, a fresh home and work
// directory, free ports, and the environment the blocks run in.
type readmeRun struct {
	t                                     *testing.T
	blocks                                []readmeBlock
	dir, work, gobin, base                string
	httpPort, httpsPort, dnsPort, smtpPrt int
	env                                   []string
	subst                                 func(string) string
}

func newReadmeRun(t *testing.T) *readmeRun {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	source, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	r := &readmeRun{t: t, blocks: readmeBlocks(t, string(readme)), dir: t.TempDir()}
	if len(r.blocks) < 10 {
		t.Fatalf("only %d README blocks are marked <!-- readme-test -->", len(r.blocks))
	}
	home := filepath.Join(r.dir, "home")
	r.work, r.gobin = filepath.Join(r.dir, "work"), filepath.Join(r.dir, "bin")
	for _, d := range []string{home, r.work, r.gobin, filepath.Join(r.dir, "run")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The README's relative paths (./examples/site) are the source tree's.
	if err := os.Symlink(filepath.Join(source, "examples"), filepath.Join(r.work, "examples")); err != nil {
		t.Fatal(err)
	}
	r.httpPort, r.httpsPort, r.dnsPort, r.smtpPrt = freePort(t, "tcp"), freePort(t, "tcp"), freePort(t, "udp"), freePort(t, "tcp")
	r.base = fmt.Sprintf("http://localhost:%d", r.httpPort)
	r.env = []string{
		"HOME=" + home, "XDG_RUNTIME_DIR=" + filepath.Join(r.dir, "run"), "XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "PATH=" + r.gobin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"GOBIN=" + r.gobin, "PIER_SOURCE=" + source, "PIER_BASE_URL=" + r.base, "NO_COLOR=1", "TERM=dumb",
	}
	// A fresh home, but the go command keeps its caches.
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS"} {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatal(err)
		}
		r.env = append(r.env, k+"="+strings.TrimSpace(string(out)))
	}
	r.subst = strings.NewReplacer("localhost:8080", fmt.Sprintf("localhost:%d", r.httpPort), ":8443", fmt.Sprintf(":%d", r.httpsPort),
		"-p 5353", fmt.Sprintf("-p %d", r.dnsPort)).Replace
	return r
}

// run runs script with bash in the work directory and fails on a non-zero
// exit, which the script's own checks of documented codes turn into.
func (r *readmeRun) run(name, script string, timeout time.Duration) {
	t := r.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir, cmd.Env = r.work, r.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s: %s", name, time.Since(start).Round(time.Millisecond))
	if testing.Verbose() {
		t.Logf("%s output:\n%s", name, out.String())
	}
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, tail(out.String(), 6000))
	}
}

// startServer starts the installed pier server as the README does, with
// the listeners moved to free ports and its data in a directory of its own
// that nothing else is told about, and waits until it is ready.
func (r *readmeRun) startServer() {
	t := r.t
	srv := exec.Command(filepath.Join(r.gobin, "pier"), "server", "--data-dir", filepath.Join(r.dir, "data"),
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", r.httpPort), "--https-addr", fmt.Sprintf("127.0.0.1:%d", r.httpsPort),
		"--http3-addr", "off", "--dns-addr", fmt.Sprintf("127.0.0.1:%d", r.dnsPort), "--smtp-addr", fmt.Sprintf("127.0.0.1:%d", r.smtpPrt))
	srv.Dir = r.work
	// Where no sandbox can be set up (no runc, not root), process
	// services run as bare processes, as in the other server tests.
	srv.Env = append(append([]string{}, r.env...), "PIER_UNSANDBOXED_SERVICES=true", "PIER_APPS_DIR="+filepath.Join(r.dir, "apps"))
	var srvOut bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { srv.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			srv.Process.Kill()
		}
		if t.Failed() {
			t.Logf("server output:\n%s", tail(srvOut.String(), 4000))
		}
	})
	r.waitReady(&srvOut)
}

// waitReady waits for the sandbox reference release, which the server
// publishes on its first start: the auditor's block verifies it.
func (r *readmeRun) waitReady(srvOut *bytes.Buffer) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(r.base + "/.well-known/sandbox-reference.json")
		if err == nil {
			var b bytes.Buffer
			b.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.Contains(b.String(), `"available"`) {
				return
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the server did not get ready: %v\n%s", err, tail(srvOut.String(), 4000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
