package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/pierhq/pier/sdk"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Command group ids on the root command. Commands passed to Main are
// listed under GroupServer ("Running Pier") unless they name a group.
const (
	GroupOperations = "ops"
	GroupServer     = "server"
)

// groupIDFor places the generated top-level groups under "Operations";
// nested groups carry no group id.
func groupIDFor(path string) string {
	if strings.Contains(path, " ") {
		return ""
	}
	return GroupOperations
}

const rootLong = `Pier hosts and launches services for agents: search domains, estimate
costs, quote, upload bundles and launch, with every answer a typed envelope
whose actions name the next step.

Every command maps to one API operation. Without --json the answer is a
short summary; with --json it is the envelope exactly as the server sent it.
The exit code says what blocked a failure: pier help exit-codes lists them.

Configuration:
  PIER_BASE_URL   API address (or --base-url); default ` + DefaultBaseURL + `
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
func NewRootCmd(f *Factory) *cobra.Command { return newRootCmd(f, nil) }

// newRootCmd builds the tree; a non-nil runF replaces every operation's
// API call (tests).
func newRootCmd(f *Factory, runF func(*OperationOptions) error) *cobra.Command {
	root := &cobra.Command{
		Use:           "pier <command> <subcommand> [flags]",
		Short:         "Pier: hosting and launches operated by agents",
		Long:          rootLong,
		Example:       rootExample,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       sdk.Version,
		CompletionOptions: cobra.CompletionOptions{
			HiddenDefaultCmd: false,
		},
	}
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	root.SetVersionTemplate("pier version {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &UsageError{Err: err, Command: c.CommandPath()}
	})

	pf := root.PersistentFlags()
	pf.StringVar(&f.Config.BaseURL, "base-url", "", "API address (env PIER_BASE_URL; default "+DefaultBaseURL+")")
	pf.StringVar(&f.Config.APIKey, "api-key", "", "API key (env PIER_API_KEY)")
	pf.BoolVar(&f.Config.JSON, "json", false, "Print the response envelope as received, for scripts")
	pf.BoolVar(&f.Config.Yes, "yes", false, "Confirm without asking; the CLI never asks when stdin is not a terminal")
	pf.BoolVar(&f.Config.NoWait, "no-wait", false, "Return a task handle at once instead of waiting for the task")
	// Waiting is the default for every command whose answer is a task;
	// --wait is kept so that scripts written with it still run.
	var wait bool
	pf.BoolVar(&wait, "wait", true, "Wait for the task (the default)")
	pf.MarkHidden("wait")
	pf.MarkDeprecated("wait", "waiting is the default; --no-wait returns the task handle at once")
	pf.DurationVar(&f.Config.Timeout, "timeout", 2*time.Minute, "Limit on the command's API calls, such as 30s; 0 for none")

	root.AddGroup(&cobra.Group{ID: GroupOperations, Title: "Operations:"})
	root.SetHelpCommandGroupID("")
	root.SetCompletionCommandGroupID("")

	root.AddGroup(&cobra.Group{ID: GroupTrust, Title: "Holder and auditor:"})
	holderCmd, verifyCmd, conformanceCmd := NewCmdHolder(f), NewCmdVerifySandboxProof(f, nil), NewCmdConformance(f)
	holderCmd.GroupID, verifyCmd.GroupID, conformanceCmd.GroupID = GroupTrust, GroupTrust, GroupTrust

	root.AddCommand(newCmdVersion(f), holderCmd, verifyCmd, conformanceCmd, NewCmdCapabilities(f, nil))
	addOperationCommands(root, f, runF)
	addLedgerCommands(root, f)
	addLaunchCommands(root, f)
	addServiceCommands(root, f)
	addWorkflowCommands(root, f)
	addMailCommands(root, f)
	addHelpTopics(root)
	finishTree(root)
	return root
}

// finishTree gives top-level operations the operations group, and makes
// group commands fail on an unknown subcommand instead of printing help
// and succeeding.
func finishTree(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.GroupID == "" && c.Annotations[specAnnotation] != "" {
			c.GroupID = GroupOperations
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		projectAlias(c)
		if c == root || c.Runnable() || !c.HasSubCommands() {
			return
		}
		c.Args = cobra.ArbitraryArgs
		c.DisableFlagsInUseLine = true
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf(cmd.CommandPath(), "unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return cmd.Help()
		}
	}
	walk(root)
}

// projectAlias makes --project-id, the spelling older scripts and the
// contract's field use, another name for a command's --project. It is a
// flag-name normalisation, so it is in no help text and sets the same
// value.
func projectAlias(c *cobra.Command) {
	if c.LocalFlags().Lookup("project") == nil {
		return
	}
	c.Flags().SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "project-id" {
			name = "project"
		}
		return pflag.NormalizedName(name)
	})
}

func newCmdVersion(f *Factory) *cobra.Command {
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

// Main runs the CLI over the process's streams and returns the exit code.
// extra commands, such as `pier server`, are added to the root under
// "Running Pier".
// Run runs pier with args on f's streams and environment, and returns the
// exit code, as Main does for the process.
func Run(f *Factory, args []string, extra ...*cobra.Command) int { return run(f, args, extra...) }

func Main(extra ...*cobra.Command) int {
	return run(NewFactory(SystemIOStreams()), os.Args[1:], extra...)
}

func run(f *Factory, args []string, extra ...*cobra.Command) int {
	root := NewRootCmd(f)
	return execute(f, root, args, extra...)
}

// execute runs args on root and maps the outcome to an exit code; errors
// are printed here and nowhere else.
func execute(f *Factory, root *cobra.Command, args []string, extra ...*cobra.Command) int {
	addExtra(root, extra)
	completeInServer(root, args)
	helpInServer(root, args)
	root.SetArgs(args)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	if isCobraUsage(err) {
		var usage *UsageError
		if !errors.As(err, &usage) {
			path := root.CommandPath()
			if cmd != nil {
				path = cmd.CommandPath()
			}
			err = &UsageError{Err: err, Command: path}
		}
	}
	PrintError(f, root, err)
	return ExitCode(err)
}

// addExtra adds the commands passed to Main to root, under "Running Pier"
// unless they name a group of root's.
func addExtra(root *cobra.Command, extra []*cobra.Command) {
	for _, c := range extra {
		// A command named like an existing group (`pier sandbox
		// publish-reference` beside the generated `pier sandbox …`) joins
		// that group.
		if existing, _, err := root.Find([]string{c.Name()}); err == nil && existing != root && existing.Name() == c.Name() {
			for _, sub := range c.Commands() {
				c.RemoveCommand(sub)
				existing.AddCommand(sub)
			}
			continue
		}
		if c.GroupID == "" || c.GroupID == GroupServer {
			if !root.ContainsGroup(GroupServer) {
				root.AddGroup(&cobra.Group{ID: GroupServer, Title: "Running Pier:"})
			}
			c.GroupID = GroupServer
		} else if !root.ContainsGroup(c.GroupID) {
			c.GroupID = ""
		}
		root.AddCommand(c)
	}
}
