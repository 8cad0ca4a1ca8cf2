package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
)

// Every command's help has examples: a group without its own borrows its
// subcommands' first ones, each a pier command line under the group.
func TestEveryHelpHasExamples(t *testing.T) {
	f, _ := clitest.NewFactory(nil)
	var groups []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if !sub.IsAvailableCommand() {
				continue
			}
			if sub.HasAvailableSubCommands() {
				groups = append(groups, sub)
			}
			walk(sub)
		}
	}
	walk(NewRootCmd(f))
	if len(groups) < 10 {
		t.Fatalf("only %d groups found", len(groups))
	}
	for _, g := range groups {
		path := strings.Fields(g.CommandPath())[1:]
		f, ts := clitest.NewFactory(nil)
		if code := run(f, append(path, "--help")); code != cmdutil.ExitOK {
			t.Fatalf("%s --help: exit %d", g.CommandPath(), code)
		}
		_, examples, ok := strings.Cut(ts.Out.String(), "Examples:\n")
		if !ok {
			t.Errorf("%s --help has no examples:\n%s", g.CommandPath(), ts.Out)
			continue
		}
		first, _, _ := strings.Cut(examples, "\n")
		if !strings.HasPrefix(strings.TrimSpace(first), g.CommandPath()+" ") {
			t.Errorf("%s --help's first example is %q", g.CommandPath(), first)
		}
	}
}
