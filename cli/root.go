// Package cli assembles pier's command tree and runs it. The commands
// live in packages by noun, as gh lays them out:
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
//   - cli/internal/clitest: helpers the packages' tests share.
//
// Packages import down only: cli imports the command packages, they
// import cmdutil, and none imports another command package or cli.
package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli/cmd/capabilities"
	conformancecmd "github.com/pierhq/pier/cli/cmd/conformance"
	"github.com/pierhq/pier/cli/cmd/help"
	holdercmd "github.com/pierhq/pier/cli/cmd/holder"
	"github.com/pierhq/pier/cli/cmd/launch"
	ledgercmd "github.com/pierhq/pier/cli/cmd/ledger"
	"github.com/pierhq/pier/cli/cmd/mail"
	"github.com/pierhq/pier/cli/cmd/operations"
	"github.com/pierhq/pier/cli/cmd/services"
	"github.com/pierhq/pier/cli/cmd/verify"
	"github.com/pierhq/pier/cli/cmd/workflow"
	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/sdk"
)

const rootLong = `Pier hosts and launches services for agents: search domains, estimate
costs, quote, upload bundles and launch, with every answer a typed envelope
whose actions name the next step.

Every command maps to one API operation. Without --json the answer is a
short summary; with --json it is the envelope exactly as the server sent it.
The exit code says what blocked a failure: pier help exit-codes lists them.

Configuration:
  PIER_BASE_URL   API address (or --base-url); default ` + cmdutil.DefaultBaseURL + `
  PIER_API_KEY    API key (or --api-key)
  NO_COLOR        turn colour off (so do CLICOLOR=0 and TERM=dumb)
  CLICOLOR_FORCE  colour even when the output is not a terminal`

const rootExample = `  pier domains search acme
  pier domains search acme --max-first-year-price-usd 15 --json
  pier estimate --workload static_site
  pier quotes create --project prj_123 --items '[{"kind":"domain","domain":"acme.dev"}]'
  pier projects launch prj_123 --name web --target edge --data @launch.json
  pier tasks get tsk_123 --json`

// NewRootCmd builds the whole command tree over f.
func NewRootCmd(f *cmdutil.Factory) *cobra.Command { return newRootCmd(f, nil) }

// newRootCmd builds the tree; a non-nil runF replaces every operation's
// API call (tests).
func newRootCmd(f *cmdutil.Factory, runF func(*cmdutil.OperationOptions) error) *cobra.Command {
	root := cmdutil.NewRootCommand(f)
	root.Long, root.Example = rootLong, rootExample

	root.AddGroup(&cobra.Group{ID: cmdutil.GroupTrust, Title: "Holder and auditor:"})
	holderCmd, verifyCmd, conformanceCmd := holdercmd.NewCmdHolder(f), verify.NewCmdVerifySandboxProof(f, nil), conformancecmd.NewCmdConformance(f)
	holderCmd.GroupID, verifyCmd.GroupID, conformanceCmd.GroupID = cmdutil.GroupTrust, cmdutil.GroupTrust, cmdutil.GroupTrust

	root.AddCommand(newCmdVersion(f), holderCmd, verifyCmd, conformanceCmd, capabilities.NewCmdCapabilities(f, nil))
	operations.AddCommands(root, f, runF)
	ledgercmd.AddCommands(root, f)
	launch.AddCommands(root, f)
	services.AddCommands(root, f)
	workflow.AddCommands(root, f)
	mail.AddCommands(root, f)
	help.AddTopics(root)
	cmdutil.FinishTree(root)
	return root
}

func newCmdVersion(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the CLI version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Fprintf(f.IO.Out, "pier version %s\n", sdk.Version)
			return err
		},
	}
}

// Run runs pier with args on f's streams and environment, and returns the
// exit code, as Main does for the process. extra commands, such as `pier
// server`, are added to the root under "Running Pier".
func Run(f *cmdutil.Factory, args []string, extra ...*cobra.Command) int {
	return run(f, args, extra...)
}

// Main runs the CLI over the process's streams and returns the exit code.
func Main(extra ...*cobra.Command) int {
	return run(cmdutil.NewFactory(cmdutil.SystemIOStreams()), os.Args[1:], extra...)
}

func run(f *cmdutil.Factory, args []string, extra ...*cobra.Command) int {
	if versionOnly(args) {
		// Building the command tree (a few hundred commands and their
		// flags) is most of a start's own work, and `pier --version`
		// needs none of it: answered with cobra's bytes before it is built
		// (bench/README.md, "CLI start").
		if _, err := fmt.Fprintf(f.IO.Out, "pier version %s\n", sdk.Version); err != nil {
			return 1
		}
		return 0
	}
	return cmdutil.Execute(f, NewRootCmd(f), args, extra...)
}

// versionOnly: args ask for the version and nothing else, as cobra's
// --version flag (or its -v shorthand) does.
func versionOnly(args []string) bool {
	return len(args) == 1 && (args[0] == "--version" || args[0] == "-v")
}

// ServerCommands are the server's commands as stubs that hand over to
// pier-server (see cmdutil.ServerCommands); cmd/pier adds them to its
// root.
func ServerCommands() []*cobra.Command { return cmdutil.ServerCommands() }
