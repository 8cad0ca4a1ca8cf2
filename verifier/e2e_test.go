package verifier_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/pierhq/pier/holder"
	holderjs "github.com/pierhq/pier/holder/js"
	"github.com/pierhq/pier/internal/lib/sandboxproof"
	"github.com/pierhq/pier/verifier"
	verifierjs "github.com/pierhq/pier/verifier/js"
)

// signer produces the holder's mandate and decision for a session: the Go
// holder library, or sandbox-holder.mjs.
type signer interface {
	mandate(t *testing.T, sessionID, issuerKID string) string
	decide(t *testing.T, sessionID string, gate sandboxproof.Gate) string
}

type goHolder struct{ key *holder.Key }

func (h goHolder) mandate(t *testing.T, sessionID, issuerKID string) string {
	m, err := holder.NewMandate(sessionID, issuerKID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	jws, err := holder.SignMandate(h.key, m)
	if err != nil {
		t.Fatal(err)
	}
	return jws
}

func (h goHolder) decide(t *testing.T, sessionID string, g sandboxproof.Gate) string {
	jws, err := holder.SignDecision(h.key, sessionID, holder.Gate{ID: g.ID, RequestDigest: g.RequestDigest, Nonce: g.Nonce, Outcome: g.Outcome, ExpiresAt: g.ExpiresAt}, holder.Approve)
	if err != nil {
		t.Fatal(err)
	}
	return jws
}

type jsHolder struct {
	node, key string
}

func (h jsHolder) run(t *testing.T, args ...string) map[string]string {
	t.Helper()
	out, err := exec.Command(h.node, append([]string{"../holder/js/sandbox-holder.mjs"}, args...)...).Output()
	if err != nil {
		t.Fatalf("sandbox-holder.mjs %v: %v", args, err)
	}
	var v map[string]string
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func (h jsHolder) mandate(t *testing.T, sessionID, issuerKID string) string {
	return h.run(t, "mandate", "--session", sessionID, "--key", h.key, "--issuer-kid", issuerKID, "--no-post", "--json")["mandate"]
}

func (h jsHolder) decide(t *testing.T, sessionID string, g sandboxproof.Gate) string {
	gate, _ := json.Marshal(g)
	return h.run(t, "decide", "--session", sessionID, "--key", h.key, "--gate", string(gate), "--no-post", "--json")["decision"]
}

// runSession plays a whole sandbox session the way the server does, with the
// server's own checks on every holder signature, and returns the release.
func runSession(t *testing.T, h signer) (sandboxproof.Release, []byte) {
	t.Helper()
	issuer, _ := sandboxproof.GenerateSigningKey()
	proofKey, _ := sandboxproof.GenerateSigningKey()
	now := time.Now()
	sessionID, _ := sandboxproof.NewID(sandboxproof.PrefixSession)

	mandate, err := sandboxproof.VerifyMandate(h.mandate(t, sessionID, issuer.KID), sandboxproof.MandateCheck{SessionID: sessionID, IssuerKID: issuer.KID, Now: now})
	if err != nil {
		t.Fatalf("server refuses the mandate: %v", err)
	}
	allowedID, _ := sandboxproof.NewID(sandboxproof.PrefixAttempt)
	allowed, _, err := sandboxproof.IssueAttempt(issuer, sandboxproof.AttemptRequest{
		SessionID: sessionID, AttemptID: allowedID, Scenario: sandboxproof.ScenarioAllowed,
		AmountMicroUSD: sandboxproof.AllowedAmountMicroUSD, Mandate: mandate.JWS,
	}, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	approvalID, _ := sandboxproof.NewID(sandboxproof.PrefixAttempt)
	params, _ := sandboxproof.NewGateParams(now)
	approval, gate, err := sandboxproof.IssueAttempt(issuer, sandboxproof.AttemptRequest{
		SessionID: sessionID, AttemptID: approvalID, Scenario: sandboxproof.ScenarioApproval,
		AmountMicroUSD: 1_250_000, Mandate: mandate.JWS, // 1.25 USD: a fractional amount end to end
	}, now, &params)
	if err != nil {
		t.Fatal(err)
	}
	decision, err := sandboxproof.VerifyDecision(h.decide(t, sessionID, *gate), sandboxproof.DecisionCheck{
		SessionID: sessionID, Gate: *gate, HolderThumbprint: mandate.HolderThumbprint, Now: now,
	})
	if err != nil {
		t.Fatalf("server refuses the decision: %v", err)
	}
	proofID, _ := sandboxproof.NewProofID()
	proof, err := sandboxproof.MintProof(proofKey, sandboxproof.ProofInput{
		ProofID: proofID, SessionID: sessionID, IssuedAt: now, Mandate: mandate.JWS,
		Attempts: []sandboxproof.Attempt{allowed, approval},
		Gates: []sandboxproof.DecidedGate{{
			Gate: *gate, AttemptID: approvalID, Decision: decision.JWS, DecidedAt: now, DecidedOutcome: decision.Outcome,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	proofJWKS, _ := sandboxproof.PublicJWKS(proofKey)
	issuerJWKS, _ := sandboxproof.PublicJWKS(issuer)
	provenance, _ := sandboxproof.BuildProvenance(sandboxproof.Provenance{ProofID: proofID, ObservedAt: now, Build: map[string]any{"version": "test"}})
	rel := sandboxproof.Release{
		ProofID: proofID, Proof: proof, ProofJWKS: proofJWKS, IssuerJWKS: issuerJWKS,
		Provenance: provenance, VerifierMJS: verifierjs.VerifierMJS, HolderMJS: holderjs.HolderMJS,
	}
	manifest, err := rel.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	return rel, manifest
}

// serveRelease serves the release on one host and the API on another, as
// the two public hosts may be split.
func serveRelease(t *testing.T, rel sandboxproof.Release, manifest []byte) (base, api string) {
	t.Helper()
	static := http.NewServeMux()
	static.HandleFunc("GET "+sandboxproof.PathManifest, func(w http.ResponseWriter, _ *http.Request) { w.Write(manifest) })
	for path, body := range rel.Files() {
		static.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) { w.Write(body) })
	}
	apiMux := http.NewServeMux()
	apiMux.HandleFunc("GET /v1/sandbox/proofs/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != rel.ProofID {
			http.NotFound(w, r)
			return
		}
		// Re-encoded compactly, as an API would: equal as JSON, not as bytes.
		var data any
		_ = json.Unmarshal(rel.Proof, &data)
		json.NewEncoder(w).Encode(map[string]any{"data": data, "actions": []any{map[string]any{"kind": "stop", "reason": "done"}}, "formatVersion": "1"})
	})
	s, a := httptest.NewServer(static), httptest.NewServer(apiMux)
	t.Cleanup(s.Close)
	t.Cleanup(a.Close)
	return s.URL, a.URL
}

func TestEndToEnd(t *testing.T) {
	goKey, _ := holder.GenerateKey()
	holders := map[string]signer{"go holder": goHolder{goKey}}
	nodePath := nodeOrSkipLater(t)
	if nodePath != "" {
		key := filepath.Join(t.TempDir(), "holder.jwk.json")
		if out, err := exec.Command(nodePath, "../holder/js/sandbox-holder.mjs", "keygen", "--key", key).CombinedOutput(); err != nil {
			t.Fatalf("keygen: %v: %s", err, out)
		}
		holders["js holder"] = jsHolder{node: nodePath, key: key}
	}
	for name, h := range holders {
		t.Run(name, func(t *testing.T) {
			rel, manifest := runSession(t, h)
			base, api := serveRelease(t, rel, manifest)

			report, err := verifier.Verify(context.Background(), verifier.Options{BaseURL: base, APIURL: api, TamperCheck: true})
			if err != nil {
				t.Fatal(err)
			}
			if report.Verdict != verifier.Accept || report.ProofID != rel.ProofID {
				t.Fatalf("Go verifier: %s\n%s", report.Verdict, checksText(report))
			}
			if nodePath == "" {
				return
			}
			js, code := runNodeVerifier(t, nodePath, "--base-url", base, "--api-url", api)
			if js.Verdict != verifier.Accept || code != 0 {
				t.Fatalf("JS verifier: %s (exit %d)\n%s", js.Verdict, code, checksText(js))
			}
			if a, b := checkIDs(report), checkIDs(js); a != b {
				t.Errorf("the verifiers ran different checks:\nGo: %s\nJS: %s", a, b)
			}

			// Without --api-url the API is looked for on the base host,
			// which does not serve it here.
			if js, _ := runNodeVerifier(t, nodePath, "--base-url", base); js.Failed() == nil || js.Failed().ID != verifier.CheckAPIProof {
				t.Errorf("JS verifier without the API host: %+v", js.Failed())
			}
		})
	}
}

func TestVerifyRejectsUnusableOptions(t *testing.T) {
	for _, opts := range []verifier.Options{
		{},
		{BaseURL: "example.com"},
		{BaseURL: "ftp://example.com"},
		{BaseURL: "http://example.com", APIURL: "/relative"},
	} {
		if _, err := verifier.Verify(context.Background(), opts); err == nil {
			t.Errorf("%+v: accepted", opts)
		}
	}
}

func TestVerifyReportsUnreachableHost(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	report, err := verifier.Verify(context.Background(), verifier.Options{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if report.Verdict != verifier.Reject || report.Failed().ID != verifier.CheckManifest {
		t.Fatalf("got %+v", report)
	}
}
