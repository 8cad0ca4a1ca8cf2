package bench

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/pierhq/pier/holder"
	"github.com/pierhq/pier/internal/lib/sandboxproof"
	"github.com/pierhq/pier/verifier"
)

// BenchmarkVerifySandboxProof measures the auditor's verification, the code
// `pier verify-sandbox-proof` runs, against a local Pier, and compares its
// ES256 verification rate with crypto/ecdsa's P-256 Verify measured in the
// same run (the peer, as `go test crypto/ecdsa -bench Verify/P256` runs it).
//
// PIER_BENCH_BASE_URL names a running server (bench/verify.sh starts
// one); without it an in-process server is used.
//
// Sub-benchmarks, each reporting es256/s and ratio (es256/s over the peer's):
//
//   - end-to-end: downloads and verifies the reference release with the
//     tamper check, as the command does: every byte over loopback HTTP.
//   - reference: the same release already downloaded (verifier.VerifyFiles).
//   - per-signature: the marginal cost of a signature: a release whose proof
//     carries 32 attempts and 31 gate decisions, minted by the server through
//     its API, against the reference release; the fixed work of a run
//     (hashing the scripts, the manifest and JWKS checks) cancels out.
func BenchmarkVerifySandboxProof(b *testing.B) {
	base := os.Getenv("PIER_BENCH_BASE_URL")
	if base == "" {
		base = pierServer(b).URL
	}
	ref := download(b, base, "")
	wide := wideRelease(b, base, ref)
	refSigs, wideSigs := signatures(b, ref.Proof)+1, signatures(b, wide.Proof)+1 // +1: the tamper check's
	for name, f := range map[string]verifier.Files{"reference": ref, "wide": wide} {
		if r := verifier.VerifyFiles(f, true); r.Verdict != verifier.Accept {
			b.Fatalf("%s release rejected: %+v", name, r.Failed())
		}
	}

	var peerRate float64
	b.Run("ecdsa-P256", func(b *testing.B) {
		priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		digest := sha256.Sum256([]byte("testing"))
		sig, _ := ecdsa.SignASN1(rand.Reader, priv, digest[:])
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if !ecdsa.VerifyASN1(&priv.PublicKey, digest[:], sig) {
				b.Fatal("verify failed")
			}
		}
		peerRate = float64(b.N) / b.Elapsed().Seconds()
		b.ReportMetric(peerRate, "es256/s")
	})
	report := func(b *testing.B, sigs float64, d time.Duration) {
		rate := sigs / d.Seconds()
		b.ReportMetric(rate, "es256/s")
		if peerRate > 0 {
			b.ReportMetric(rate/peerRate, "ratio")
		}
	}
	b.Run("end-to-end", func(b *testing.B) {
		c := &http.Client{}
		for i := 0; i < b.N; i++ {
			r, err := verifier.Verify(context.Background(), verifier.Options{BaseURL: base, TamperCheck: true, HTTPClient: c})
			if err != nil || r.Verdict != verifier.Accept {
				b.Fatalf("rejected: %v %+v", err, r.Failed())
			}
		}
		report(b, float64(refSigs*b.N), b.Elapsed())
	})
	b.Run("reference", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			verifier.VerifyFiles(ref, true)
		}
		report(b, float64(refSigs*b.N), b.Elapsed())
	})
	b.Run("per-signature", func(b *testing.B) {
		var tRef, tWide time.Duration
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			verifier.VerifyFiles(ref, true)
			t1 := time.Now()
			verifier.VerifyFiles(wide, true)
			tRef += t1.Sub(t0)
			tWide += time.Since(t1)
		}
		report(b, float64((wideSigs-refSigs)*b.N), tWide-tRef)
	})
}

// download fetches the reference release and the API's answer for its
// proof (or for proofID).
func download(b *testing.B, base, proofID string) verifier.Files {
	c := &http.Client{}
	get := func(path string) []byte { return do(b, c, "GET", base+path, nil) }
	f := verifier.Files{
		Manifest: get(sandboxproof.PathManifest), Proof: get(sandboxproof.PathProof), ProofJWKS: get(sandboxproof.PathProofJWKS),
		IssuerJWKS: get(sandboxproof.PathIssuerJWKS), Provenance: get(sandboxproof.PathProvenance),
		VerifierMJS: get(sandboxproof.PathVerifierMJS), HolderMJS: get(sandboxproof.PathHolderMJS),
	}
	if proofID == "" {
		var m struct{ ProofID string }
		json.Unmarshal(f.Manifest, &m)
		proofID = m.ProofID
	}
	f.APIResponse = get("/v1/sandbox/proofs/" + proofID)
	return f
}

// wideRelease runs a session with as many signatures as a proof holds
// through the server's API (31 approvals, 4 approved and 27 denied, then an
// allowed attempt), and lays its proof out as a release under the
// published keys.
func wideRelease(b *testing.B, base string, ref verifier.Files) verifier.Files {
	c := &http.Client{}
	post := func(path string, body any, h http.Header) map[string]any {
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", base+path, bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		var env map[string]any
		json.NewDecoder(resp.Body).Decode(&env)
		if resp.StatusCode >= 300 {
			b.Fatalf("POST %s: %d %v", path, resp.StatusCode, env)
		}
		return env["data"].(map[string]any)
	}
	created := post("/v1/sandbox/sessions", nil, nil)
	id := created["session"].(map[string]any)["id"].(string)
	authz := http.Header{"Authorization": {created["authorizationHeader"].(string)}}
	key, _ := holder.GenerateKey()
	issuer, err := holder.FetchIssuerKey(context.Background(), base)
	if err != nil {
		b.Fatal(err)
	}
	m, _ := holder.NewMandate(id, issuer.KID, time.Now())
	mandate, _ := holder.SignMandate(key, m)
	post("/v1/sandbox/sessions/"+id+"/mandate", map[string]string{"mandate": mandate, "registrationSecret": created["registrationSecret"].(string)}, nil)
	n := 0
	attempt := func(scenario string) map[string]any {
		n++
		h := authz.Clone()
		h.Set("Idempotency-Key", fmt.Sprintf("attempt-%d", n))
		return post("/v1/sandbox/sessions/"+id+"/attempts", map[string]string{"scenario": scenario}, h)
	}
	for i := 0; i < 31; i++ {
		g := attempt("approval")["gate"].(map[string]any)
		gate := holder.Gate{ID: g["id"].(string), RequestDigest: g["requestDigest"].(string), Nonce: g["nonce"].(string),
			Outcome: g["outcome"].(string), ExpiresAt: g["expiresAt"].(string)}
		outcome := holder.Deny
		if i < 4 {
			outcome = holder.Approve
		}
		d, _ := holder.SignDecision(key, id, gate, outcome)
		post("/v1/sandbox/sessions/"+id+"/gates/"+gate.ID+"/decision", map[string]string{"decision": d}, nil)
	}
	proofID, _ := attempt("allowed")["proofId"].(string)
	if proofID == "" {
		b.Fatal("the wide session was not proven")
	}
	f := download(b, base, proofID)
	var env struct{ Data json.RawMessage }
	json.Unmarshal(f.APIResponse, &env)
	f.Proof = env.Data
	f.Provenance, _ = sandboxproof.BuildProvenance(sandboxproof.Provenance{ProofID: proofID, ObservedAt: time.Now()})
	f.Manifest, err = sandboxproof.Release{ProofID: proofID, Proof: f.Proof, ProofJWKS: f.ProofJWKS, IssuerJWKS: f.IssuerJWKS,
		Provenance: f.Provenance, VerifierMJS: f.VerifierMJS, HolderMJS: f.HolderMJS}.Manifest()
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// signatures counts the ES256 signatures a proof carries: the proof's own,
// the mandate's, one receipt per attempt and one decision per gate.
func signatures(b *testing.B, proof []byte) int {
	var jws struct{ Payload string }
	json.Unmarshal(proof, &jws)
	raw, err := base64.RawURLEncoding.DecodeString(jws.Payload)
	if err != nil {
		b.Fatal(err)
	}
	var p struct{ Attempts, Gates []json.RawMessage }
	if err := json.Unmarshal(raw, &p); err != nil {
		b.Fatal(err)
	}
	return 2 + len(p.Attempts) + len(p.Gates)
}
