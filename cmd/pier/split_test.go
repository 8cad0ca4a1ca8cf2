package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli"
	clientpkg "github.com/pierhq/pier/cli/client"
	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/server"
)

// The client links no server package: the server's packages initialise
// for tens of milliseconds' worth of work and memory, and every command
// would pay for them at start (bench/README.md, "CLI start").
func TestClientLinksNoServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 20 {
		t.Fatalf("go list -deps listed only %q", deps)
	}
	for _, p := range deps {
		if p == "github.com/pierhq/pier/server" || strings.HasPrefix(p, "github.com/pierhq/pier/server/") {
			t.Errorf("cmd/pier depends on %s; the server's commands belong in cmd/pier-server", p)
		}
	}
}

// clientModules are the modules the client links besides the standard
// library and Pier's own, each for a command that needs it, and the patched
// copies (third_party) it links instead of upstream. Every package linked
// initialises at every start, `pier --version` included, so a module joins
// this list only once its init cost is known (bench/README.md, "CLI
// start": GODEBUG=inittrace=1 and TestCLIStartBudget). go-jose, jcs,
// jsonschema with x/text, and yaml.v3 are pier-server's: the commands
// that need them are handed over (cli/client).
var clientModules = map[string]string{
	"github.com/apapsch/go-jsonmerge/v2": "",                        // the generated client's unions
	"github.com/google/uuid":             "",                        // the generated models
	"github.com/mattn/go-isatty":         "",                        // terminal tests
	"github.com/mattn/go-runewidth":      "./third_party/runewidth", // table widths
	"github.com/oapi-codegen/runtime":    "",                        // the generated client
	"github.com/rivo/uniseg":             "",                        // go-runewidth
	"github.com/spf13/cobra":             "",
	"github.com/spf13/pflag":             "",
	"golang.org/x/sys":                   "", // go-isatty
}

// The client links the modules in clientModules and no other, and the
// patched copies in place of upstream's: a new dependency of a command,
// or a dropped replace, shows here before it shows in pier's start.
func TestClientModules(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f",
		`{{with .Module}}{{.Path}} {{with .Replace}}{{.Path}}{{end}}{{end}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		mod, replace, _ := strings.Cut(line, " ")
		if mod == "" || mod == "github.com/pierhq/pier" || seen[mod] {
			continue
		}
		seen[mod] = true
		want, ok := clientModules[mod]
		switch {
		case !ok:
			t.Errorf("cmd/pier links %s, which is not in clientModules: measure what it costs at start (bench/README.md, \"CLI start\") before adding it, or keep it out of the client", mod)
		case replace != want:
			t.Errorf("cmd/pier links %s from %q, want %q", mod, replace, want)
		}
	}
	for mod := range clientModules {
		if !seen[mod] {
			t.Errorf("clientModules lists %s, which cmd/pier no longer links: drop it", mod)
		}
	}
}

// The client lists the commands it hands over as the full binary does: the
// same names, groups, use lines and short help, and `pier capabilities`
// gives the same answer from both.
func TestHandedOverMatchFull(t *testing.T) {
	run := func(args []string, client bool) string {
		var out, errOut bytes.Buffer
		f := cmdutil.NewFactory(&cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		f.Getenv = func(string) string { return "" }
		code := 0
		if client {
			code = clientpkg.Run(f, args, func() *cobra.Command { return clientpkg.NewRootCmd(f) }, cli.HandedOver()...)
		} else {
			code = cli.Run(f, args, server.NewCommands()...)
		}
		if code != 0 {
			t.Fatalf("pier %s: exit %d\n%s", strings.Join(args, " "), code, errOut.String())
		}
		return out.String()
	}
	for _, args := range [][]string{{"--help"}, {"sandbox", "--help"}, {"workflows", "--help"}, {"workflow", "--help"}, {"help"}, {"capabilities", "--json"}, {"capabilities"}} {
		full, client := run(args, false), run(args, true)
		if full != client {
			t.Errorf("pier %s differs between pier-server and pier:\n--- pier-server\n%s\n--- pier\n%s", strings.Join(args, " "), full, client)
		}
	}
	// Every command the full tree has that the client does not is handed
	// over, so the list in cmdutil cannot miss a new one.
	f := cmdutil.NewFactory(&cmdutil.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
	clientRoot, fullRoot := clientpkg.NewRootCmd(f), cli.NewRootCmd(f)
	for _, c := range server.NewCommands() {
		fullRoot.AddCommand(c)
	}
	stubs := map[string]bool{}
	for _, c := range cli.HandedOver() {
		stubs[c.Name()] = c.Runnable()
		for _, sub := range c.Commands() {
			stubs[c.Name()+" "+sub.Name()] = true
		}
	}
	for _, path := range commandPaths(fullRoot, "") {
		words := strings.Fields(path)
		if stubs[path] || stubs[words[0]] {
			continue
		}
		if c, _, err := clientRoot.Find(words); err == nil && c.CommandPath() == "pier "+path {
			continue
		}
		t.Errorf("pier-server has `pier %s`, which the client neither has nor hands over; add it to cmdutil's handedOver", path)
	}
}

// commandPaths lists every command below c, as words after the root.
func commandPaths(c *cobra.Command, prefix string) []string {
	var out []string
	for _, sub := range c.Commands() {
		if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
			continue
		}
		path := strings.TrimSpace(prefix + " " + sub.Name())
		out = append(out, path)
		out = append(out, commandPaths(sub, path)...)
	}
	return out
}

// TestClientHandsOverToTheServer builds both binaries and runs the
// server's commands through the client.
func TestClientHandsOverToTheServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both binaries")
	}
	dir := t.TempDir()
	for _, b := range []string{"pier", "pier-server"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, b), "github.com/pierhq/pier/cmd/"+b).CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/%s: %v\n%s", b, err, out)
		}
	}

	// `pier server --help` shows the real server's help: the client
	// finds pier-server beside itself and execs it.
	t.Run("help", func(t *testing.T) {
		cmd := exec.Command(filepath.Join(dir, "pier"), "server", "--help")
		cmd.Env = append(os.Environ(), "PIER_SERVER_BIN=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pier server --help: %v\n%s", err, out)
		}
		for _, want := range []string{"Run the Pier server: the REST API", "--http-addr", "pier server --database-url"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("pier server --help has no %q:\n%s", want, out)
			}
		}
	})

	// `pier help admin create-key` is the subcommand's own help, as
	// `pier admin create-key --help` is.
	t.Run("help of a subcommand", func(t *testing.T) {
		cmd := exec.Command(filepath.Join(dir, "pier"), "help", "admin", "create-key")
		cmd.Env = append(os.Environ(), "PIER_SERVER_BIN=")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "pier admin create-key [flags]") {
			t.Errorf("pier help admin create-key: %v\n%s", err, out)
		}
	})

	// Shell completion of a server command's flags comes from the server.
	t.Run("completion", func(t *testing.T) {
		cmd := exec.Command(filepath.Join(dir, "pier"), "__complete", "server", "--http")
		cmd.Env = append(os.Environ(), "PIER_SERVER_BIN=")
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), "--http-addr\t") {
			t.Errorf("pier __complete server --http: %v\n%s", err, out)
		}
	})

	// The commands the client leaves to pier-server for their packages'
	// sake run there as if the client had them: holder keygen writes its
	// key, and the workflow alias reaches workflows prepare's own help.
	t.Run("holder and workflows", func(t *testing.T) { runHandedOverCommands(t, dir) })

	// The server binary gets the arguments and environment as given, and
	// its exit code is the command's: a fake one shows it.
	t.Run("arguments, environment and exit code", func(t *testing.T) {
		fake := filepath.Join(t.TempDir(), "fake-server")
		script := "#!/bin/sh\necho \"args: $*\"\necho \"env: $PIER_SPLIT_TEST\"\nexit 7\n"
		if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(filepath.Join(dir, "pier"), "--json", "admin", "create-key", "--name", "a b", "--scopes=read")
		cmd.Env = append(os.Environ(), "PIER_SERVER_BIN="+fake, "PIER_SPLIT_TEST=kept")
		out, err := cmd.Output()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 7 {
			t.Fatalf("exit: %v, want 7\n%s", err, out)
		}
		want := "args: admin --json create-key --name a b --scopes=read\nenv: kept\n"
		if string(out) != want {
			t.Errorf("the server got\n%s\nwant\n%s", out, want)
		}
	})
}

// PIER_SERVER_BIN naming the client itself is refused after one hand-over
// instead of handing over forever.
func TestClientRefusesToHandOverToItself(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the client")
	}
	bin := filepath.Join(t.TempDir(), "pier")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/pierhq/pier/cmd/pier").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/pier: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "server")
	cmd.Env = append(os.Environ(), "PIER_SERVER_BIN="+bin)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("pier server with PIER_SERVER_BIN naming the client did not stop")
	}
	if err == nil || !strings.Contains(string(out), "is the client (pier), not pier-server") {
		t.Fatalf("pier server: %v\n%s", err, out)
	}
}

// Inside the source tree with no pier-server installed, the client builds
// it into the user's cache directory and runs it: no go process stays in
// between, and the next start reuses the binary.
func TestClientBuildsTheServerFromSource(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both binaries")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on the PATH")
	}
	lone := filepath.Join(t.TempDir(), "pier")
	if out, err := exec.Command("go", "build", "-o", lone, "github.com/pierhq/pier/cmd/pier").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/pier: %v\n%s", err, out)
	}
	cache := t.TempDir()
	for i := 0; i < 2; i++ {
		cmd := exec.Command(lone, "server", "--help")
		cmd.Dir = "." // in the module, as `go run ./cmd/pier server` is
		cmd.Env = append(os.Environ(), "PIER_SERVER_BIN=", "XDG_CACHE_HOME="+cache, "PATH="+filepath.Dir(goBin))
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Run the Pier server: the REST API") {
			t.Fatalf("start %d: pier server --help: %v\n%s", i+1, err, out)
		}
		if building := strings.Contains(string(out), "building pier-server from the source tree"); building != (i == 0) {
			t.Errorf("start %d says it builds: %v\n%s", i+1, building, out)
		}
	}
	bins, _ := filepath.Glob(filepath.Join(cache, "pier", "source-build", "*", "pier-server"))
	if len(bins) != 1 {
		t.Fatalf("binaries in the cache: %q", bins)
	}
}

// runHandedOverCommands runs holder keygen and the workflow alias's
// prepare --help through the client built in dir.
func runHandedOverCommands(t *testing.T, dir string) {
	key := filepath.Join(t.TempDir(), "holder.jwk")
	cmd := exec.Command(filepath.Join(dir, "pier"), "holder", "keygen", "--key", key, "--json")
	cmd.Env = append(os.Environ(), "PIER_SERVER_BIN=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pier holder keygen: %v\n%s", err, out)
	}
	if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the holder key: %v, %v; want a file of mode 0600", st, err)
	}
	cmd = exec.Command(filepath.Join(dir, "pier"), "workflow", "prepare", "--help")
	cmd.Env = append(os.Environ(), "PIER_SERVER_BIN=")
	out, err = cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "print the plan a human should read") {
		t.Errorf("pier workflow prepare --help: %v\n%s", err, out)
	}
}
