package cli

import (
	"bytes"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
	"github.com/pierhq/pier/internal/testkit/contracttest"
)

// With --json, an error the CLI makes itself (a usage error, a server
// that does not answer) is an envelope on stdout in the contract's shape,
// as the server's are: a script reading stdout gets JSON whichever side
// refused. Without --json stdout stays empty.
func TestCLIErrorsAreEnvelopesWithJSON(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close() // nothing answers there now
	for _, c := range []struct {
		name      string
		args      []string
		exit      int
		blockedBy string
		retryable bool
		step      string
	}{
		{"usage", []string{"quotes", "create", "--json"}, cmdutil.ExitUsage, "input:invalid", false, "fix_input"},
		{"no server", []string{"whoami", "--json"}, cmdutil.ExitServer, "internal:unavailable", true, "contact_operator"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, ts := clitest.NewFactory(map[string]string{"PIER_BASE_URL": refused, "PIER_API_KEY": "agk_test"})
			if code := run(f, c.args); code != c.exit {
				t.Fatalf("exit %d, want %d\n%s", code, c.exit, ts.Err)
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(ts.Out.Bytes()))
			if err != nil {
				t.Fatalf("stdout is not JSON: %v\n%q", err, ts.Out)
			}
			if err := contracttest.Schema(t, "error.json").Validate(doc); err != nil {
				t.Fatalf("stdout is not an error envelope: %v\n%s", err, ts.Out)
			}
			var env struct {
				BlockedBy string `json:"blockedBy"`
				Retryable bool   `json:"retryable"`
				Actions   []struct {
					Step string `json:"step"`
				} `json:"actions"`
			}
			json.Unmarshal(ts.Out.Bytes(), &env)
			if env.BlockedBy != c.blockedBy || env.Retryable != c.retryable || len(env.Actions) != 1 || env.Actions[0].Step != c.step {
				t.Errorf("envelope %s", ts.Out)
			}
			if !strings.Contains(ts.Err.String(), "error:") {
				t.Errorf("stderr lacks the human message:\n%s", ts.Err)
			}

			f, ts = clitest.NewFactory(map[string]string{"PIER_BASE_URL": refused, "PIER_API_KEY": "agk_test"})
			run(f, c.args[:len(c.args)-1])
			if ts.Out.Len() != 0 {
				t.Errorf("without --json, stdout %q", ts.Out)
			}
		})
	}
}
