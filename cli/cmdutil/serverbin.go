package cmdutil

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
)

// ServerBinaryName is the name of the full binary, the CLI with the
// server's commands, that the client's server commands hand over to.
const ServerBinaryName = "pier-server"

// ServerBinEnv names the server binary explicitly, before any lookup.
const ServerBinEnv = "PIER_SERVER_BIN"

// modulePath is the module whose source tree can run the server with
// source (go build, then exec) when no server binary is installed.
const modulePath = "github.com/pierhq/pier"

// The commands the client hands over to pier-server, as the client shows
// them: the same names, groups, use lines, short help and operations as the
// full tree, which cmd/pier's tests hold them to. They are the server's
// (server.NewCommands) and three whose packages would make every start of
// the client dearer (cli/client): holder and conformance (JWS, JSON
// canonicalisation, the JSON Schema validator and x/text) and workflows
// prepare|verify (YAML). Flags, long help and the work itself are
// pier-server's.
// example is the command's example that its group's help borrows
// (GroupExamples), for a command in a group.
var handedOver = []struct {
	path, args, short, group, operation, example string
}{
	{path: "server", short: "Run the Pier server with embedded defaults"},
	{path: "admin", short: "Local operator commands that act on the data directory directly"},
	{path: "ca", short: "Print the local certificate authority's root certificate"},
	{path: "sandbox publish-reference", short: "Mint and publish the sandbox reference release", example: "pier sandbox publish-reference"},
	{path: "holder", args: "<command>", short: "Act as the sandbox holder: a P-256 key, the mandate and gate decisions", group: GroupTrust},
	{path: "conformance", short: "Run the public conformance probes and verify their signed reports", group: GroupTrust},
	{path: "workflows prepare", args: "<plan.yaml>", short: "Prepare a workflow from a YAML or JSON file and show its plan", operation: "prepare_workflow",
		example: "pier workflow prepare plan.yaml --project prj_123 --json > prepared.json"},
	{path: "workflows verify", args: "<prepared.json>", short: "Check a prepared workflow against its signed plan and the published keys",
		example: "pier workflow verify prepared.json --jwks jwks.json"},
}

// HandedOver returns, for a binary without them (cmd/pier), the commands
// pier-server runs: each a stub that hands its arguments, unparsed, to
// pier-server, which replaces the process (see findServer). Pass them to
// the client's Run in place of the commands themselves. A stub of two
// words joins its group in the root (`pier sandbox publish-reference`,
// `pier workflows prepare`), replacing the generated command of its name.
func HandedOver() []*cobra.Command {
	var cmds []*cobra.Command
	parents := map[string]*cobra.Command{}
	for _, sc := range handedOver {
		words := strings.Fields(sc.path)
		stub := newStub(words[len(words)-1], sc.args, sc.short, sc.operation)
		if sc.example != "" {
			stub.Example = "  " + sc.example
		}
		if len(words) == 1 {
			stub.GroupID = sc.group
			cmds = append(cmds, stub)
			continue
		}
		parent := parents[words[0]]
		if parent == nil {
			parent = &cobra.Command{Use: words[0]}
			parents[words[0]] = parent
			cmds = append(cmds, parent)
		}
		parent.AddCommand(stub)
	}
	return cmds
}

// newStub is one handed-over command: name and its use line's arguments,
// short help, and the contract operation it runs, if any.
func newStub(name, args, short, operation string) *cobra.Command {
	stub := &cobra.Command{
		Annotations:        map[string]string{serverAnnotation: "true"},
		Use:                strings.TrimSpace(name + " " + args),
		Short:              short,
		Long:               short + ".\n\n" + stubHelp,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return execServer(serverArgs(cmd, args), true)
		},
	}
	if operation != "" {
		stub.Annotations[OperationAnnotation] = operation
	}
	stub.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		if err := execServer(serverArgs(cmd, []string{"--help"}), true); err != nil {
			cmd.Root().HelpFunc()(cmd, nil)
			fmt.Fprintf(cmd.ErrOrStderr(), "\n%v\n", err)
		}
	})
	return stub
}

// serverAnnotation marks the commands HandedOver returns.
const serverAnnotation = "pier:server"

// completeInServer hands a shell completion request (`pier __complete
// server --ht`) for a server command to the server binary, which knows the
// command's flags; it returns only when the request is not for a server
// command, or the binary cannot be started.
func completeInServer(root *cobra.Command, args []string) {
	if len(args) < 2 || args[0] != cobra.ShellCompRequestCmd && args[0] != cobra.ShellCompNoDescRequestCmd {
		return
	}
	if cmd, _, err := root.Find(args[1:]); err != nil || cmd.Annotations[serverAnnotation] == "" {
		return
	}
	// Not from source: a first build compiles for a while, too long for a
	// tab key. Without the binary, cobra completes what it can.
	_ = execServer(args, false)
}

// helpInServer hands `pier help <server command> [subcommand…]` to the
// server binary as `<server command> [subcommand…] --help`, since cobra's
// help command drops the words after a command without subcommands of its
// own (the stubs have none). It returns only when args are not such a
// request, or the binary cannot be started; cobra then shows the stub's
// help, which says where the binary is looked for.
func helpInServer(root *cobra.Command, args []string) {
	if len(args) < 2 || args[0] != "help" {
		return
	}
	cmd, rest, err := root.Find(args[1:])
	if err != nil || cmd.Annotations[serverAnnotation] == "" || len(rest) == 0 {
		return
	}
	_ = execServer(append(serverArgs(cmd, rest), "--help"), true)
}

// stubHelp is the long help of the server's commands in the client, shown
// only when the server binary, whose help it is, cannot be found.
const stubHelp = `This command is in ` + ServerBinaryName + `, the full binary (the CLI with the
server's commands), which this binary hands it over to, and whose help
lists its flags. ` + ServerBinaryName + ` is found as $` + ServerBinEnv + `, else beside
this binary, else on the PATH, else, inside Pier's source tree, built from
source with go build.`

// serverArgs is the server binary's command line for cmd run with args:
// the command's path below the root, then the arguments as given.
func serverArgs(cmd *cobra.Command, args []string) []string {
	path := strings.Fields(cmd.CommandPath())[1:]
	return append(path, args...)
}

// execServer replaces the process with the server binary running args,
// or with a build of its source when fromSource allows. It returns only
// when the binary cannot be found or started.
func execServer(args []string, fromSource bool) error {
	// The server binary runs these commands itself; reaching a stub again
	// means what was started is a client (PIER_SERVER_BIN naming pier, or a
	// client installed as pier-server), which would hand over forever.
	if os.Getenv(handoverEnv) != "" {
		return errors.New("the server's commands were handed to a binary without them: " + ServerBinEnv + ", or the " + ServerBinaryName + " found beside this binary or on the PATH, is the client (pier), not " + ServerBinaryName + "; build it with `go build -o bin/pier-server ./cmd/pier-server`")
	}
	l := serverLookup{
		getenv:     os.Getenv,
		executable: os.Executable,
		lookPath:   exec.LookPath,
		getwd:      os.Getwd,
	}
	if !fromSource {
		l.getwd = func() (string, error) { return "", errNoServer }
	}
	argv, err := findServer(l)
	if err != nil {
		return err
	}
	if len(argv) == 3 && argv[1] == "run" {
		// From source: build the binary and exec it, rather than exec go
		// run, which would stay between the terminal and the server (a
		// second process, and its own "exit status" line on Ctrl-C).
		bin, err := buildFromSource(argv[0], argv[2])
		if err != nil {
			return err
		}
		argv = []string{bin}
	}
	argv = append(argv, args...)
	return execReplace(argv[0], argv, append(os.Environ(), handoverEnv+"=1"))
}

// buildFromSource builds pkg with the go command into the user's cache
// directory, one binary per source tree, and returns its path. go build
// reuses its build cache, so an unchanged tree takes a fraction of a
// second; the first build of a fresh clone takes longer, and says so.
func buildFromSource(goBin, pkg string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root, _ := moduleRoot(wd)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256([]byte(root))
	out := filepath.Join(cache, "pier", "source-build", hex.EncodeToString(sum[:6]), ServerBinaryName)
	first := !isExecutable(out)
	if first {
		fmt.Fprintf(os.Stderr, "pier: building %s from the source tree at %s; the first build compiles every package (minutes on a slow machine), and later ones reuse Go's build cache\n", ServerBinaryName, root)
	}
	// -v names each package as it is compiled: nothing when the cache is
	// warm, and progress to show when it is not.
	build := exec.Command(goBin, "build", "-v", "-o", out, pkg)
	build.Stdout = os.Stderr
	stderr, err := build.StderrPipe()
	if err != nil {
		return "", err
	}
	start := time.Now()
	if err := build.Start(); err != nil {
		return "", fmt.Errorf("building %s from source with %s build: %w", ServerBinaryName, goBin, err)
	}
	showBuildProgress(os.Stderr, stderr, start, 5*time.Second)
	if err := build.Wait(); err != nil {
		return "", fmt.Errorf("building %s from source with %s build: %w", ServerBinaryName, goBin, err)
	}
	if n := time.Since(start); first || n > 5*time.Second {
		fmt.Fprintf(os.Stderr, "pier: built %s in %s\n", ServerBinaryName, n.Round(time.Second))
	}
	return out, nil
}

// showBuildProgress reads go build -v's output: package paths, one a line,
// are counted and summed up on w at most once an interval (the last one
// named); every other line (a compile error) is passed on as it is.
func showBuildProgress(w io.Writer, r io.Reader, start time.Time, every time.Duration) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	n, last := 0, start
	for s.Scan() {
		line := s.Text()
		if !importPathRE().MatchString(line) {
			fmt.Fprintln(w, line)
			continue
		}
		n++
		if now := time.Now(); now.Sub(last) >= every {
			last = now
			fmt.Fprintf(w, "pier: … %d packages compiled in %s (now %s)\n", n, now.Sub(start).Round(time.Second), line)
		}
	}
}

// importPathRE matches a line of go build -v: one import path.
var importPathRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9_.~+-]+(/[A-Za-z0-9_.~+-]+)*$`)
})

// handoverEnv marks a process a client's stub started.
const handoverEnv = "PIER_SERVER_HANDOVER"

// serverLookup is what findServer looks at: the process's by default,
// fakes in tests.
type serverLookup struct {
	getenv     func(string) string
	executable func() (string, error)
	lookPath   func(string) (string, error)
	getwd      func() (string, error)
}

// errNoServer is findServer's answer when no server binary is found.
var errNoServer = errors.New("the server's commands are in " + ServerBinaryName + ", which was not found: build it with `make build` (bin/pier-server beside bin/pier) or `go build -o bin/pier-server ./cmd/pier-server`, put it on the PATH, or set " + ServerBinEnv + " to its path")

// findServer returns the command line that starts the server binary,
// without the command's arguments, looking in this order:
//
//  1. $PIER_SERVER_BIN;
//  2. pier-server in the directory of this executable (symlinks
//     resolved), as `make build` leaves bin/pier and bin/pier-server;
//  3. pier-server on the PATH;
//  4. inside Pier's source tree (the nearest go.mod above the working
//     directory declares github.com/pierhq/pier) with go on the PATH:
//     `go run github.com/pierhq/pier/cmd/pier-server`, so that
//     `go run ./cmd/pier server` works from a fresh clone. The working
//     directory stays as it is. execServer carries this out as go build
//     into the user's cache directory and exec of the result
//     (buildFromSource), so that no go process stays in between.
func findServer(l serverLookup) ([]string, error) {
	if bin := l.getenv(ServerBinEnv); bin != "" {
		return []string{bin}, nil
	}
	if self, err := l.executable(); err == nil {
		if resolved, err := filepath.EvalSymlinks(self); err == nil {
			self = resolved
		}
		if bin := filepath.Join(filepath.Dir(self), ServerBinaryName); isExecutable(bin) {
			return []string{bin}, nil
		}
	}
	if bin, err := l.lookPath(ServerBinaryName); err == nil {
		return []string{bin}, nil
	}
	if wd, err := l.getwd(); err == nil && inModule(wd) {
		if goBin, err := l.lookPath("go"); err == nil {
			return []string{goBin, "run", modulePath + "/cmd/" + ServerBinaryName}, nil
		}
	}
	return nil, errNoServer
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// inModule reports whether the nearest go.mod at or above dir declares
// Pier's module.
func inModule(dir string) bool {
	_, ok := moduleRoot(dir)
	return ok
}

// moduleRoot returns the directory of the nearest go.mod at or above dir,
// and whether it declares Pier's module.
func moduleRoot(dir string) (string, bool) {
	for {
		f, err := os.Open(filepath.Join(dir, "go.mod"))
		if err == nil {
			defer f.Close()
			s := bufio.NewScanner(f)
			for s.Scan() {
				if fields := strings.Fields(s.Text()); len(fields) >= 2 && fields[0] == "module" {
					return dir, strings.Trim(fields[1], `"`) == modulePath
				}
			}
			return dir, false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}
