package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
)

// A key the server does not know (revoked, mistyped, another server's)
// gets the CLI's words: where the key came from, which server refused it,
// how to get a new one and check it; --json keeps the envelope as sent.
func TestUnknownKeySaysWhatToDo(t *testing.T) {
	body := clitest.ErrorEnvelope("auth:invalid_credentials", "the API key is unknown or revoked", false, "")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		clitest.WriteEnvelope(w, http.StatusUnauthorized, body)
	}))
	defer srv.Close()

	for _, c := range []struct {
		env  map[string]string
		args []string
		from string
	}{
		{map[string]string{"PIER_BASE_URL": srv.URL, "PIER_API_KEY": "agk_revoked"}, []string{"whoami"}, "the key in PIER_API_KEY"},
		{map[string]string{"PIER_BASE_URL": srv.URL}, []string{"whoami", "--api-key", "agk_typo"}, "the key in --api-key"},
	} {
		f, ts := clitest.NewFactory(c.env)
		if code := run(f, c.args); code != cmdutil.ExitAuth {
			t.Fatalf("%v: exit %d, want %d\n%s", c.args, code, cmdutil.ExitAuth, ts.Err)
		}
		for _, w := range []string{c.from, "unknown to the server at " + srv.URL, "pier admin create-key", "pier whoami"} {
			if !strings.Contains(ts.Err.String(), w) {
				t.Errorf("%v: stderr lacks %q:\n%s", c.args, w, ts.Err)
			}
		}
		if strings.Contains(ts.Err.String(), "agk_revoked") || strings.Contains(ts.Err.String(), "agk_typo") {
			t.Errorf("%v: the key itself is printed:\n%s", c.args, ts.Err)
		}
	}

	f, ts := clitest.NewFactory(map[string]string{"PIER_BASE_URL": srv.URL, "PIER_API_KEY": "agk_revoked"})
	if code := run(f, []string{"whoami", "--json"}); code != cmdutil.ExitAuth || strings.TrimSpace(ts.Out.String()) != body {
		t.Errorf("--json: exit %d, stdout %q", code, ts.Out)
	}
}
