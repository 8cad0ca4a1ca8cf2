// Package clitest holds what the CLI packages' tests share: a Factory over
// buffers, a runner that parses a command's flags under a root with the
// global flags, envelopes and fake APIs whose answers are checked against
// the contract as they are served. Only tests import it.
package clitest

import (
	"bytes"
	"os"
	"testing"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli/cmd/operations"
	"github.com/pierhq/pier/cli/cmdutil"
)

// Streams are the buffers a test Factory reads and writes.
type Streams struct {
	In       *bytes.Buffer
	Out, Err *bytes.Buffer
}

// NewFactory returns a Factory over buffers and the given environment.
func NewFactory(env map[string]string) (*cmdutil.Factory, *Streams) {
	ts := &Streams{In: &bytes.Buffer{}, Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}
	f := cmdutil.NewFactory(&cmdutil.IOStreams{In: ts.In, Out: ts.Out, ErrOut: ts.Err})
	f.Getenv = func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		if k == "PIER_CACHE_DIR" {
			return "off" // tests that use the digest cache name their own
		}
		return ""
	}
	return f, ts
}

// RunWith parses args on cmd under a root with the global flags and the
// generated operation commands (which the next steps an answer prints are
// written as), and returns the exit code.
func RunWith(t *testing.T, f *cmdutil.Factory, cmd *cobra.Command, args ...string) int {
	t.Helper()
	root := cmdutil.NewRootCommand(f)
	operations.AddCommands(root, f, nil)
	for _, c := range root.Commands() {
		if c.Name() == cmd.Name() {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(cmd)
	cmdutil.FinishTree(root)
	return cmdutil.Execute(f, root, append([]string{cmd.Name()}, args...))
}

// Interrupt sends the test's own process SIGINT, as Ctrl-C does, for a
// fake API to call while a command waits on it: cmdutil.Execute catches
// the signal for as long as the command runs. It skips the test where a
// process cannot signal itself.
func Interrupt(t *testing.T) {
	p, err := os.FindProcess(os.Getpid())
	if err == nil {
		err = p.Signal(os.Interrupt)
	}
	if err != nil {
		t.Skipf("cannot send SIGINT: %v", err)
	}
}
