package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/pierhq/pier/conformance"
	"github.com/pierhq/pier/holder"
)

// conformanceTarget is a deployment that serves /healthz and nothing
// else: enough for a run to finish quickly with passes and failures, and
// to write and sign its report.
func conformanceTarget(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/healthz" {
			w.Write([]byte(`{"status":"ok","build":"test"}`))
			return
		}
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"blockedBy":"route:not_found","message":"no such route","retryable":false,"actions":[{"kind":"stop"}]}`))
	}))
	t.Cleanup(s.Close)
	return s.URL
}

// conformanceKeyFile writes a fresh signing key, as `pier holder keygen`
// does.
func conformanceKeyFile(t *testing.T, dir, name string) (*holder.Key, string) {
	t.Helper()
	k, err := holder.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := holder.SaveKey(path, k); err != nil {
		t.Fatal(err)
	}
	return k, path
}

// TestConformanceRunColour: the human output is coloured on a terminal,
// or when CLICOLOR_FORCE asks, and plain otherwise: off a terminal, with
// NO_COLOR, CLICOLOR=0 or TERM=dumb. Colour on stdout follows stdout alone,
// whatever stderr is.
func TestConformanceRunColour(t *testing.T) {
	base := conformanceTarget(t)
	dir := t.TempDir()
	_, keyPath := conformanceKeyFile(t, dir, "signing.jwk")
	yes := func() bool { return true }
	for _, c := range []struct {
		name           string
		env            map[string]string
		stdout, stderr func() bool
		coloured       bool
	}{
		{"a terminal", map[string]string{"TERM": "xterm-256color"}, yes, nil, true},
		{"a terminal with COLORTERM", map[string]string{"COLORTERM": "truecolor"}, yes, nil, true},
		{"a terminal with NO_COLOR", map[string]string{"TERM": "xterm-256color", "NO_COLOR": "1"}, yes, nil, false},
		{"a terminal with CLICOLOR=0", map[string]string{"TERM": "xterm-256color", "CLICOLOR": "0"}, yes, nil, false},
		{"a dumb terminal", map[string]string{"TERM": "dumb"}, yes, nil, false},
		{"a pipe", map[string]string{"TERM": "xterm-256color"}, nil, nil, false},
		{"a pipe, stderr a terminal", map[string]string{"TERM": "xterm-256color"}, nil, yes, false},
		{"a pipe with CLICOLOR_FORCE", map[string]string{"CLICOLOR_FORCE": "1"}, nil, nil, true},
		{"CLICOLOR_FORCE under NO_COLOR", map[string]string{"CLICOLOR_FORCE": "1", "NO_COLOR": "1"}, nil, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.env["PIER_BASE_URL"] = base
			f, ts := newTestFactory(c.env)
			f.IO.StdoutIsTerminal, f.IO.StderrIsTerminal = c.stdout, c.stderr
			code := runWith(t, f, NewCmdConformance(f), "run", "--profile", "anonymous", "--key", keyPath)
			if code != ExitError {
				t.Fatalf("exit %d, want %d (the target fails probes): %s", code, ExitError, ts.err)
			}
			out := ts.out.String()
			for _, want := range []string{"wire", "discovery.health", "governed", "not_run", "outcome:", "digest:", "signed by:"} {
				if !strings.Contains(out, want) {
					t.Fatalf("stdout lacks %q:\n%s", want, out)
				}
			}
			if got := strings.Contains(out, "\x1b["); got != c.coloured {
				t.Fatalf("stdout coloured %v, want %v:\n%q", got, c.coloured, out)
			}
			if c.coloured {
				// Failures are red and bold, passes cyan.
				if !strings.Contains(out, "\x1b[1;31mFAIL") && !strings.Contains(out, "\x1b[31;1mFAIL") {
					t.Errorf("FAIL is not red:\n%q", out)
				}
				if !strings.Contains(out, "\x1b[36mpass") {
					t.Errorf("pass is not cyan:\n%q", out)
				}
			}
			// Stripped of colour, the table is the same.
			if plain := stripANSI(out); !strings.Contains(plain, "\n  pass     discovery.health") || !strings.Contains(plain, "outcome: FAIL:") {
				t.Errorf("table:\n%s", plain)
			}
		})
	}
}

// stripANSI drops SGR sequences.
func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// TestConformanceRunWithGivenKey: --key FILE signs the report with that
// key; the signature names its thumbprint, verify accepts it against a
// key set holding that key and refuses it against another key, and a
// signature by another key over the report is refused.
func TestConformanceRunWithGivenKey(t *testing.T) {
	base := conformanceTarget(t)
	dir := t.TempDir()
	key, keyPath := conformanceKeyFile(t, dir, "given.jwk")
	other, otherPath := conformanceKeyFile(t, dir, "other.jwk")
	report := filepath.Join(dir, "reports", "1.json")
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv("HOME", filepath.Join(dir, "home"))

	f, ts := newTestFactory(map[string]string{"PIER_BASE_URL": base})
	if code := runWith(t, f, NewCmdConformance(f), "run", "--profile", "anonymous", "--key", keyPath, "--out", report); code != ExitError {
		t.Fatalf("run: exit %d: %s", code, ts.err)
	}
	if want := "signed by: " + key.Thumbprint() + " (" + keyPath + ")"; !strings.Contains(ts.out.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, ts.out)
	}
	// The default key was neither made nor used.
	if _, err := os.Stat(filepath.Join(dir, "config", "pier", "conformance.jwk")); err == nil {
		t.Errorf("a run with --key created the default key")
	}

	raw, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := os.ReadFile(conformance.SignaturePath(report))
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := conformance.Digest(raw)
	signer, err := conformance.VerifySignature(string(sig), digest, nil)
	if err != nil || signer.KID != key.Thumbprint() {
		t.Fatalf("signature kid %q (%v), want the given key's thumbprint %s", signer.KID, err, key.Thumbprint())
	}

	jwks := func(name string, k *holder.Key) string {
		pub := k.PublicJWK()
		pub.KeyID = k.Thumbprint()
		b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{pub}})
		path := filepath.Join(dir, name)
		os.WriteFile(path, b, 0o644)
		return path
	}
	verify := func(args ...string) (int, map[string]any) {
		t.Helper()
		f, ts := newTestFactory(nil)
		code := runWith(t, f, NewCmdConformance(f), append([]string{"verify", "--json"}, args...)...)
		var out map[string]any
		if err := json.Unmarshal(ts.out.Bytes(), &out); err != nil {
			t.Fatalf("verify --json: %v: %s", err, ts.out)
		}
		return code, out
	}
	errCode := func(out map[string]any) string {
		e, _ := out["error"].(map[string]any)
		s, _ := e["code"].(string)
		return s
	}

	// With the given key as the trusted set: verified, by that key.
	code, out := verify(report, "--keys", jwks("given-jwks.json", key))
	if code != ExitOK || out["verified"] != true {
		t.Fatalf("verify with the given key: exit %d: %v", code, out)
	}
	reports, _ := out["reports"].([]any)
	first, _ := reports[0].(map[string]any)
	if s, _ := first["signer"].(map[string]any); s["kid"] != key.Thumbprint() || s["trusted"] != true {
		t.Errorf("signer %v, want the given key, trusted", first["signer"])
	}

	// Against another key: refused.
	code, out = verify(report, "--keys", jwks("other-jwks.json", other))
	if code != ExitError || errCode(out) != conformance.CodeSignature {
		t.Fatalf("verify with another key: exit %d: %v", code, out)
	}

	// A signature by another key, even one naming itself: refused under
	// the given key's set, and accepted without one only as that other
	// key, which the auditor then sees is not the one they expect.
	otherKey, err := holder.LoadKey(otherPath)
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := conformance.Sign(otherKey, digest)
	os.WriteFile(conformance.SignaturePath(report), []byte(forged), 0o644)
	code, out = verify(report, "--keys", jwks("given-jwks.json", key))
	if code != ExitError || errCode(out) != conformance.CodeSignature {
		t.Fatalf("another key's signature under the given key's set: exit %d: %v", code, out)
	}
	code, out = verify(report)
	reports, _ = out["reports"].([]any)
	first, _ = reports[0].(map[string]any)
	if s, _ := first["signer"].(map[string]any); code != ExitOK || s["kid"] == key.Thumbprint() || s["trusted"] != false {
		t.Fatalf("another key's signature without a key set: exit %d, signer %v", code, first["signer"])
	}

	// A key file others may read is refused before anything runs.
	os.Chmod(keyPath, 0o644)
	f, ts = newTestFactory(map[string]string{"PIER_BASE_URL": base})
	if code := runWith(t, f, NewCmdConformance(f), "run", "--profile", "anonymous", "--key", keyPath); code == ExitOK || !strings.Contains(ts.err.String(), "chmod 600") {
		t.Errorf("a 0644 key: exit %d: %s", code, ts.err)
	}
}
