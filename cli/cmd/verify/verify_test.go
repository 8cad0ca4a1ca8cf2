package verify

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
)

func TestVerifyRejectsAPendingRelease(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"state":"pending","verification":{"holderCliSha256":"`+strings.Repeat("0", 64)+`"}}`)
	}))
	defer srv.Close()
	f, ts := clitest.NewFactory(nil)
	if code := clitest.RunWith(t, f, NewCmdVerifySandboxProof(f, nil), "--base-url", srv.URL, "--json"); code != cmdutil.ExitError {
		t.Fatalf("exit %d", code)
	}
	var rep struct {
		Verdict string
		Checks  []struct {
			ID string
			OK bool
		}
	}
	if err := json.Unmarshal(ts.Out.Bytes(), &rep); err != nil || rep.Verdict != "reject" || rep.Checks[len(rep.Checks)-1].ID != "manifest.state" {
		t.Fatalf("report %s: %v", ts.Out, err)
	}
	if !strings.Contains(ts.Err.String(), "proof rejected at manifest.state") {
		t.Fatalf("stderr: %s", ts.Err)
	}
}

func TestVerifySandboxProofUsage(t *testing.T) {
	f, ts := clitest.NewFactory(nil)
	if code := clitest.RunWith(t, f, NewCmdVerifySandboxProof(f, nil), "--base-url", "ftp://example.com"); code != cmdutil.ExitUsage {
		t.Errorf("exit %d, want %d (%s)", code, cmdutil.ExitUsage, ts.Err)
	}
}
