package cli

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestCommandTree pins every command path with its arguments and flags, so
// a change to the contract or the CLI shows up as a diff.
func TestCommandTree(t *testing.T) {
	f, _ := clitest.NewFactory(nil)
	root := NewRootCmd(f)
	var blocks []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		blocks = append(blocks, describeCommand(c))
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	sort.Strings(blocks)
	got := strings.Join(blocks, "")

	golden := filepath.Join("testdata", "command-tree.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./cli -run TestCommandTree -update)", err)
	}
	if got != string(want) {
		t.Errorf("command tree differs from %s; rerun with -update if intended.\n%s", golden, lineDiff(string(want), got))
	}
}

func describeCommand(c *cobra.Command) string {
	var b strings.Builder
	b.WriteString(c.CommandPath())
	if _, args, ok := strings.Cut(c.Use, " "); ok && c.HasParent() {
		b.WriteString(" " + args)
	}
	if id := c.Annotations[cmdutil.OperationAnnotation]; id != "" {
		fmt.Fprintf(&b, "  [%s]", id)
	}
	b.WriteString("\n")
	var flags []string
	c.LocalFlags().VisitAll(func(fl *pflag.Flag) {
		if fl.Name == "help" {
			return
		}
		s := fmt.Sprintf("    --%s %s", fl.Name, fl.Value.Type())
		if _, ok := fl.Annotations[cmdutil.RequiredAnnotation]; ok {
			s += " (required)"
		}
		if enum := cmdutil.FlagEnum(fl); len(enum) > 0 {
			s += " {" + strings.Join(enum, "|") + "}"
		}
		if fl.Hidden {
			s += " (hidden)"
		}
		flags = append(flags, s)
	})
	sort.Strings(flags)
	for _, s := range flags {
		b.WriteString(s + "\n")
	}
	return b.String()
}

func lineDiff(want, got string) string {
	w := strings.Split(want, "\n")
	g := strings.Split(got, "\n")
	inW := map[string]bool{}
	for _, l := range w {
		inW[l] = true
	}
	inG := map[string]bool{}
	for _, l := range g {
		inG[l] = true
	}
	var b strings.Builder
	for _, l := range w {
		if !inG[l] {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range g {
		if !inW[l] {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}
