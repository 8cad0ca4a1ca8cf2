package main

import (
	"go/types"
	"reflect"
	"runtime"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli"
	"github.com/pierhq/pier/cli/cmd/capabilities"
	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/sdk"
)

// calledBy maps an operation id to the commands that call it: the
// generated command first, then the hand-written ones (pier launch…) that
// reach its SDK method.
type calledBy map[string][]string

func (c calledBy) cell(id string) string {
	if len(c[id]) == 0 {
		return "none: agents call it through the SDK or MCP"
	}
	return strings.Join(c[id], ", ")
}

// commands walks the CLI's tree. A generated command carries its
// operation's id; a hand-written one is traced from the function that
// builds its run function to the SDK methods it calls.
func commands(g *graph) calledBy {
	root := cli.NewRootCmd(&cmdutil.Factory{IO: &cmdutil.IOStreams{}})
	out := calledBy{}
	for _, c := range capabilities.Capabilities(root) {
		if c.Command != "" {
			out[c.Operation] = []string{"`" + c.Command + "`"}
		}
	}
	var handWritten [][2]string // command path, builder
	walkCommands(root, func(c *cobra.Command) {
		if c.Annotations["operation"] != "" || c.RunE == nil {
			return
		}
		handWritten = append(handWritten, [2]string{c.CommandPath(), builderOf(c.RunE)})
	})
	ops := map[string]string{}
	for _, op := range sdk.Operations {
		ops[goName(op.ID)] = op.ID
	}
	for _, hw := range handWritten {
		fn := g.lookup(hw[1])
		if fn == nil {
			continue
		}
		called := g.reach(fn, 8, func(f *types.Func) bool { return strings.HasPrefix(pkgOf(f), mod+"/cli") && !buildsCommand(f) },
			func(f *types.Func) bool {
				return pkgOf(f) == mod+"/sdk" && recvName(f) == "Client" && ops[f.Name()] != ""
			})
		for _, f := range called {
			id := ops[f.Name()]
			cmd := "`" + hw[0] + "` (hand-written)"
			if !slices.Contains(out[id], cmd) {
				out[id] = append(out[id], cmd)
			}
		}
	}
	return out
}

func walkCommands(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		walkCommands(sub, fn)
	}
}

// builderOf names the top-level function or method whose body holds run:
// "github.com/pierhq/pier/cli/cmd/launch.NewCmdLaunch" for a closure in NewCmdLaunch.
func builderOf(run func(*cobra.Command, []string) error) string {
	name := runtime.FuncForPC(reflect.ValueOf(run).Pointer()).Name()
	name = strings.TrimSuffix(name, "-fm")
	slash := strings.LastIndex(name, "/")
	parts := strings.Split(name[slash+1:], ".")
	// pkg.Func[.funcN…] or pkg.(*T).Method[.funcN…]
	keep := 2
	if len(parts) > 2 && strings.HasPrefix(parts[1], "(") {
		keep = 3
	}
	return name[:slash+1] + strings.Join(parts[:min(keep, len(parts))], ".")
}

// lookup finds a function by builderOf's name among the loaded ones.
func (g *graph) lookup(name string) *types.Func {
	for fn := range g.decls {
		full := pkgOf(fn) + "." + fn.Name()
		if r := recvName(fn); r != "" {
			full = pkgOf(fn) + ".(*" + r + ")." + fn.Name()
			if fn.Signature().Recv() != nil {
				if _, ptr := fn.Signature().Recv().Type().(*types.Pointer); !ptr {
					full = pkgOf(fn) + "." + r + "." + fn.Name()
				}
			}
		}
		if full == name {
			return fn
		}
	}
	return nil
}

// buildsCommand reports whether f returns a command: the walk from one
// command's run function must not wander into another command's builder
// (pier capabilities builds the whole tree to list it).
func buildsCommand(f *types.Func) bool {
	res := f.Signature().Results()
	for i := range res.Len() {
		if strings.HasSuffix(res.At(i).Type().String(), "cobra.Command") {
			return true
		}
	}
	return false
}
