package help_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pierhq/pier/cli"
	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
)

// TestHelpExitCodes: the exit-code table ships inside the binary, so help
// never sends a user to a file that was not installed with it.
func TestHelpExitCodes(t *testing.T) {
	for _, args := range [][]string{{"help", "exit-codes"}, {"exit-codes"}, {"exit-codes", "--help"}} {
		f, ts := clitest.NewFactory(nil)
		code := cli.Run(f, args)
		if code != cmdutil.ExitOK {
			t.Fatalf("pier %s: exit %d, stderr %s", strings.Join(args, " "), code, ts.Err)
		}
		out := ts.Out.String()
		for _, want := range []string{"| 5    | Input required", "| 9    | Server or network", "`budget:*`"} {
			if !strings.Contains(out, want) {
				t.Errorf("pier %s lacks %q:\n%s", strings.Join(args, " "), want, out)
			}
		}
		if strings.Contains(out, "](") {
			t.Errorf("pier %s prints a Markdown link to a file that is not installed:\n%s", strings.Join(args, " "), out)
		}
	}
	f, ts := clitest.NewFactory(nil)
	cli.Run(f, []string{"--help"})
	if help := ts.Out.String(); strings.Contains(help, "EXIT_CODES.md") || !strings.Contains(help, "pier help exit-codes") {
		t.Errorf("pier --help should point at pier help exit-codes:\n%s", help)
	}
}

// With --json the exit codes are rows a script can read: every code the
// CLI maps, each with its meaning.
func TestHelpExitCodesJSON(t *testing.T) {
	for _, args := range [][]string{{"help", "exit-codes", "--json"}, {"exit-codes", "--json"}} {
		f, ts := clitest.NewFactory(nil)
		if code := cli.Run(f, args); code != cmdutil.ExitOK {
			t.Fatalf("pier %s: exit %d, stderr %s", strings.Join(args, " "), code, ts.Err)
		}
		var rows []struct {
			Code    int    `json:"code"`
			Meaning string `json:"meaning"`
		}
		if err := json.Unmarshal(ts.Out.Bytes(), &rows); err != nil {
			t.Fatalf("pier %s: not JSON: %v\n%s", strings.Join(args, " "), err, ts.Out)
		}
		seen := map[int]string{}
		for _, r := range rows {
			seen[r.Code] = r.Meaning
		}
		for _, c := range []int{cmdutil.ExitOK, cmdutil.ExitUsage, cmdutil.ExitAuth, cmdutil.ExitServer, cmdutil.ExitInterrupted} {
			if seen[c] == "" {
				t.Errorf("pier %s: no row for exit %d in %v", strings.Join(args, " "), c, seen)
			}
		}
	}
}
