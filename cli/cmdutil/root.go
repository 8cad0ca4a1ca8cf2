package cmdutil

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/pierhq/pier/sdk"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Command group ids on the root command. Commands passed to Execute
// are listed under GroupServer ("Running Pier") unless they name a group.
const (
	GroupOperations = "ops"
	GroupServer     = "server"
)

// GroupTrust holds the holder's and the auditor's commands.
const GroupTrust = "trust"

// GroupIDFor places the generated top-level groups under "Operations";
// nested groups carry no group id.
func GroupIDFor(path string) string {
	if strings.Contains(path, " ") {
		return ""
	}
	return GroupOperations
}

// Subcommand is root's subcommand named name, such as a generated group
// ("bundles", "email") that a package adds its hand-written commands to,
// or nil when root has none.
func Subcommand(root *cobra.Command, name string) *cobra.Command {
	for _, c := range root.Commands() {
		if c.Name() == name {
			return c
		}
	}
	return nil
}

// AddOperations adds hand-written commands to root, listed with the
// generated ones under "Operations:".
func AddOperations(root *cobra.Command, cmds ...*cobra.Command) {
	for _, c := range cmds {
		c.GroupID = GroupOperations
	}
	root.AddCommand(cmds...)
}

// NewRootCommand returns the bare root command: the global flags bound to
// f.Config, the operations group and the mapping of flag errors to
// usage errors. It has no commands; package cli adds them.
func NewRootCommand(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:           "pier <command> <subcommand> [flags]",
		Short:         "Pier: hosting and launches operated by agents",
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
		return &UsageError{Err: withFlagSuggestion(c, err), Command: c.CommandPath()}
	})
	help := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		if c.Example == "" && c.HasAvailableSubCommands() {
			c.Example = GroupExamples(c)
		}
		help(c, args)
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
	return root
}

// FinishTree gives top-level operations the operations group, and makes
// group commands fail on an unknown subcommand instead of printing help
// and succeeding.
func FinishTree(root *cobra.Command) {
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
				return UsageErrorf(cmd.CommandPath(), "unknown command %q for %q%s", args[0], cmd.CommandPath(), suggestions(cmd, args[0]))
			}
			return cmd.Help()
		}
	}
	walk(root)
}

// suggestions is the "Did you mean this?" cobra adds to an unknown
// command of the root, for a group's subcommand: cobra suggests only at
// the root, so `pier services lst` would otherwise name no command.
func suggestions(c *cobra.Command, typed string) string {
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	s := c.SuggestionsFor(typed)
	if len(s) == 0 {
		return ""
	}
	return "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
}

// strictHelp makes `pier help TOPIC` fail as a usage error (exit 2, with
// suggestions) when no command or topic is named TOPIC; cobra's own help
// command prints "Unknown help topic" and the root's usage, and exits 0.
func strictHelp(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	var help *cobra.Command
	for _, c := range root.Commands() {
		if c.Name() == "help" {
			help = c
		}
	}
	if help == nil {
		return
	}
	help.Run = nil
	help.RunE = func(c *cobra.Command, args []string) error {
		cmd, rest, err := c.Root().Find(args)
		if err != nil || cmd == nil || len(rest) > 0 {
			parent, typed := c.Root(), strings.Join(args, " ")
			if cmd != nil && len(rest) > 0 {
				parent, typed = cmd, rest[0]
			}
			return UsageErrorf(c.CommandPath(), "unknown help topic %q%s", strings.Join(args, " "), suggestions(parent, typed))
		}
		cmd.InitDefaultHelpFlag()
		cmd.InitDefaultVersionFlag()
		return cmd.Help()
	}
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

// Execute runs args on root and maps the outcome to an exit code; errors
// are printed here and nowhere else.
func Execute(f *Factory, root *cobra.Command, args []string, extra ...*cobra.Command) int {
	addExtra(root, extra)
	completeInServer(root, args)
	helpInServer(root, args)
	strictHelp(root)
	root.SetArgs(args)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	// Ctrl-C surfaces as whatever the command was doing (a request cut
	// short, a wait that ended); say that it was the person's interrupt.
	err = Interrupted(ctx, err, "")
	var named *UsageError
	if errors.As(err, &named) && named.Command == "" && cmd != nil {
		// A usage error from shared code (the upload under pier launch)
		// points at the help of the command that was run.
		named.Command = cmd.CommandPath()
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

// addExtra adds the commands passed to Execute to root, under "Running Pier"
// unless they name a group of root's.
func addExtra(root *cobra.Command, extra []*cobra.Command) {
	for _, c := range extra {
		// A command named like an existing group (`pier sandbox
		// publish-reference` beside the generated `pier sandbox …`) joins
		// that group, in place of a command of the same name there.
		if existing, _, err := root.Find([]string{c.Name()}); err == nil && existing != root && existing.Name() == c.Name() {
			for _, sub := range c.Commands() {
				c.RemoveCommand(sub)
				if same := Subcommand(existing, sub.Name()); same != nil {
					existing.RemoveCommand(same) // the generated `workflows prepare`
				}
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

// maxGroupExamples bounds the examples a group's help borrows.
const maxGroupExamples = 4

// exampleOf is the first line of ex that runs the command named name
// (a pier command line with name among its words), else its first pier
// command line, else "".
func exampleOf(ex, name string) string {
	first := ""
	for _, l := range strings.Split(ex, "\n") {
		t := strings.TrimSpace(l)
		if !strings.HasPrefix(t, "pier ") {
			continue
		}
		if slices.Contains(strings.Fields(t), name) {
			return t
		}
		if first == "" {
			first = t
		}
	}
	return first
}

// GroupExamples is the Examples section of a group (pier services, pier
// admin) that has none of its own: the first example of each of its
// subcommands, in the order help lists them, at most maxGroupExamples.
// It is made when the group's help is shown, not when the tree is built.
func GroupExamples(group *cobra.Command) string {
	var lines []string
	for _, sub := range group.Commands() {
		if len(lines) == maxGroupExamples {
			break
		}
		if !sub.IsAvailableCommand() {
			continue
		}
		ex := sub.Example
		if ex == "" && sub.HasAvailableSubCommands() {
			ex = GroupExamples(sub)
		}
		if l := exampleOf(ex, sub.Name()); l != "" {
			lines = append(lines, "  "+l)
		}
	}
	return strings.Join(lines, "\n")
}
