package help

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli/cmdutil"
)

// GroupHelp holds the help topics: commands that only print a page.
const GroupHelp = "help"

// helpTopics are pages `pier help TOPIC` prints, shipped inside the binary
// so that help never points at a file that was not installed with it. A
// page is made when the tree is built, not at init, which every pier
// command, `pier --version` included, would pay (bench/README.md, "CLI
// start").
var helpTopics = []struct {
	name, short string
	long        func() string
	// data is the page as data, for --json.
	data func() any
}{
	{"exit-codes", "What each exit code of pier means", exitCodesText, exitCodesData},
}

// exitCode is a row of EXIT_CODES.md's table.
type exitCode struct {
	Code    int    `json:"code"`
	Meaning string `json:"meaning"`
	Causes  string `json:"causes"`
}

// exitCodesData is EXIT_CODES.md's table as rows.
func exitCodesData() any {
	rows := []exitCode{}
	for _, line := range strings.Split(cmdutil.ExitCodesDoc, "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 3 {
			continue
		}
		code, err := strconv.Atoi(strings.TrimSpace(cells[0]))
		if err != nil {
			continue
		}
		rows = append(rows, exitCode{Code: code, Meaning: strings.TrimSpace(cells[1]), Causes: strings.TrimSpace(cells[2])})
	}
	return rows
}

// exitCodesText is EXIT_CODES.md as terminal text: the heading and the
// link to the source dropped, the table kept.
func exitCodesText() string {
	var b strings.Builder
	for _, line := range strings.Split(cmdutil.ExitCodesDoc, "\n") {
		switch {
		case strings.HasPrefix(line, "# "):
			continue
		case strings.Contains(line, "](exitcodes.go)"):
			line = strings.ReplaceAll(line, "[`exitcodes.go`](exitcodes.go)", "`cli/cmdutil/exitcodes.go`")
		}
		b.WriteString(line + "\n")
	}
	return strings.TrimSpace(b.String()) + "\n"
}

// AddTopics adds each topic as a command that prints its page, under
// "Help topics:" in pier --help, like gh's help topics.
func AddTopics(root *cobra.Command) {
	root.AddGroup(&cobra.Group{ID: GroupHelp, Title: "Help topics:"})
	for _, t := range helpTopics {
		cmd := &cobra.Command{
			Use:     t.name,
			Short:   t.short,
			Long:    t.long(),
			GroupID: GroupHelp,
			Args:    cobra.NoArgs,
			Example: fmt.Sprintf("  pier help %s\n  pier %s", t.name, t.name),
			RunE: func(c *cobra.Command, _ []string) error {
				if asJSON, _ := c.Flags().GetBool("json"); asJSON && t.data != nil {
					enc := json.NewEncoder(c.OutOrStdout())
					enc.SetIndent("", "  ")
					return enc.Encode(t.data())
				}
				_, err := fmt.Fprint(c.OutOrStdout(), c.Long)
				return err
			},
		}
		cmd.SetHelpFunc(func(c *cobra.Command, _ []string) {
			c.RunE(c, nil)
		})
		root.AddCommand(cmd)
	}
}
