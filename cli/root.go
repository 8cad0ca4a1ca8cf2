// Package cli assembles pier's whole command tree and runs it: the tree
// of pier-server, the full binary, and of the tests. The commands live in
// packages by noun, as gh lays them out:
//
//   - cli/cmdutil: what every command shares: the Factory (streams,
//     configuration, API clients), the global flags and the bare root,
//     exit codes, envelope and error printing, the generic operation
//     command and task waiting, progress, and the hand-over to
//     pier-server;
//   - cli/cmd/operations: one command per contract operation, generated
//     from openapi/openapi.yaml by internal/tools/gen;
//   - cli/cmd/<noun>: the hand-written commands: launch (pier launch,
//     pier export, pier bundles upload), services (logs, rollback),
//     holder, conformance, verify (verify-sandbox-proof), ledger,
//     workflow, mail, capabilities and help (the help topics);
//   - cli/client: the tree of pier, the client binary: every command but
//     the server's and the three whose packages would slow its start
//     (holder, conformance, workflow), which it hands over to pier-server;
//   - cli/internal/clitest: helpers the packages' tests share.
//
// Packages import down only: cli imports client and the command packages,
// client imports the command packages, they import cmdutil, and none
// imports another command package, client or cli.
package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli/client"
	conformancecmd "github.com/pierhq/pier/cli/cmd/conformance"
	holdercmd "github.com/pierhq/pier/cli/cmd/holder"
	"github.com/pierhq/pier/cli/cmd/workflow"
	"github.com/pierhq/pier/cli/cmdutil"
)

// NewRootCmd builds the whole command tree over f.
func NewRootCmd(f *cmdutil.Factory) *cobra.Command { return newRootCmd(f, nil) }

// newRootCmd builds the tree; a non-nil runF replaces every operation's
// API call (tests).
func newRootCmd(f *cmdutil.Factory, runF func(*cmdutil.OperationOptions) error) *cobra.Command {
	root := client.Build(f, runF)
	holderCmd, conformanceCmd := holdercmd.NewCmdHolder(f), conformancecmd.NewCmdConformance(f)
	holderCmd.GroupID, conformanceCmd.GroupID = cmdutil.GroupTrust, cmdutil.GroupTrust
	root.AddCommand(holderCmd, conformanceCmd)
	workflow.AddCommands(root, f)
	cmdutil.FinishTree(root)
	return root
}

// Run runs pier with args on f's streams and environment, and returns the
// exit code, as Main does for the process. extra commands, such as `pier
// server`, are added to the root under "Running Pier".
func Run(f *cmdutil.Factory, args []string, extra ...*cobra.Command) int {
	return run(f, args, extra...)
}

// Main runs the whole tree over the process's streams and returns the exit
// code: pier-server's main, with the server's commands as extra.
func Main(extra ...*cobra.Command) int {
	return run(cmdutil.NewFactory(cmdutil.SystemIOStreams()), os.Args[1:], extra...)
}

func run(f *cmdutil.Factory, args []string, extra ...*cobra.Command) int {
	return client.Run(f, args, func() *cobra.Command { return NewRootCmd(f) }, extra...)
}

// HandedOver are the commands the client hands over to pier-server, as
// the client lists them (see cmdutil.HandedOver); cmd/pier adds them to
// its root.
func HandedOver() []*cobra.Command { return cmdutil.HandedOver() }
