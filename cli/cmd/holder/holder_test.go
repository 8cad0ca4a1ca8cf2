package holder

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
	"github.com/pierhq/pier/holder"
)

func TestHolderKeygen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "holder.jwk")
	f, ts := clitest.NewFactory(nil)
	if code := run(t, f, []string{"holder", "keygen", "--key", path, "--json"}); code != cmdutil.ExitOK {
		t.Fatalf("exit %d: %s", code, ts.Err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	k, err := holder.LoadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Key, Thumbprint string }
	if err := json.Unmarshal(ts.Out.Bytes(), &out); err != nil || out.Thumbprint != k.Thumbprint() || out.Key != path {
		t.Fatalf("output %s: %v", ts.Out, err)
	}
	// It never replaces a key.
	f, _ = clitest.NewFactory(nil)
	if code := run(t, f, []string{"holder", "keygen", "--key", path}); code != cmdutil.ExitError {
		t.Fatalf("overwrite: exit %d", code)
	}
	if k2, _ := holder.LoadKey(path); k2.Thumbprint() != k.Thumbprint() {
		t.Fatal("the key was replaced")
	}
}

func TestHolderUsage(t *testing.T) {
	for _, args := range [][]string{
		{"holder", "keygen"},
		{"holder", "mandate", "--key", "k"},
		{"holder", "decide", "--key", "k"},
		{"holder", "decide", "--key", "k", "--gate", "{}", "--gate-file", "g.json"},
		{"holder", "decide", "--key", "k", "--gate", "not json"},
		{"holder", "decide", "--key", "k", "--gate", `{"id":"sbg_1"}`},
		{"holder", "frobnicate"},
	} {
		f, ts := clitest.NewFactory(nil)
		if code := run(t, f, args); code != cmdutil.ExitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, cmdutil.ExitUsage, ts.Err)
		}
	}
}

func TestReadGate(t *testing.T) {
	gate := `{"id":"sbg_1","requestDigest":"` + strings.Repeat("a", 64) + `","nonce":"nnnnnnnnnnnnnnnnnnnnnn","outcome":"approved","expiresAt":"2026-11-21T12:10:00Z"}`
	for name, tc := range map[string]struct {
		in, session string
		ok          bool
	}{
		"the gate":                           {gate, "", true},
		"wrapped":                            {`{"gate":` + gate + `}`, "", true},
		"attempt response":                   {`{"data":{"sessionId":"sbs_1","attempt":{},"gate":` + gate + `},"actions":[]}`, "sbs_1", true},
		"attempt response of an allowed one": {`{"data":{"sessionId":"sbs_1","attempt":{}}}`, "", false},
		"a gate without its nonce":           {`{"id":"sbg_1","requestDigest":"x","outcome":"approved","expiresAt":"x"}`, "", false},
	} {
		g, session, err := readGate([]byte(tc.in))
		if (err == nil) != tc.ok || session != tc.session || (tc.ok && g.ID != "sbg_1") {
			t.Errorf("%s: %+v %q %v", name, g, session, err)
		}
	}
}

// TestHolderSendsNoAuthority runs mandate and decide against a fake sandbox
// with an API key configured: the holder commands must not send it, nor any
// Authorization header.
func TestHolderSendsNoAuthority(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" auth="+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/reference/sandbox/issuer-jwks.json":
			io.WriteString(w, `{"keys":[{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0","kid":"issuer-1","alg":"ES256","use":"sig"}]}`)
		case strings.HasSuffix(r.URL.Path, "/mandate"):
			w.WriteHeader(201)
			io.WriteString(w, `{"data":{"sessionId":"sbs_1"},"actions":[{"kind":"stop","reason":"done"}],"formatVersion":"1"}`)
		case strings.HasSuffix(r.URL.Path, "/decision"):
			w.WriteHeader(409)
			io.WriteString(w, `{"blockedBy":"conflict:gate_decided","message":"gate sbg_1 was already decided","retryable":false,"actions":[{"kind":"stop","reason":"done"}],"formatVersion":"1"}`)
		default:
			w.WriteHeader(404)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	key := filepath.Join(dir, "holder.jwk")
	env := map[string]string{"PIER_BASE_URL": srv.URL, "PIER_API_KEY": "agk_secret"}
	f, _ := clitest.NewFactory(env)
	run(t, f, []string{"holder", "keygen", "--key", key})

	f, ts := clitest.NewFactory(env)
	if code := run(t, f, []string{"holder", "mandate", "--session", "sbs_1", "--registration-secret", "sbr_1", "--key", key, "--json"}); code != cmdutil.ExitOK {
		t.Fatalf("mandate: exit %d %s", code, ts.Err)
	}
	var out struct {
		Mandate, IssuerKid string
		Response           json.RawMessage
	}
	if err := json.Unmarshal(ts.Out.Bytes(), &out); err != nil || out.IssuerKid != "issuer-1" || strings.Count(out.Mandate, ".") != 2 || out.Response == nil {
		t.Fatalf("mandate output %s: %v", ts.Out, err)
	}

	gate := `{"data":{"sessionId":"sbs_1","gate":{"id":"sbg_1","requestDigest":"` + strings.Repeat("a", 64) + `","nonce":"nnnnnnnnnnnnnnnnnnnnnn","outcome":"approved","expiresAt":"2026-11-21T12:10:00Z"}}}`
	f, ts = clitest.NewFactory(env)
	ts.In.WriteString(gate)
	// The sandbox refuses: the refusal's blockedBy sets the exit code.
	if code := run(t, f, []string{"holder", "decide", "--key", key, "--gate-file", "-"}); code != cmdutil.ExitConflict {
		t.Fatalf("decide: exit %d %s", code, ts.Err)
	}
	if !strings.Contains(ts.Err.String(), "conflict:gate_decided") {
		t.Fatalf("stderr: %s", ts.Err)
	}
	for _, s := range seen {
		if !strings.HasSuffix(s, "auth=") {
			t.Errorf("holder request with authority: %s", s)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("requests: %v", seen)
	}
}

// run runs `pier holder …`: args[0] is "holder".
func run(t *testing.T, f *cmdutil.Factory, args []string) int {
	t.Helper()
	return clitest.RunWith(t, f, NewCmdHolder(f), args[1:]...)
}
