package holder_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pierhq/pier/holder"
	"github.com/pierhq/pier/internal/lib/sandboxproof"
)

// node finds node; in CI a missing node fails, since sandbox-holder.mjs is
// published and must keep working.
func node(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is required in CI to test sandbox-holder.mjs")
		}
		t.Skip("node not found")
	}
	return path
}

// runHolder runs sandbox-holder.mjs and returns stdout and the exit code.
func runHolder(t *testing.T, args ...string) ([]byte, int) {
	t.Helper()
	cmd := exec.Command(node(t), append([]string{"js/sandbox-holder.mjs"}, args...)...)
	cmd.Env = append(os.Environ(), "PIER_BASE_URL=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return stdout.Bytes(), exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return stdout.Bytes(), 0
}

func decodeJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
}

func TestJSHolderKeysInteroperate(t *testing.T) {
	dir := t.TempDir()
	jsKey := filepath.Join(dir, "js.jwk.json")
	out, code := runHolder(t, "keygen", "--key", jsKey, "--json")
	if code != 0 {
		t.Fatalf("keygen exited %d: %s", code, out)
	}
	var gen struct{ Thumbprint string }
	decodeJSON(t, out, &gen)
	info, err := os.Stat(jsKey)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("JS key file mode %04o, want 0600", info.Mode().Perm())
	}
	k, err := holder.LoadKey(jsKey)
	if err != nil {
		t.Fatalf("the Go holder cannot read the JS holder's key: %v", err)
	}
	if k.Thumbprint() != gen.Thumbprint {
		t.Fatalf("thumbprints differ: Go %s, JS %s", k.Thumbprint(), gen.Thumbprint)
	}
	if _, code := runHolder(t, "keygen", "--key", jsKey); code != 1 {
		t.Fatalf("keygen over an existing key exited %d, want 1", code)
	}

	// And the other way: a Go key signs a JS mandate the server accepts.
	goKey, _ := holder.GenerateKey()
	goPath := filepath.Join(dir, "go.jwk.json")
	if err := holder.SaveKey(goPath, goKey); err != nil {
		t.Fatal(err)
	}
	issuer, _ := sandboxproof.GenerateSigningKey()
	out, code = runHolder(t, "mandate", "--session", "sbs_jsInterop01", "--key", goPath, "--issuer-kid", issuer.KID, "--no-post", "--json")
	if code != 0 {
		t.Fatalf("mandate exited %d: %s", code, out)
	}
	var signed struct{ Mandate, Thumbprint string }
	decodeJSON(t, out, &signed)
	m, err := sandboxproof.VerifyMandate(signed.Mandate, sandboxproof.MandateCheck{SessionID: "sbs_jsInterop01", IssuerKID: issuer.KID})
	if err != nil {
		t.Fatalf("the server refuses the JS mandate: %v", err)
	}
	if m.HolderThumbprint != goKey.Thumbprint() || signed.Thumbprint != goKey.Thumbprint() {
		t.Fatal("the JS mandate is not bound to the Go key it was signed with")
	}

	if err := os.Chmod(goPath, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, code := runHolder(t, "mandate", "--session", "s", "--key", goPath, "--issuer-kid", "k", "--no-post"); code != 1 {
		t.Fatalf("mandate with a world-readable key exited %d, want 1", code)
	}
}

func TestJSHolderFlowAgainstSandbox(t *testing.T) {
	sb, srv := newSandbox(t)
	key := filepath.Join(t.TempDir(), "holder.jwk.json")
	if _, code := runHolder(t, "keygen", "--key", key); code != 0 {
		t.Fatal("keygen failed")
	}

	// The registration secret is required, from the flag or the environment.
	if out, code := runHolder(t, "mandate", "--base-url", srv.URL, "--session", sb.session, "--key", key, "--json"); code != 2 {
		t.Fatalf("mandate without a registration secret exited %d: %s", code, out)
	}
	out, code := runHolder(t, "mandate", "--base-url", srv.URL, "--session", sb.session, "--registration-secret", testRegistration, "--key", key, "--json")
	if code != 0 {
		t.Fatalf("mandate exited %d: %s", code, out)
	}
	if sb.mandate == nil {
		t.Fatal("the sandbox did not register the mandate")
	}

	gate := sb.openGate()
	// The holder is handed the whole attempt response, as an agent would
	// pass it on.
	attempt, _ := json.Marshal(map[string]any{"data": map[string]any{"gate": gate}, "formatVersion": "1"})
	gateFile := filepath.Join(t.TempDir(), "attempt.json")
	if err := os.WriteFile(gateFile, attempt, 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = runHolder(t, "decide", "--base-url", srv.URL, "--session", sb.session, "--key", key, "--gate-file", gateFile, "--json")
	if code != 0 {
		t.Fatalf("decide exited %d: %s", code, out)
	}
	if sb.decided == nil || sb.decided.Outcome != sandboxproof.DecisionApproved {
		t.Fatal("the sandbox did not record the JS holder's approval")
	}

	gateJSON, _ := json.Marshal(gate)
	out, code = runHolder(t, "decide", "--base-url", srv.URL, "--session", sb.session, "--key", key, "--gate", string(gateJSON), "--deny", "--json")
	if code != 1 {
		t.Fatalf("a second decision exited %d, want 1: %s", code, out)
	}
	var refused struct {
		Response struct{ BlockedBy string }
	}
	decodeJSON(t, out, &refused)
	if refused.Response.BlockedBy != "conflict:gate_decided" {
		t.Fatalf("second decision refused with %q", refused.Response.BlockedBy)
	}

	for _, r := range sb.requests {
		if v := r.Header.Get("Authorization"); v != "" {
			t.Errorf("%s %s carried Authorization %q", r.Method, r.URL.Path, v)
		}
	}
}

func TestJSHolderUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
	}{
		{[]string{"--help"}, 0},
		{[]string{}, 2},
		{[]string{"frobnicate"}, 2},
		{[]string{"mandate", "--key", "k.json"}, 2},
		{[]string{"decide", "--session", "s", "--key", "k", "--no-post"}, 2},
		{[]string{"decide", "--session", "s", "--key", "k", "--no-post", "--gate", `{"id":"g"}`}, 2},
		{[]string{"keygen", "--key"}, 2},
	}
	for _, tc := range tests {
		if _, code := runHolder(t, tc.args...); code != tc.code {
			t.Errorf("%q exited %d, want %d", tc.args, code, tc.code)
		}
	}
}
