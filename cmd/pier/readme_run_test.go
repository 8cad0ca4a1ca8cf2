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
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	source, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(t, string(readme))
	if len(blocks) < 10 {
		t.Fatalf("only %d README blocks are marked <!-- readme-test -->", len(blocks))
	}

	dir := t.TempDir()
	home, work, gobin := filepath.Join(dir, "home"), filepath.Join(dir, "work"), filepath.Join(dir, "bin")
	for _, d := range []string{home, work, gobin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The README's relative paths (./examples/site) are the source tree's.
	if err := os.Symlink(filepath.Join(source, "examples"), filepath.Join(work, "examples")); err != nil {
		t.Fatal(err)
	}
	httpPort, httpsPort, dnsPort, smtpPort := freePort(t, "tcp"), freePort(t, "tcp"), freePort(t, "udp"), freePort(t, "tcp")
	base := fmt.Sprintf("http://localhost:%d", httpPort)

	// A fresh home, but the go command keeps its caches.
	goEnv := map[string]string{}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS"} {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatal(err)
		}
		goEnv[k] = strings.TrimSpace(string(out))
	}
	env := []string{
		"HOME=" + home, "XDG_RUNTIME_DIR=" + filepath.Join(dir, "run"), "XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "PATH=" + gobin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"GOBIN=" + gobin, "PIER_SOURCE=" + source, "PIER_BASE_URL=" + base, "NO_COLOR=1", "TERM=dumb",
	}
	for k, v := range goEnv {
		env = append(env, k+"="+v)
	}
	if err := os.MkdirAll(filepath.Join(dir, "run"), 0o700); err != nil {
		t.Fatal(err)
	}

	// The install block first, alone: the server it installs must run
	// before anything else can.
	var install []readmeBlock
	var rest []readmeBlock
	for _, b := range blocks {
		if b.sourceTree {
			install = append(install, b)
		} else {
			rest = append(rest, b)
		}
	}
	subst := strings.NewReplacer("localhost:8080", fmt.Sprintf("localhost:%d", httpPort), ":8443", fmt.Sprintf(":%d", httpsPort), "-p 5353", fmt.Sprintf("-p %d", dnsPort)).Replace
	run := func(name, script string, timeout time.Duration) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-c", script)
		cmd.Dir, cmd.Env = work, env
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
	run("install", readmeScript(install, subst), 5*time.Minute)
	for _, bin := range []string{"pier", "pier-server"} {
		if _, err := os.Stat(filepath.Join(gobin, bin)); err != nil {
			t.Fatalf("make install did not install %s into GOBIN: %v", bin, err)
		}
	}

	// The server, as the README starts it once pier is installed: pier
	// server, with the listeners moved to free ports and its data in a
	// directory of its own that nothing else is told about.
	dataDir := filepath.Join(dir, "data")
	srv := exec.Command(filepath.Join(gobin, "pier"), "server", "--data-dir", dataDir,
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort), "--https-addr", fmt.Sprintf("127.0.0.1:%d", httpsPort),
		"--http3-addr", "off", "--dns-addr", fmt.Sprintf("127.0.0.1:%d", dnsPort), "--smtp-addr", fmt.Sprintf("127.0.0.1:%d", smtpPort))
	srv.Dir = work
	// Where no sandbox can be set up (no runc, not root), process
	// services run as bare processes, as in the other server tests.
	srv.Env = append(append([]string{}, env...), "PIER_UNSANDBOXED_SERVICES=true", "PIER_APPS_DIR="+filepath.Join(dir, "apps"))
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
	// Ready once the sandbox reference release, which the server publishes
	// on its first start, is in place: the auditor's block verifies it.
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/.well-known/sandbox-reference.json")
		if err == nil {
			var b bytes.Buffer
			b.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.Contains(b.String(), `"available"`) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not get ready: %v\n%s", err, tail(srvOut.String(), 4000))
		}
		time.Sleep(200 * time.Millisecond)
	}

	run("README", readmeScript(rest, subst), 3*time.Minute)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
