package sandboxproof

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestUSDNumber(t *testing.T) {
	tests := []struct {
		micro int64
		want  string
		ok    bool
	}{
		{5_000_000, "5", true},
		{12_500_000, "12.5", true},
		{10_000, "0.01", true},
		{1_250_000, "1.25", true},
		{100_000_000, "100", true},
		{0, "", false},
		{-10_000, "", false},
		{100_010_000, "", false},
		{5_000, "", false}, // half a cent
	}
	for _, tc := range tests {
		got, err := USDNumber(tc.micro)
		if (err == nil) != tc.ok || string(got) != tc.want {
			t.Errorf("USDNumber(%d) = %q, %v; want %q, ok=%v", tc.micro, got, err, tc.want, tc.ok)
		}
	}
}

// TestRequestDigestKnownAnswer pins §3.2's canonical form: changing it breaks
// every verifier in the field.
func TestRequestDigestKnownAnswer(t *testing.T) {
	got, err := RequestDigest(AttemptRequest{
		SessionID: "sbs_example", AttemptID: "sba_example", Scenario: ScenarioAllowed,
		AmountMicroUSD: 12_500_000, Mandate: "a.b.c",
	})
	if err != nil {
		t.Fatal(err)
	}
	// Computed independently (Python hashlib) over
	// {"amountUsd":12.5,"attemptId":"sba_example","currency":"USD","kind":"pier.sandbox.attempt.v1",
	//  "mandateSha256":sha256("a.b.c"),"scenario":"allowed","sessionId":"sbs_example"}.
	const want = "ccaf14ea6855411cf882f22dd17eb7f4dc1ed34a91434696fe8a897ddc03c11d"
	if got != want {
		t.Fatalf("digest %s, want %s", got, want)
	}

	for name, r := range map[string]AttemptRequest{
		"session id needing escapes": {SessionID: `sbs_"x`, AttemptID: "a", Scenario: ScenarioAllowed, AmountMicroUSD: 10_000},
		"unknown scenario":           {SessionID: "s", AttemptID: "a", Scenario: "other", AmountMicroUSD: 10_000},
		"no amount":                  {SessionID: "s", AttemptID: "a", Scenario: ScenarioAllowed},
	} {
		if _, err := RequestDigest(r); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// jwsBuilder makes holder signatures with full control over every part, to
// feed the server-side checks what a careless or hostile holder might send.
type jwsBuilder struct {
	priv   *ecdsa.PrivateKey
	header map[string]any
	claims map[string]any
	sig    func(input string) []byte
}

func newHolderKey(t *testing.T) *ecdsa.PrivateKey {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv
}

func publicJWK(pub *ecdsa.PublicKey) map[string]any {
	raw, _ := pub.Bytes()
	return map[string]any{"kty": "EC", "crv": "P-256", "x": b64(raw[1:33]), "y": b64(raw[33:65])}
}

func (b jwsBuilder) build() string {
	h, _ := json.Marshal(b.header)
	c, _ := json.Marshal(b.claims)
	input := b64(h) + "." + b64(c)
	sig := b.sig
	if sig == nil {
		sig = func(in string) []byte { s, _ := signES256(b.priv, in); return s }
	}
	return input + "." + b64(sig(input))
}

func mandateBuilder(priv *ecdsa.PrivateKey, sessionID, aud string, now time.Time) jwsBuilder {
	return jwsBuilder{
		priv:   priv,
		header: map[string]any{"alg": "ES256", "typ": TypMandate, "jwk": publicJWK(&priv.PublicKey)},
		claims: map[string]any{
			"kind": "open", "amountUsd": 100, "currency": "USD", "fake": true, "sessionId": sessionID,
			"aud": aud, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "nonce": "mandateNonce00000001",
		},
	}
}

func TestVerifyMandate(t *testing.T) {
	now := time.Date(2026, 7, 16, 12, 0, 0, 0, time.UTC)
	holderKey, otherKey := newHolderKey(t), newHolderKey(t)
	check := MandateCheck{SessionID: "sbs_s1", IssuerKID: "issuer-kid", Now: now}
	tests := []struct {
		name  string
		edit  func(b *jwsBuilder)
		check func(c *MandateCheck)
		want  error
	}{
		{"valid", nil, nil, nil},
		{"other session", nil, func(c *MandateCheck) { c.SessionID = "sbs_s2" }, ErrMismatch},
		{"other audience", nil, func(c *MandateCheck) { c.IssuerKID = "proof-kid" }, ErrMismatch},
		{"expired", nil, func(c *MandateCheck) { c.Now = now.Add(2 * time.Hour) }, ErrExpired},
		{"issued in the future", nil, func(c *MandateCheck) { c.Now = now.Add(-time.Hour) }, ErrNotYetValid},
		{"lives over a day", func(b *jwsBuilder) { b.claims["exp"] = now.Add(25 * time.Hour).Unix() }, nil, ErrMalformed},
		{"amount 99", func(b *jwsBuilder) { b.claims["amountUsd"] = 99 }, nil, ErrMalformed},
		{"real money", func(b *jwsBuilder) { b.claims["fake"] = false }, nil, ErrMalformed},
		{"case-variant member", func(b *jwsBuilder) { b.claims["AmountUsd"] = 1000 }, nil, ErrMalformed},
		{"missing nonce", func(b *jwsBuilder) { delete(b.claims, "nonce") }, nil, ErrMalformed},
		{"fractional iat", func(b *jwsBuilder) { b.claims["iat"] = float64(now.Unix()) + 0.5 }, nil, ErrMalformed},
		{"decision typ", func(b *jwsBuilder) { b.header["typ"] = TypDecision }, nil, ErrMalformed},
		{"extra header", func(b *jwsBuilder) { b.header["kid"] = "x" }, nil, ErrMalformed},
		{"private jwk", func(b *jwsBuilder) {
			d, _ := b.priv.Bytes()
			jwk := publicJWK(&b.priv.PublicKey)
			jwk["d"] = b64(d)
			b.header["jwk"] = jwk
		}, nil, ErrMalformed},
		{"alg none", func(b *jwsBuilder) {
			b.header["alg"] = "none"
			b.sig = func(string) []byte { return nil }
		}, nil, ErrBadSignature},
		{"HS256", func(b *jwsBuilder) {
			b.header["alg"] = "HS256"
			b.sig = func(in string) []byte { m := hmac.New(sha256.New, []byte("k")); m.Write([]byte(in)); return m.Sum(nil) }
		}, nil, ErrBadSignature},
		{"DER signature", func(b *jwsBuilder) {
			b.sig = func(in string) []byte { d := sha256.Sum256([]byte(in)); s, _ := b.priv.Sign(nil, d[:], nil); return s }
		}, nil, ErrBadSignature},
		{"63-byte signature", func(b *jwsBuilder) {
			b.sig = func(in string) []byte { s, _ := signES256(b.priv, in); return s[:63] }
		}, nil, ErrBadSignature},
		{"signed by another key", func(b *jwsBuilder) {
			b.sig = func(in string) []byte { s, _ := signES256(otherKey, in); return s }
		}, nil, ErrBadSignature},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := mandateBuilder(holderKey, "sbs_s1", "issuer-kid", now)
			if tc.edit != nil {
				tc.edit(&b)
			}
			c := check
			if tc.check != nil {
				tc.check(&c)
			}
			m, err := VerifyMandate(b.build(), c)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if want, _ := Thumbprint(&holderKey.PublicKey); m.HolderThumbprint != want {
					t.Fatal("wrong holder thumbprint")
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}

	t.Run("non-canonical base64", func(t *testing.T) {
		jws := mandateBuilder(holderKey, "sbs_s1", "issuer-kid", now).build()
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		last := strings.IndexByte(alphabet, jws[len(jws)-1])
		if _, err := VerifyMandate(jws[:len(jws)-1]+string(alphabet[last|1]), check); !errors.Is(err, ErrMalformed) {
			t.Fatalf("got %v", err)
		}
	})
}

// session sets up a registered mandate and an open gate.
func session(t *testing.T) (issuer *SigningKey, holder *ecdsa.PrivateKey, m *Mandate, gate Gate, now time.Time) {
	t.Helper()
	now = time.Date(2026, 7, 16, 12, 0, 0, 0, time.UTC)
	issuer, _ = GenerateSigningKey()
	holder = newHolderKey(t)
	m, err := VerifyMandate(mandateBuilder(holder, "sbs_s1", issuer.KID, now).build(), MandateCheck{SessionID: "sbs_s1", IssuerKID: issuer.KID, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	_, g, err := IssueAttempt(issuer, AttemptRequest{
		SessionID: "sbs_s1", AttemptID: "sba_a2", Scenario: ScenarioApproval, AmountMicroUSD: ApprovalAmountMicroUSD, Mandate: m.JWS,
	}, now, &GateParams{ID: "sbg_g1", Nonce: "gateNonce00000001", ExpiresAt: now.Add(DefaultGateTTL)})
	if err != nil {
		t.Fatal(err)
	}
	return issuer, holder, m, *g, now
}

func decisionBuilder(priv *ecdsa.PrivateKey, g Gate, outcome string) jwsBuilder {
	return jwsBuilder{
		priv:   priv,
		header: map[string]any{"alg": "ES256", "typ": TypDecision, "jwk": publicJWK(&priv.PublicKey)},
		claims: map[string]any{
			"sessionId": "sbs_s1", "gateId": g.ID, "requestDigest": g.RequestDigest,
			"nonce": g.Nonce, "outcome": outcome, "expiresAt": g.ExpiresAt,
		},
	}
}

func TestVerifyDecision(t *testing.T) {
	_, holder, m, gate, now := session(t)
	tests := []struct {
		name string
		edit func(b *jwsBuilder)
		at   time.Duration
		want error
	}{
		{"approved", nil, 0, nil},
		{"denied", func(b *jwsBuilder) { b.claims["outcome"] = DecisionDenied }, 0, nil},
		{"in the gate's last second", nil, DefaultGateTTL + 999*time.Millisecond, nil},
		{"after expiry", nil, DefaultGateTTL + time.Second, ErrExpired},
		{"unknown outcome", func(b *jwsBuilder) { b.claims["outcome"] = "maybe" }, 0, ErrMalformed},
		{"other gate", func(b *jwsBuilder) { b.claims["gateId"] = "sbg_g2" }, 0, ErrMismatch},
		{"other nonce", func(b *jwsBuilder) { b.claims["nonce"] = "gateNonce00000002" }, 0, ErrMismatch},
		{"other session", func(b *jwsBuilder) { b.claims["sessionId"] = "sbs_s2" }, 0, ErrMismatch},
		{"extended expiry", func(b *jwsBuilder) { b.claims["expiresAt"] = FormatTime(now.Add(time.Hour)) }, 0, ErrMismatch},
		{"mandate typ", func(b *jwsBuilder) { b.header["typ"] = TypMandate }, 0, ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := decisionBuilder(holder, gate, DecisionApproved)
			if tc.edit != nil {
				tc.edit(&b)
			}
			_, err := VerifyDecision(b.build(), DecisionCheck{SessionID: "sbs_s1", Gate: gate, HolderThumbprint: m.HolderThumbprint, Now: now.Add(tc.at)})
			if (tc.want == nil && err != nil) || !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	other := newHolderKey(t)
	if _, err := VerifyDecision(decisionBuilder(other, gate, DecisionApproved).build(), DecisionCheck{SessionID: "sbs_s1", Gate: gate, HolderThumbprint: m.HolderThumbprint, Now: now}); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("another holder's decision: got %v", err)
	}
}

func TestIssueAttempt(t *testing.T) {
	issuer, _, m, _, now := session(t)
	req := AttemptRequest{SessionID: "sbs_s1", AttemptID: "sba_a1", Scenario: ScenarioAllowed, AmountMicroUSD: AllowedAmountMicroUSD, Mandate: m.JWS}
	a, g, err := IssueAttempt(issuer, req, now, nil)
	if err != nil || g != nil || a.Outcome != OutcomeCharged || a.AmountUSD != "5" {
		t.Fatalf("allowed attempt: %+v, %+v, %v", a, g, err)
	}
	if _, _, err := IssueAttempt(issuer, req, m.ExpiresAt.Add(time.Second), nil); !errors.Is(err, ErrExpired) {
		t.Errorf("after the mandate expired: %v", err)
	}
	if _, _, err := IssueAttempt(issuer, req, now, &GateParams{ID: "sbg_x", Nonce: "gateNonce00000009"}); err == nil {
		t.Error("an allowed attempt opened a gate")
	}
	req.Scenario = ScenarioApproval
	if _, _, err := IssueAttempt(issuer, req, now, nil); err == nil {
		t.Error("an approval attempt without a gate was issued")
	}
	stranger, _ := GenerateSigningKey()
	if _, _, err := IssueAttempt(stranger, req, now, &GateParams{ID: "sbg_x", Nonce: "gateNonce00000009"}); !errors.Is(err, ErrMismatch) {
		t.Errorf("an issuer the mandate does not name: %v", err)
	}
}

func TestMintProofRefusesWhatCannotVerify(t *testing.T) {
	issuer, holder, m, gate, now := session(t)
	proofKey, _ := GenerateSigningKey()
	allowed, _, _ := IssueAttempt(issuer, AttemptRequest{SessionID: "sbs_s1", AttemptID: "sba_a1", Scenario: ScenarioAllowed, AmountMicroUSD: AllowedAmountMicroUSD, Mandate: m.JWS}, now, nil)
	approval, _, _ := IssueAttempt(issuer, AttemptRequest{SessionID: "sbs_s1", AttemptID: "sba_a2", Scenario: ScenarioApproval, AmountMicroUSD: ApprovalAmountMicroUSD, Mandate: m.JWS}, now, &GateParams{ID: gate.ID, Nonce: gate.Nonce, ExpiresAt: now.Add(DefaultGateTTL)})
	decided := DecidedGate{Gate: gate, AttemptID: "sba_a2", Decision: decisionBuilder(holder, gate, DecisionApproved).build(), DecidedAt: now, DecidedOutcome: DecisionApproved}
	base := func() ProofInput {
		return ProofInput{ProofID: "sbp_abcdefghijklmnopqrstuv", SessionID: "sbs_s1", IssuedAt: now, Mandate: m.JWS,
			Attempts: []Attempt{allowed, approval}, Gates: []DecidedGate{decided}}
	}
	if _, err := MintProof(proofKey, base()); err != nil {
		t.Fatalf("a complete session: %v", err)
	}
	tests := map[string]func(p *ProofInput){
		"short proof id":      func(p *ProofInput) { p.ProofID = "sbp_short" },
		"no allowed attempt":  func(p *ProofInput) { p.Attempts = p.Attempts[1:] },
		"no gate":             func(p *ProofInput) { p.Gates = nil },
		"undecided gate":      func(p *ProofInput) { p.Gates[0].DecidedOutcome = "" },
		"decided too late":    func(p *ProofInput) { p.Gates[0].DecidedAt = now.Add(DefaultGateTTL + time.Second) },
		"gate of no attempt":  func(p *ProofInput) { p.Gates[0].AttemptID = "sba_a1" },
		"two gates, one try":  func(p *ProofInput) { p.Gates = append(p.Gates, decided) },
		"digest of elsewhere": func(p *ProofInput) { p.Gates[0].RequestDigest = allowed.RequestDigest },
	}
	for name, edit := range tests {
		in := base()
		in.Gates = append([]DecidedGate(nil), in.Gates...)
		edit(&in)
		if _, err := MintProof(proofKey, in); err == nil {
			t.Errorf("%s: minted", name)
		}
	}
}

func TestReleaseManifest(t *testing.T) {
	rel := Release{
		ProofID: "sbp_abcdefghijklmnopqrstuv", Proof: []byte("p"), ProofJWKS: []byte("pj"), IssuerJWKS: []byte("ij"),
		Provenance: []byte("pv"), VerifierMJS: []byte("v"), HolderMJS: []byte("h"),
	}
	b, err := rel.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"state": "available", "proofVersion": "v1", "proofId": rel.ProofID,
		"artifactSha256": SHA256Hex([]byte("p")), "proofJwksSha256": SHA256Hex([]byte("pj")),
		"issuerJwksSha256": SHA256Hex([]byte("ij")), "provenanceSha256": SHA256Hex([]byte("pv")),
		"verifierSha256": SHA256Hex([]byte("v")), "holderCliSha256": SHA256Hex([]byte("h")),
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %q, want %q", k, m[k], v)
		}
	}
	if len(m) != len(want) {
		t.Errorf("manifest has members %v", m)
	}
	rel.Provenance = nil
	if _, err := rel.Manifest(); err == nil {
		t.Error("a release without provenance got a manifest")
	}

	pending, _ := PendingManifest([]byte("v"), []byte("h"))
	var p struct {
		State        string
		Verification map[string]string
	}
	_ = json.Unmarshal(pending, &p)
	if p.State != StatePending || p.Verification["holderCliSha256"] != SHA256Hex([]byte("h")) {
		t.Errorf("pending manifest %s", pending)
	}
}

func TestSigningKeyRoundTrip(t *testing.T) {
	k, _ := GenerateSigningKey()
	b, err := k.MarshalPrivateJWK()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseSigningKey(b)
	if err != nil || back.KID != k.KID || !back.Private.Equal(k.Private) {
		t.Fatalf("round trip: %v", err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	m["kid"] = "renamed"
	edited, _ := json.Marshal(m)
	if _, err := ParseSigningKey(edited); err == nil {
		t.Error("a key file with a foreign kid was accepted")
	}
	jwks, _ := PublicJWKS(k)
	if strings.Contains(string(jwks), `"d"`) {
		t.Error("the public JWKS carries the private key")
	}
}
