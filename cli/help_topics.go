package cli

import (
	_ "embed"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// GroupHelp holds the help topics: commands that only print a page.
const GroupHelp = "help"

//go:embed EXIT_CODES.md
var exitCodesDoc string

// helpTopics are pages `pier help TOPIC` prints, shipped inside the binary
// so that help never points at a file that was not installed with it.
var helpTopics = []struct {
	name, short, long string
}{
	{"exit-codes", "What each exit code of pier means", exitCodesText()},
}

// exitCodesText is EXIT_CODES.md as terminal text: the heading and the
// link to the source dropped, the table kept.
func exitCodesText() string {
	var b strings.Builder
	for _, line := range strings.Split(exitCodesDoc, "\n") {
		switch {
		case strings.HasPrefix(line, "# "):
			continue
		case strings.Contains(line, "](exitcodes.go)"):
			line = strings.ReplaceAll(line, "[`exitcodes.go`](exitcodes.go)", "`cli/exitcodes.go`")
		}
		b.WriteString(line + "\n")
	}
	return strings.TrimSpace(b.String()) + "\n"
}

// addHelpTopics adds each topic as a command that prints its page, under
// "Help topics:" in pier --help, like gh's help topics.
func addHelpTopics(root *cobra.Command) {
	root.AddGroup(&cobra.Group{ID: GroupHelp, Title: "Help topics:"})
	for _, t := range helpTopics {
		cmd := &cobra.Command{
			Use:     t.name,
			Short:   t.short,
			Long:    t.long,
			GroupID: GroupHelp,
			Args:    cobra.NoArgs,
			Example: fmt.Sprintf("  pier help %s\n  pier %s", t.name, t.name),
			RunE: func(c *cobra.Command, _ []string) error {
				_, err := fmt.Fprint(c.OutOrStdout(), c.Long)
				return err
			},
		}
		cmd.SetHelpFunc(func(c *cobra.Command, _ []string) {
			fmt.Fprint(c.OutOrStdout(), c.Long)
		})
		root.AddCommand(cmd)
	}
}
