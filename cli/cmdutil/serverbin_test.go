package cmdutil

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// fakeServer writes a tiny script named pier-server into dir.
func fakeServer(t *testing.T, dir string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("shell scripts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, ServerBinaryName)
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"$0 $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// lookupIn is the lookup of a client at self, in the working directory wd,
// with the environment env (PATH included) and go at goBin when set.
func lookupIn(self, wd string, env map[string]string, goBin string) serverLookup {
	return serverLookup{
		getenv:     func(k string) string { return env[k] },
		executable: func() (string, error) { return self, nil },
		lookPath: func(name string) (string, error) {
			if name == "go" {
				if goBin == "" {
					return "", exec.ErrNotFound
				}
				return goBin, nil
			}
			for _, dir := range filepath.SplitList(env["PATH"]) {
				if p := filepath.Join(dir, name); isExecutable(p) {
					return p, nil
				}
			}
			return "", exec.ErrNotFound
		},
		getwd: func() (string, error) { return wd, nil },
	}
}

func writeGoMod(t *testing.T, dir, module string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("// a comment\nmodule "+module+"\n\ngo 1.24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFindServerOrder(t *testing.T) {
	tmp := t.TempDir()
	explicit := fakeServer(t, filepath.Join(tmp, "explicit"))
	sibling := fakeServer(t, filepath.Join(tmp, "bin"))
	self := filepath.Join(tmp, "bin", "pier")
	onPath := fakeServer(t, filepath.Join(tmp, "path"))
	src := filepath.Join(tmp, "src")
	writeGoMod(t, src, modulePath)
	wd := filepath.Join(src, "examples", "site")
	if err := os.MkdirAll(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(tmp, "elsewhere")
	goBin := "/usr/local/go/bin/go"
	fromSource := []string{goBin, "run", "github.com/pierhq/pier/cmd/pier-server"}

	for _, tc := range []struct {
		name string
		l    serverLookup
		want []string
	}{
		{"PIER_SERVER_BIN comes first", lookupIn(self, wd, map[string]string{ServerBinEnv: explicit, "PATH": filepath.Dir(onPath)}, goBin), []string{explicit}},
		{"then the binary beside the client", lookupIn(self, wd, map[string]string{"PATH": filepath.Dir(onPath)}, goBin), []string{sibling}},
		{"then the PATH", lookupIn(filepath.Join(tmp, "lone", "pier"), wd, map[string]string{"PATH": filepath.Dir(onPath)}, goBin), []string{onPath}},
		{"then the source tree", lookupIn(filepath.Join(tmp, "lone", "pier"), wd, map[string]string{"PATH": elsewhere}, goBin), fromSource},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := findServer(tc.l)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("findServer = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// The sibling is looked for beside the client's real file, so a symlink
// to bin/pier (in ~/.local/bin, say) still finds bin/pier-server.
func TestFindServerBesideTheSymlinkedClient(t *testing.T) {
	tmp := t.TempDir()
	sibling := fakeServer(t, filepath.Join(tmp, "bin"))
	real := filepath.Join(tmp, "bin", "pier")
	if err := os.WriteFile(real, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "links", "pier")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	got, err := findServer(lookupIn(link, tmp, nil, ""))
	if err != nil || !slices.Equal(got, []string{sibling}) {
		t.Errorf("findServer = %q, %v; want %q", got, err, sibling)
	}
}

func TestFindServerNone(t *testing.T) {
	tmp := t.TempDir()
	self := filepath.Join(tmp, "bin", "pier")
	// A pier-server that is not executable is not the server.
	if err := os.MkdirAll(filepath.Dir(self), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "bin", ServerBinaryName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(tmp, "other")
	writeGoMod(t, other, "example.com/other")
	// Inside another module nested in Pier's tree, go run would not find
	// Pier's packages either.
	nested := filepath.Join(tmp, "pier", "third_party", "lib")
	writeGoMod(t, filepath.Join(tmp, "pier"), modulePath)
	writeGoMod(t, nested, "example.com/lib")

	for name, l := range map[string]serverLookup{
		"outside any module":         lookupIn(self, tmp, map[string]string{"PATH": tmp}, "/usr/bin/go"),
		"in another module":          lookupIn(self, other, map[string]string{"PATH": tmp}, "/usr/bin/go"),
		"in a module nested in Pier": lookupIn(self, nested, map[string]string{"PATH": tmp}, "/usr/bin/go"),
		"in Pier's tree without go":  lookupIn(self, filepath.Join(tmp, "pier"), map[string]string{"PATH": tmp}, ""),
	} {
		if got, err := findServer(l); !errors.Is(err, errNoServer) {
			t.Errorf("%s: findServer = %q, %v; want errNoServer", name, got, err)
		}
	}
}

// Every command the client hands over takes its arguments unparsed and
// passes them on after its own path; one that joins a group replaces the
// generated command of its name there.
func TestHandedOverPassArguments(t *testing.T) {
	root := NewRootCommand(NewFactory(SystemIOStreams()))
	workflows := &cobra.Command{Use: "workflows", Short: "Prepared operation graphs"}
	workflows.AddCommand(&cobra.Command{Use: "prepare", Short: "the generated one"}, &cobra.Command{Use: "apply <id>"})
	root.AddCommand(&cobra.Command{Use: "sandbox", Short: "The sandbox's operations"}, workflows)
	addExtra(root, HandedOver())
	if n := len(workflows.Commands()); n != 3 {
		t.Errorf("workflows has %d commands, want apply, prepare and verify", n)
	}
	for _, tc := range []struct{ args, want []string }{
		{[]string{"server", "--http-addr", "127.0.0.1:0", "--help"}, []string{"server", "--http-addr", "127.0.0.1:0", "--help"}},
		{[]string{"admin", "create-key", "--json"}, []string{"admin", "create-key", "--json"}},
		{[]string{"sandbox", "publish-reference", "--replace"}, []string{"sandbox", "publish-reference", "--replace"}},
		{[]string{"ca"}, []string{"ca"}},
		{[]string{"holder", "mandate", "--session", "s", "--json"}, []string{"holder", "mandate", "--session", "s", "--json"}},
		{[]string{"conformance", "verify", "r.json", "--keys", "k"}, []string{"conformance", "verify", "r.json", "--keys", "k"}},
		{[]string{"workflows", "prepare", "plan.yaml", "--project", "p"}, []string{"workflows", "prepare", "plan.yaml", "--project", "p"}},
		{[]string{"workflows", "verify", "--help"}, []string{"workflows", "verify", "--help"}},
	} {
		cmd, args, err := root.Find(tc.args)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if !cmd.DisableFlagParsing {
			t.Errorf("%q: %s parses flags", tc.args, cmd.CommandPath())
		}
		if got := serverArgs(cmd, args); !slices.Equal(got, tc.want) {
			t.Errorf("%q: server args %q, want %q", tc.args, got, tc.want)
		}
	}
}

// A first build from source says what it does as it goes: go build -v's
// package lines are summed up every interval, and a compile error is
// passed on as it is.
func TestShowBuildProgress(t *testing.T) {
	in := strings.NewReader("runtime\nerrors\ngithub.com/pierhq/pier/cli\n# github.com/pierhq/pier/server\nserver/x.go:1:1: undefined: y\n")
	var out strings.Builder
	showBuildProgress(&out, in, time.Now().Add(-time.Minute), 0)
	got := out.String()
	for _, want := range []string{"pier: … 1 packages compiled", "pier: … 3 packages compiled in 1m0s (now github.com/pierhq/pier/cli)", "# github.com/pierhq/pier/server\n", "server/x.go:1:1: undefined: y\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\nruntime\n") {
		t.Errorf("a package line passed on as it is:\n%s", got)
	}
}
