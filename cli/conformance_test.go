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
	// the given key's set, and without one not verified: the other key's
	// thumbprint is reported, untrusted, and verify exits 1.
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
	if s, _ := out["signer"].(map[string]any); code != ExitError || out["verified"] != false || errCode(out) != conformance.CodeSignerUntrusted ||
		s["kid"] != otherKey.Thumbprint() || s["trusted"] != false {
		t.Fatalf("another key's signature without a key set: exit %d: %v", code, out)
	}

	// A key file others may read is refused before anything runs.
	os.Chmod(keyPath, 0o644)
	f, ts = newTestFactory(map[string]string{"PIER_BASE_URL": base})
	if code := runWith(t, f, NewCmdConformance(f), "run", "--profile", "anonymous", "--key", keyPath); code == ExitOK || !strings.Contains(ts.err.String(), "chmod 600") {
		t.Errorf("a 0644 key: exit %d: %s", code, ts.err)
	}
}

// TestConformanceVerifyStranger: an edited report re-signed with a fresh
// key is never "ok": without --keys verify prints it as unverified with the
// stranger's thumbprint and exits 1; --json says verified false and names
// the signer. A chain whose newest report was removed is caught by the
// head digest or the count the auditor gives, and a chain with no anchor
// is not verified. --keys may be the URL the signer publishes its JWKS at.
func TestConformanceVerifyStranger(t *testing.T) {
	dir := t.TempDir()
	_, ownerPath := conformanceKeyFile(t, dir, "owner.jwk")
	stranger, _ := conformanceKeyFile(t, dir, "stranger.jwk")

	// Two reports in one chain, signed by the owner, through the CLI.
	base := conformanceTarget(t)
	reports := filepath.Join(dir, "reports")
	first, second := filepath.Join(reports, "1.json"), filepath.Join(reports, "2.json")
	for _, args := range [][]string{
		{"run", "--profile", "anonymous", "--key", ownerPath, "--out", first},
		{"run", "--profile", "anonymous", "--key", ownerPath, "--previous", first, "--out", second},
	} {
		f, ts := newTestFactory(map[string]string{"PIER_BASE_URL": base})
		if code := runWith(t, f, NewCmdConformance(f), args...); code != ExitError {
			t.Fatalf("%v: exit %d: %s", args, code, ts.err)
		}
	}
	f, ts := newTestFactory(nil)
	if code := runWith(t, f, NewCmdConformance(f), "jwks", "--key", ownerPath); code != ExitOK {
		t.Fatalf("jwks: exit %d: %s", code, ts.err)
	}
	jwksPath := filepath.Join(dir, "owner-jwks.json")
	os.WriteFile(jwksPath, ts.out.Bytes(), 0o644)

	verify := func(args ...string) (int, string, string) {
		t.Helper()
		f, ts := newTestFactory(nil)
		code := runWith(t, f, NewCmdConformance(f), append([]string{"verify"}, args...)...)
		return code, ts.out.String(), ts.err.String()
	}
	raw, _ := os.ReadFile(second)
	head, _ := conformance.Digest(raw)

	// The owner's chain, anchored and with the owner's keys: ok.
	if code, out, errOut := verify("--chain", reports, "--keys", jwksPath, "--head", head); code != ExitOK || !strings.Contains(out, "2 reports in one chain") {
		t.Fatalf("the owner's chain: exit %d:\n%s%s", code, out, errOut)
	}
	if code, _, errOut := verify("--chain", reports, "--keys", jwksPath, "--count", "2"); code != ExitOK {
		t.Fatalf("the owner's chain by count: exit %d: %s", code, errOut)
	}
	// The keys from the URL the auditor names.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := os.ReadFile(jwksPath)
		w.Write(b)
	}))
	defer srv.Close()
	if code, _, errOut := verify(second, "--keys", srv.URL+"/conformance-jwks.json"); code != ExitOK {
		t.Fatalf("keys from a URL: exit %d: %s", code, errOut)
	}

	// The second report edited and re-signed by a stranger.
	edited := strings.Replace(string(raw), `"buildId": "test"`, `"buildId": "edited"`, 1)
	if edited == string(raw) {
		t.Fatal("no buildId to edit")
	}
	os.WriteFile(second, []byte(edited), 0o644)
	digest, _ := conformance.Digest([]byte(edited))
	sig, _ := conformance.Sign(stranger, digest)
	os.WriteFile(conformance.SignaturePath(second), []byte(sig), 0o644)

	code, out, errOut := verify(second)
	if code != ExitError || strings.Contains(out, "ok  ") || !strings.Contains(out, "unverified") ||
		!strings.Contains(out, stranger.Thumbprint()) || !strings.Contains(errOut, conformance.CodeSignerUntrusted) || !strings.Contains(errOut, "--keys") {
		t.Errorf("the stranger's report without --keys: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code, out, _ = verify(second, "--json")
	var doc struct {
		Verified bool
		Signer   struct {
			KID     string `json:"kid"`
			Trusted bool   `json:"trusted"`
		}
		Error struct{ Code string }
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("--json: %v: %s", err, out)
	}
	if code != ExitError || doc.Verified || doc.Signer.KID != stranger.Thumbprint() || doc.Signer.Trusted || doc.Error.Code != conformance.CodeSignerUntrusted {
		t.Errorf("the stranger's report --json: exit %d: %s", code, out)
	}
	if code, _, errOut := verify(second, "--keys", jwksPath); code != ExitError || !strings.Contains(errOut, conformance.CodeSignature) {
		t.Errorf("the stranger's report under the owner's keys: exit %d: %s", code, errOut)
	}

	// The newest report removed: the chain that is left is whole, but not
	// the one anchored.
	os.Remove(second)
	os.Remove(conformance.SignaturePath(second))
	for _, anchor := range [][]string{{"--head", head}, {"--count", "2"}} {
		code, _, errOut := verify(append([]string{"--chain", reports, "--keys", jwksPath}, anchor...)...)
		if code != ExitError || !strings.Contains(errOut, conformance.CodeChainHead) {
			t.Errorf("newest report removed, %v: exit %d: %s", anchor, code, errOut)
		}
	}
	if code, _, errOut := verify("--chain", reports, "--keys", jwksPath); code != ExitError || !strings.Contains(errOut, conformance.CodeChainUnanchored) {
		t.Errorf("a chain with no anchor: exit %d: %s", code, errOut)
	}
	// An anchor without a chain, or a head that is no digest, is misuse.
	if code, _, _ := verify(first, "--head", head); code != ExitUsage {
		t.Errorf("--head without --chain: exit %d", code)
	}
	if code, _, _ := verify("--chain", reports, "--head", "abc"); code != ExitUsage {
		t.Errorf("--head abc: exit %d", code)
	}
}
