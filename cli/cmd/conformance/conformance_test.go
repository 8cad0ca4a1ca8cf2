package conformance

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
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
			f, ts := clitest.NewFactory(c.env)
			f.IO.StdoutIsTerminal, f.IO.StderrIsTerminal = c.stdout, c.stderr
			code := clitest.RunWith(t, f, NewCmdConformance(f), "run", "--profile", "anonymous", "--key", keyPath)
			if code != cmdutil.ExitError {
				t.Fatalf("exit %d, want %d (the target fails probes): %s", code, cmdutil.ExitError, ts.Err)
			}
			out := ts.Out.String()
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

	digest := runSignedByGivenKey(t, base, dir, key, keyPath, report)

	// With the given key as the trusted set: verified, by that key.
	code, out := verifyConformanceJSON(t, report, "--keys", conformanceJWKS(dir, "given-jwks.json", key))
	if code != cmdutil.ExitOK || out["verified"] != true {
		t.Fatalf("verify with the given key: exit %d: %v", code, out)
	}
	reports, _ := out["reports"].([]any)
	first, _ := reports[0].(map[string]any)
	if s, _ := first["signer"].(map[string]any); s["kid"] != key.Thumbprint() || s["trusted"] != true {
		t.Errorf("signer %v, want the given key, trusted", first["signer"])
	}

	// Against another key: refused.
	code, out = verifyConformanceJSON(t, report, "--keys", conformanceJWKS(dir, "other-jwks.json", other))
	if code != cmdutil.ExitError || conformanceErrorCode(out) != conformance.CodeSignature {
		t.Fatalf("verify with another key: exit %d: %v", code, out)
	}

	otherKeysSignatureRefused(t, dir, report, digest, key, otherPath)

	// A key file others may read is refused before anything runs.
	os.Chmod(keyPath, 0o644)
	f, ts := clitest.NewFactory(map[string]string{"PIER_BASE_URL": base})
	if code := clitest.RunWith(t, f, NewCmdConformance(f), "run", "--profile", "anonymous", "--key", keyPath); code == cmdutil.ExitOK || !strings.Contains(ts.Err.String(), "chmod 600") {
		t.Errorf("a 0644 key: exit %d: %s", code, ts.Err)
	}
}

// runSignedByGivenKey runs the anonymous profile with --key and wants the
// report signed by that key, and no default key made. It answers the
// report's digest.
func runSignedByGivenKey(t *testing.T, base, dir string, key *holder.Key, keyPath, report string) string {
	t.Helper()
	f, ts := clitest.NewFactory(map[string]string{"PIER_BASE_URL": base})
	if code := clitest.RunWith(t, f, NewCmdConformance(f), "run", "--profile", "anonymous", "--key", keyPath, "--out", report); code != cmdutil.ExitError {
		t.Fatalf("run: exit %d: %s", code, ts.Err)
	}
	if want := "signed by: " + key.Thumbprint() + " (" + keyPath + ")"; !strings.Contains(ts.Out.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, ts.Out)
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
	return digest
}

// A signature by another key, even one naming itself: refused under the
// given key's set, and without one not verified: the other key's
// thumbprint is reported, untrusted, and verify exits 1.
func otherKeysSignatureRefused(t *testing.T, dir, report, digest string, key *holder.Key, otherPath string) {
	t.Helper()
	otherKey, err := holder.LoadKey(otherPath)
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := conformance.Sign(otherKey, digest)
	os.WriteFile(conformance.SignaturePath(report), []byte(forged), 0o644)
	code, out := verifyConformanceJSON(t, report, "--keys", conformanceJWKS(dir, "given-jwks.json", key))
	if code != cmdutil.ExitError || conformanceErrorCode(out) != conformance.CodeSignature {
		t.Fatalf("another key's signature under the given key's set: exit %d: %v", code, out)
	}
	code, out = verifyConformanceJSON(t, report)
	if s, _ := out["signer"].(map[string]any); code != cmdutil.ExitError || out["verified"] != false || conformanceErrorCode(out) != conformance.CodeSignerUntrusted ||
		s["kid"] != otherKey.Thumbprint() || s["trusted"] != false {
		t.Fatalf("another key's signature without a key set: exit %d: %v", code, out)
	}
}

// conformanceJWKS writes a key set of k's public key to dir/name and
// answers its path.
func conformanceJWKS(dir, name string, k *holder.Key) string {
	pub := k.PublicJWK()
	pub.KeyID = k.Thumbprint()
	b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{pub}})
	path := filepath.Join(dir, name)
	os.WriteFile(path, b, 0o644)
	return path
}

// verifyConformanceJSON runs pier conformance verify --json with args.
func verifyConformanceJSON(t *testing.T, args ...string) (int, map[string]any) {
	t.Helper()
	f, ts := clitest.NewFactory(nil)
	code := clitest.RunWith(t, f, NewCmdConformance(f), append([]string{"verify", "--json"}, args...)...)
	var out map[string]any
	if err := json.Unmarshal(ts.Out.Bytes(), &out); err != nil {
		t.Fatalf("verify --json: %v: %s", err, ts.Out)
	}
	return code, out
}

func conformanceErrorCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func TestConformanceVerifyStranger(t *testing.T) {
	dir := t.TempDir()
	_, ownerPath := conformanceKeyFile(t, dir, "owner.jwk")
	stranger, _ := conformanceKeyFile(t, dir, "stranger.jwk")
	reports := filepath.Join(dir, "reports")
	first, second := filepath.Join(reports, "1.json"), filepath.Join(reports, "2.json")
	jwksPath := ownersChainOfTwo(t, dir, ownerPath, first, second)
	raw, _ := os.ReadFile(second)
	head, _ := conformance.Digest(raw)

	// The owner's chain, anchored and with the owner's keys: ok.
	if code, out, errOut := verifyConformance(t, "--chain", reports, "--keys", jwksPath, "--head", head); code != cmdutil.ExitOK || !strings.Contains(out, "2 reports in one chain") {
		t.Fatalf("the owner's chain: exit %d:\n%s%s", code, out, errOut)
	}
	if code, _, errOut := verifyConformance(t, "--chain", reports, "--keys", jwksPath, "--count", "2"); code != cmdutil.ExitOK {
		t.Fatalf("the owner's chain by count: exit %d: %s", code, errOut)
	}
	// The keys from the URL the auditor names.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := os.ReadFile(jwksPath)
		w.Write(b)
	}))
	defer srv.Close()
	if code, _, errOut := verifyConformance(t, second, "--keys", srv.URL+"/conformance-jwks.json"); code != cmdutil.ExitOK {
		t.Fatalf("keys from a URL: exit %d: %s", code, errOut)
	}

	strangerResigns(t, second, raw, stranger)
	strangersReportUnverified(t, second, jwksPath, stranger)
	newestRemovedBreaksTheAnchor(t, reports, first, second, jwksPath, head)
}

// ownersChainOfTwo runs the anonymous profile twice, signed by the owner
// through the CLI, the second report chained to the first, and writes the
// owner's key set. It answers the key set's path.
func ownersChainOfTwo(t *testing.T, dir, ownerPath, first, second string) string {
	t.Helper()
	base := conformanceTarget(t)
	for _, args := range [][]string{
		{"run", "--profile", "anonymous", "--key", ownerPath, "--out", first},
		{"run", "--profile", "anonymous", "--key", ownerPath, "--previous", first, "--out", second},
	} {
		f, ts := clitest.NewFactory(map[string]string{"PIER_BASE_URL": base})
		if code := clitest.RunWith(t, f, NewCmdConformance(f), args...); code != cmdutil.ExitError {
			t.Fatalf("%v: exit %d: %s", args, code, ts.Err)
		}
	}
	f, ts := clitest.NewFactory(nil)
	if code := clitest.RunWith(t, f, NewCmdConformance(f), "jwks", "--key", ownerPath); code != cmdutil.ExitOK {
		t.Fatalf("jwks: exit %d: %s", code, ts.Err)
	}
	jwksPath := filepath.Join(dir, "owner-jwks.json")
	os.WriteFile(jwksPath, ts.Out.Bytes(), 0o644)
	return jwksPath
}

// verifyConformance runs pier conformance verify with args and answers
// its exit code, stdout and stderr.
func verifyConformance(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	f, ts := clitest.NewFactory(nil)
	code := clitest.RunWith(t, f, NewCmdConformance(f), append([]string{"verify"}, args...)...)
	return code, ts.Out.String(), ts.Err.String()
}

// strangerResigns edits the report raw and re-signs it with stranger.
func strangerResigns(t *testing.T, report string, raw []byte, stranger *holder.Key) {
	t.Helper()
	edited := strings.Replace(string(raw), `"buildId": "test"`, `"buildId": "edited"`, 1)
	if edited == string(raw) {
		t.Fatal("no buildId to edit")
	}
	os.WriteFile(report, []byte(edited), 0o644)
	digest, _ := conformance.Digest([]byte(edited))
	sig, _ := conformance.Sign(stranger, digest)
	os.WriteFile(conformance.SignaturePath(report), []byte(sig), 0o644)
}

// strangersReportUnverified wants a report the stranger signed reported
// unverified, naming the stranger, and refused under the owner's keys.
func strangersReportUnverified(t *testing.T, report, jwksPath string, stranger *holder.Key) {
	t.Helper()
	code, out, errOut := verifyConformance(t, report)
	if code != cmdutil.ExitError || strings.Contains(out, "ok  ") || !strings.Contains(out, "unverified") ||
		!strings.Contains(out, stranger.Thumbprint()) || !strings.Contains(errOut, conformance.CodeSignerUntrusted) || !strings.Contains(errOut, "--keys") {
		t.Errorf("the stranger's report without --keys: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code, out, _ = verifyConformance(t, report, "--json")
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
	if code != cmdutil.ExitError || doc.Verified || doc.Signer.KID != stranger.Thumbprint() || doc.Signer.Trusted || doc.Error.Code != conformance.CodeSignerUntrusted {
		t.Errorf("the stranger's report --json: exit %d: %s", code, out)
	}
	if code, _, errOut := verifyConformance(t, report, "--keys", jwksPath); code != cmdutil.ExitError || !strings.Contains(errOut, conformance.CodeSignature) {
		t.Errorf("the stranger's report under the owner's keys: exit %d: %s", code, errOut)
	}
}

// The newest report removed: the chain that is left is whole, but not the
// one anchored. An anchor without a chain, or a head that is no digest,
// is misuse.
func newestRemovedBreaksTheAnchor(t *testing.T, reports, first, second, jwksPath, head string) {
	t.Helper()
	os.Remove(second)
	os.Remove(conformance.SignaturePath(second))
	for _, anchor := range [][]string{{"--head", head}, {"--count", "2"}} {
		code, _, errOut := verifyConformance(t, append([]string{"--chain", reports, "--keys", jwksPath}, anchor...)...)
		if code != cmdutil.ExitError || !strings.Contains(errOut, conformance.CodeChainHead) {
			t.Errorf("newest report removed, %v: exit %d: %s", anchor, code, errOut)
		}
	}
	if code, _, errOut := verifyConformance(t, "--chain", reports, "--keys", jwksPath); code != cmdutil.ExitError || !strings.Contains(errOut, conformance.CodeChainUnanchored) {
		t.Errorf("a chain with no anchor: exit %d: %s", code, errOut)
	}
	if code, _, _ := verifyConformance(t, first, "--head", head); code != cmdutil.ExitUsage {
		t.Errorf("--head without --chain: exit %d", code)
	}
	if code, _, _ := verifyConformance(t, "--chain", reports, "--head", "abc"); code != cmdutil.ExitUsage {
		t.Errorf("--head abc: exit %d", code)
	}
}
