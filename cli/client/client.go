// Package client assembles the command tree of pier, the client binary
// (cmd/pier): every command but the few it hands over to pier-server, the
// full binary. Those are the server's (pier server, admin, ca, sandbox
// publish-reference) and three whose packages alone would make every start
// of the client dearer: pier holder and pier conformance (JWS, JSON
// canonicalisation and the JSON Schema validator with x/text) and pier
// workflows prepare|verify (YAML). Go initialises every package a binary
// links before main runs, pier --version included (bench/README.md, "CLI
// start"); the client lists those commands as stubs that exec pier-server
// (cmdutil.HandedOver).
//
// Package cli assembles the full tree from this one and the commands the
// client hands over; pier-server and the tests run it.
package client

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli/cmd/capabilities"
	"github.com/pierhq/pier/cli/cmd/help"
	"github.com/pierhq/pier/cli/cmd/launch"
	ledgercmd "github.com/pierhq/pier/cli/cmd/ledger"
	"github.com/pierhq/pier/cli/cmd/mail"
	"github.com/pierhq/pier/cli/cmd/operations"
	"github.com/pierhq/pier/cli/cmd/services"
	"github.com/pierhq/pier/cli/cmd/verify"
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

// NewRootCmd builds the client's whole tree over f, the handed-over
// commands as stubs.
func NewRootCmd(f *cmdutil.Factory) *cobra.Command {
	root := Build(f, nil)
	cmdutil.FinishTree(root)
	return root
}

// Build builds the client's commands over f, without the handed-over ones
// and before cmdutil.FinishTree, for package cli to add the full binary's;
// a non-nil runF replaces every operation's API call (tests).
func Build(f *cmdutil.Factory, runF func(*cmdutil.OperationOptions) error) *cobra.Command {
	root := cmdutil.NewRootCommand(f)
	root.Long, root.Example = rootLong, rootExample

	root.AddGroup(&cobra.Group{ID: cmdutil.GroupTrust, Title: "Holder and auditor:"})
	verifyCmd := verify.NewCmdVerifySandboxProof(f, nil)
	verifyCmd.GroupID = cmdutil.GroupTrust

	root.AddCommand(newCmdVersion(f), verifyCmd, capabilities.NewCmdCapabilities(f, nil))
	operations.AddCommands(root, f, runF)
	if workflows := cmdutil.Subcommand(root, "workflows"); workflows != nil {
		workflows.Aliases = append(workflows.Aliases, "workflow")
	}
	ledgercmd.AddCommands(root, f)
	launch.AddCommands(root, f)
	services.AddCommands(root, f)
	mail.AddCommands(root, f)
	help.AddTopics(root)
	return root
}

func newCmdVersion(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the CLI version",
		Example: `  pier version
  pier version --json         # {"version":"…"}, for scripts`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.Config.JSON {
				return cmdutil.PrintJSON(f.IO.Out, map[string]string{"version": sdk.Version})
			}
			_, err := fmt.Fprintf(f.IO.Out, "pier version %s\n", sdk.Version)
			return err
		},
	}
}

// Main runs the client over the process's streams and returns the exit
// code: the client's tree, with the commands it hands over to pier-server
// as stubs.
func Main() int {
	f := cmdutil.NewFactory(cmdutil.SystemIOStreams())
	return Run(f, os.Args[1:], func() *cobra.Command { return NewRootCmd(f) }, cmdutil.HandedOver()...)
}

// Run runs args on the tree newRoot builds, with extra commands (the
// server's, or stubs that hand over to pier-server) added to its root, and
// returns the exit code.
func Run(f *cmdutil.Factory, args []string, newRoot func() *cobra.Command, extra ...*cobra.Command) int {
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
	return cmdutil.Execute(f, newRoot(), args, extra...)
}

// versionOnly: args ask for the version and nothing else, as cobra's
// --version flag (or its -v shorthand) does.
func versionOnly(args []string) bool {
	return len(args) == 1 && (args[0] == "--version" || args[0] == "-v")
}
