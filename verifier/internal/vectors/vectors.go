// Package vectors writes the shared test vectors under
// verifier/testdata/vectors: one directory per case, holding the files a
// reference release serves plus api-proof.json (the API's response) and
// expect.json (the verdict both verifiers must reach, and the check that
// must fail first).
//
// Valid pieces come from internal/lib/sandboxproof, the same code the server
// mints with; the broken ones are built here by hand. All signatures are
// RFC 6979 deterministic and the keys live in testdata, so regenerating
// gives the same bytes.
package vectors

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pierhq/pier/internal/lib/sandboxproof"
)

// Expect is the content of expect.json.
type Expect struct {
	Verdict     string `json:"verdict"`
	FailedCheck string `json:"failedCheck,omitempty"`
	Reason      string `json:"reason"`
}

// File names inside a vector directory.
const (
	FileManifest    = "sandbox-reference.json"
	FileProof       = "proof.json"
	FileProofJWKS   = "proof-jwks.json"
	FileIssuerJWKS  = "issuer-jwks.json"
	FileProvenance  = "provenance.json"
	FileVerifierMJS = "verify-sandbox-proof.mjs"
	FileHolderMJS   = "sandbox-holder.mjs"
	FileAPIProof    = "api-proof.json"
	FileExpect      = "expect.json"
)

// Keys are the fixed keys the vectors are signed with.
type Keys struct {
	Issuer, Proof, Rogue *sandboxproof.SigningKey
	Holder, OtherHolder  *ecdsa.PrivateKey
}

var keyNames = []string{"issuer", "proof", "rogue", "holder", "other-holder"}

// LoadKeys reads the keys from dir, creating any that are missing. Only a
// first run creates keys; after that they are committed and fixed.
func LoadKeys(dir string) (*Keys, error) {
	loaded := map[string]*sandboxproof.SigningKey{}
	for _, name := range keyNames {
		path := filepath.Join(dir, name+".jwk.json")
		data, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			k, err := sandboxproof.GenerateSigningKey()
			if err != nil {
				return nil, err
			}
			if data, err = k.MarshalPrivateJWK(); err != nil {
				return nil, err
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			// Test keys sign nothing real, but keep the habit of 0600.
			if err := os.WriteFile(path, data, 0o600); err != nil {
				return nil, err
			}
		} else if err != nil {
			return nil, err
		}
		k, err := sandboxproof.ParseSigningKey(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		loaded[name] = k
	}
	return &Keys{
		Issuer: loaded["issuer"], Proof: loaded["proof"], Rogue: loaded["rogue"],
		Holder: loaded["holder"].Private, OtherHolder: loaded["other-holder"].Private,
	}, nil
}

// Fixed values of the base scenario.
var (
	t0         = time.Date(2026, 7, 16, 12, 0, 0, 0, time.UTC)
	sessionID  = "sbs_vectorsSession00000000001"
	proofID    = "sbp_vectorsProof0000000000001"
	verifierJS = []byte("// stand-in for verify-sandbox-proof.mjs in the test vectors\n")
	holderJS   = []byte("// stand-in for sandbox-holder.mjs in the test vectors\n")
)

// release is one vector's files while it is being built.
type release struct {
	manifest   []byte // nil: computed from the other files
	proof      []byte
	proofJWKS  []byte
	issuerJWKS []byte
	provenance []byte
	apiProof   []byte // nil: an envelope around proof
}

// Generate writes every vector into dir, replacing what is there.
func Generate(dir string, keys *Keys) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	for _, c := range cases() {
		rel, err := c.build(keys)
		if err != nil {
			return fmt.Errorf("vector %s: %w", c.name, err)
		}
		if err := rel.write(filepath.Join(dir, c.name), c.expect); err != nil {
			return fmt.Errorf("vector %s: %w", c.name, err)
		}
	}
	return nil
}

func (r *release) write(dir string, expect Expect) error {
	if r.apiProof == nil {
		var data any
		if err := json.Unmarshal(r.proof, &data); err != nil {
			return err
		}
		r.apiProof = envelope(data)
	}
	if r.manifest == nil {
		if err := r.fillManifest(); err != nil {
			return err
		}
	}
	exp, err := indent(expect)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, b := range map[string][]byte{
		FileManifest: r.manifest, FileProof: r.proof, FileProofJWKS: r.proofJWKS,
		FileIssuerJWKS: r.issuerJWKS, FileProvenance: r.provenance,
		FileVerifierMJS: verifierJS, FileHolderMJS: holderJS,
		FileAPIProof: r.apiProof, FileExpect: exp,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func envelope(data any) []byte {
	b, _ := indent(map[string]any{
		"data":          data,
		"actions":       []any{map[string]any{"kind": "stop", "reason": "proof_published"}},
		"formatVersion": "1",
	})
	return b
}

func indent(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// scenario is the session a valid proof records, before it is minted.
type scenario struct {
	keys     *Keys
	mandate  string
	attempts []sandboxproof.Attempt
	gates    []sandboxproof.DecidedGate
	issuedAt time.Time
}

type attemptSpec struct {
	id       string
	scenario string
	micro    int64
	decision string // for approvals: the outcome the holder signs
}

var baseAttempts = []attemptSpec{
	{"sba_allowed01", sandboxproof.ScenarioAllowed, sandboxproof.AllowedAmountMicroUSD, ""},
	{"sba_approval01", sandboxproof.ScenarioApproval, sandboxproof.ApprovalAmountMicroUSD, sandboxproof.DecisionApproved},
}

// newScenario runs the session the way the server does: a holder-signed
// mandate, issuer receipts for each attempt, holder decisions on each gate.
func newScenario(keys *Keys, specs []attemptSpec) (*scenario, error) {
	s := &scenario{keys: keys, issuedAt: t0.Add(10 * time.Minute)}
	s.mandate = holderSign(keys.Holder, sandboxproof.TypMandate, mandateClaims(keys.Issuer.KID))
	if _, err := sandboxproof.VerifyMandate(s.mandate, sandboxproof.MandateCheck{SessionID: sessionID, IssuerKID: keys.Issuer.KID, Now: t0}); err != nil {
		return nil, err
	}
	thumb, err := sandboxproof.Thumbprint(&keys.Holder.PublicKey)
	if err != nil {
		return nil, err
	}
	for i, spec := range specs {
		at := t0.Add(time.Duration(i+1) * time.Minute)
		var params *sandboxproof.GateParams
		if spec.scenario == sandboxproof.ScenarioApproval {
			params = &sandboxproof.GateParams{
				ID:        fmt.Sprintf("sbg_gate%02d", i),
				Nonce:     fmt.Sprintf("vectorsGateNonce%04d", i),
				ExpiresAt: at.Add(sandboxproof.DefaultGateTTL),
			}
		}
		attempt, gate, err := sandboxproof.IssueAttempt(keys.Issuer, sandboxproof.AttemptRequest{
			SessionID: sessionID, AttemptID: spec.id, Scenario: spec.scenario,
			AmountMicroUSD: spec.micro, Mandate: s.mandate,
		}, at, params)
		if err != nil {
			return nil, err
		}
		s.attempts = append(s.attempts, attempt)
		if gate == nil {
			continue
		}
		decision := holderSign(keys.Holder, sandboxproof.TypDecision, decisionClaims(*gate, spec.decision))
		decidedAt := at.Add(30 * time.Second)
		d, err := sandboxproof.VerifyDecision(decision, sandboxproof.DecisionCheck{SessionID: sessionID, Gate: *gate, HolderThumbprint: thumb, Now: decidedAt})
		if err != nil {
			return nil, err
		}
		s.gates = append(s.gates, sandboxproof.DecidedGate{
			Gate: *gate, AttemptID: spec.id, Decision: d.JWS, DecidedAt: decidedAt, DecidedOutcome: d.Outcome,
		})
	}
	return s, nil
}

func mandateClaims(aud string) map[string]any {
	return map[string]any{
		"kind": "open", "amountUsd": 100, "currency": "USD", "fake": true,
		"sessionId": sessionID, "aud": aud,
		"iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix(), "nonce": "vectorsMandateNonce0001",
	}
}

func decisionClaims(g sandboxproof.Gate, outcome string) map[string]any {
	return map[string]any{
		"sessionId": sessionID, "gateId": g.ID, "requestDigest": g.RequestDigest,
		"nonce": g.Nonce, "outcome": outcome, "expiresAt": g.ExpiresAt,
	}
}

// mint signs the scenario with the real minting code and wraps it in a release.
func (s *scenario) mint() (*release, error) {
	proof, err := sandboxproof.MintProof(s.keys.Proof, sandboxproof.ProofInput{
		ProofID: proofID, SessionID: sessionID, IssuedAt: s.issuedAt,
		Mandate: s.mandate, Attempts: s.attempts, Gates: s.gates,
	})
	if err != nil {
		return nil, err
	}
	return s.wrap(proof)
}

func (s *scenario) wrap(proof []byte) (*release, error) {
	proofJWKS, err := sandboxproof.PublicJWKS(s.keys.Proof)
	if err != nil {
		return nil, err
	}
	issuerJWKS, err := sandboxproof.PublicJWKS(s.keys.Issuer)
	if err != nil {
		return nil, err
	}
	provenance, err := sandboxproof.BuildProvenance(sandboxproof.Provenance{
		ProofID: proofID, ObservedAt: s.issuedAt,
		Build: map[string]any{"version": "vectors", "commit": "0000000000000000000000000000000000000000"},
	})
	if err != nil {
		return nil, err
	}
	return &release{proof: proof, proofJWKS: proofJWKS, issuerJWKS: issuerJWKS, provenance: provenance}, nil
}

// --- hand-built JWS, for holder signatures and for the broken cases ---

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func jsonB64(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b64(b)
}

// rawSignature is ES256's R||S, deterministic (RFC 6979).
func rawSignature(priv *ecdsa.PrivateKey, input string) []byte {
	r, s := signRS(priv, input)
	out := make([]byte, 64)
	r.FillBytes(out[:32])
	s.FillBytes(out[32:])
	return out
}

// derSignature is the same signature in ASN.1 DER, which ES256 forbids.
func derSignature(priv *ecdsa.PrivateKey, input string) []byte {
	digest := sha256.Sum256([]byte(input))
	der, err := priv.Sign(nil, digest[:], crypto.SHA256)
	if err != nil {
		panic(err)
	}
	return der
}

func signRS(priv *ecdsa.PrivateKey, input string) (*big.Int, *big.Int) {
	var sig struct{ R, S *big.Int }
	if _, err := asn1.Unmarshal(derSignature(priv, input), &sig); err != nil {
		panic(err)
	}
	return sig.R, sig.S
}

func holderJWK(pub *ecdsa.PublicKey) map[string]any {
	raw, err := pub.Bytes()
	if err != nil {
		panic(err)
	}
	return map[string]any{"kty": "EC", "crv": "P-256", "x": b64(raw[1:33]), "y": b64(raw[33:65])}
}

func holderSign(priv *ecdsa.PrivateKey, typ string, claims any) string {
	protected := jsonB64(map[string]any{"alg": "ES256", "typ": typ, "jwk": holderJWK(&priv.PublicKey)})
	input := protected + "." + jsonB64(claims)
	return input + "." + b64(rawSignature(priv, input))
}

func kidSign(priv *ecdsa.PrivateKey, kid, typ string, claims any) string {
	protected := jsonB64(map[string]any{"alg": "ES256", "kid": kid, "typ": typ})
	input := protected + "." + jsonB64(claims)
	return input + "." + b64(rawSignature(priv, input))
}

// jwsParts splits a compact JWS and decodes its payload.
func jwsParts(compact string) (protected string, claims map[string]any, sig string) {
	parts := strings.Split(compact, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(raw, &claims); err != nil {
		panic(err)
	}
	return parts[0], claims, parts[2]
}

func hs256(key []byte, input string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(input))
	return m.Sum(nil)
}

// proofPayload decodes a minted proof.json's payload for editing.
func proofPayload(proof []byte) map[string]any {
	var flat map[string]string
	if err := json.Unmarshal(proof, &flat); err != nil {
		panic(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(flat["payload"])
	if err != nil {
		panic(err)
	}
	var payload map[string]any
	if err := json.Unmarshal(raw, &payload); err != nil {
		panic(err)
	}
	return payload
}

// flattened re-signs a proof payload under any header with any signer: the
// broken cases need a valid outer signature so that only the inner fault is
// left for the verifier to find.
func flattened(header map[string]any, payload any, sign func(input string) []byte) []byte {
	protected := jsonB64(header)
	body := jsonB64(payload)
	b, err := indent(map[string]string{"protected": protected, "payload": body, "signature": b64(sign(protected + "." + body))})
	if err != nil {
		panic(err)
	}
	return b
}

func (s *scenario) resign(payload any) []byte {
	header := map[string]any{"alg": "ES256", "kid": s.keys.Proof.KID, "typ": sandboxproof.TypProof}
	return flattened(header, payload, func(in string) []byte { return rawSignature(s.keys.Proof.Private, in) })
}
