package cli

import (
	"strings"
	"testing"

	"github.com/pierhq/pier/cli/cmdutil"
)

// TestHelpExitCodes: the exit-code table ships inside the binary, so help
// never sends a user to a file that was not installed with it.
func TestHelpExitCodes(t *testing.T) {
	for _, args := range [][]string{{"help", "exit-codes"}, {"exit-codes"}, {"exit-codes", "--help"}} {
		_, code, ts := runCaptured(t, "", args...)
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
	_, _, ts := runCaptured(t, "", "--help")
	if help := ts.Out.String(); strings.Contains(help, "EXIT_CODES.md") || !strings.Contains(help, "pier help exit-codes") {
		t.Errorf("pier --help should point at pier help exit-codes:\n%s", help)
	}
}
