package holder_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/pierhq/pier/holder"
	"github.com/pierhq/pier/internal/lib/sandboxproof"
)

// session is a sandbox session as the server sees it, for checking holder
// signatures with the server's own code.
type session struct {
	issuer  *sandboxproof.SigningKey
	id      string
	mandate string
	gate    sandboxproof.Gate
	now     time.Time
}

func newSession(t *testing.T, k *holder.Key) *session {
	t.Helper()
	issuer, err := sandboxproof.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	s := &session{issuer: issuer, id: "sbs_holderTest0001", now: time.Now()}
	m, err := holder.NewMandate(s.id, issuer.KID, s.now)
	if err != nil {
		t.Fatal(err)
	}
	if s.mandate, err = holder.SignMandate(k, m); err != nil {
		t.Fatal(err)
	}
	gp, err := sandboxproof.NewGateParams(s.now)
	if err != nil {
		t.Fatal(err)
	}
	_, gate, err := sandboxproof.IssueAttempt(issuer, sandboxproof.AttemptRequest{
		SessionID: s.id, AttemptID: "sba_holderTest0001", Scenario: sandboxproof.ScenarioApproval,
		AmountMicroUSD: sandboxproof.ApprovalAmountMicroUSD, Mandate: s.mandate,
	}, s.now, &gp)
	if err != nil {
		t.Fatal(err)
	}
	s.gate = *gate
	return s
}

func holderGate(g sandboxproof.Gate) holder.Gate {
	return holder.Gate{ID: g.ID, RequestDigest: g.RequestDigest, Nonce: g.Nonce, Outcome: g.Outcome, ExpiresAt: g.ExpiresAt}
}

func TestSignMandateVerifies(t *testing.T) {
	k, _ := holder.GenerateKey()
	s := newSession(t, k)

	m, err := sandboxproof.VerifyMandate(s.mandate, sandboxproof.MandateCheck{SessionID: s.id, IssuerKID: s.issuer.KID, Now: s.now})
	if err != nil {
		t.Fatalf("the server refuses the holder's mandate: %v", err)
	}
	if m.HolderThumbprint != k.Thumbprint() {
		t.Fatal("the mandate is not bound to the holder key")
	}

	// Independently of the server code: an ES256 JWS with the public key in
	// its header and the format's payload.
	jws, err := jose.ParseSignedCompact(s.mandate, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	h := jws.Signatures[0].Header
	if h.JSONWebKey == nil || !h.JSONWebKey.IsPublic() || h.ExtraHeaders["typ"] != "pier-mandate+jwt" {
		t.Fatalf("unexpected header %+v", h)
	}
	payload, err := jws.Verify(h.JSONWebKey)
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	_ = json.Unmarshal(payload, &claims)
	for name, want := range map[string]any{"kind": "open", "amountUsd": 100.0, "currency": "USD", "fake": true, "sessionId": s.id, "aud": s.issuer.KID} {
		if claims[name] != want {
			t.Errorf("%s = %v, want %v", name, claims[name], want)
		}
	}
	if len(claims) != 9 {
		t.Errorf("mandate has %d members, want 9: %v", len(claims), claims)
	}
}

func TestSignMandateRefusesIncompleteMandates(t *testing.T) {
	k, _ := holder.GenerateKey()
	now := time.Now()
	for name, m := range map[string]holder.Mandate{
		"no session":    {IssuerKID: "kid", Nonce: "n", IssuedAt: now, ExpiresAt: now.Add(time.Hour)},
		"no issuer":     {SessionID: "s", Nonce: "n", IssuedAt: now, ExpiresAt: now.Add(time.Hour)},
		"expires first": {SessionID: "s", IssuerKID: "kid", Nonce: "n", IssuedAt: now, ExpiresAt: now},
	} {
		if _, err := holder.SignMandate(k, m); err == nil {
			t.Errorf("%s: signed", name)
		}
	}
}

func TestSignDecision(t *testing.T) {
	k, _ := holder.GenerateKey()
	other, _ := holder.GenerateKey()
	s := newSession(t, k)
	m, err := sandboxproof.VerifyMandate(s.mandate, sandboxproof.MandateCheck{SessionID: s.id, IssuerKID: s.issuer.KID, Now: s.now})
	if err != nil {
		t.Fatal(err)
	}
	otherGate := holderGate(s.gate)
	otherGate.ID, otherGate.Nonce = "sbg_someOtherGate", "someOtherGateNonce0001"

	tests := []struct {
		name    string
		key     *holder.Key
		gate    holder.Gate
		outcome string
		at      time.Time
		wantErr error // nil: the server accepts it
	}{
		{"approve", k, holderGate(s.gate), holder.Approve, s.now, nil},
		{"deny", k, holderGate(s.gate), holder.Deny, s.now, nil},
		{"another holder's key", other, holderGate(s.gate), holder.Approve, s.now, sandboxproof.ErrWrongKey},
		{"signed for another gate", k, otherGate, holder.Approve, s.now, sandboxproof.ErrMismatch},
		{"after the gate expired", k, holderGate(s.gate), holder.Approve, s.now.Add(sandboxproof.DefaultGateTTL + time.Second), sandboxproof.ErrExpired},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			jws, err := holder.SignDecision(tc.key, s.id, tc.gate, tc.outcome)
			if err != nil {
				t.Fatal(err)
			}
			d, err := sandboxproof.VerifyDecision(jws, sandboxproof.DecisionCheck{SessionID: s.id, Gate: s.gate, HolderThumbprint: m.HolderThumbprint, Now: tc.at})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			}
			if err == nil && d.Outcome != tc.outcome {
				t.Fatalf("outcome %q, want %q", d.Outcome, tc.outcome)
			}
		})
	}

	if _, err := holder.SignDecision(k, s.id, holderGate(s.gate), "maybe"); err == nil {
		t.Error("signed an outcome that is neither approved nor denied")
	}
	odd := holderGate(s.gate)
	odd.Outcome = "charge-200"
	if _, err := holder.SignDecision(k, s.id, odd, holder.Approve); err == nil {
		t.Error("approved a gate that offers an unknown outcome")
	}
}

func TestDecisionIsNotAMandate(t *testing.T) {
	k, _ := holder.GenerateKey()
	s := newSession(t, k)
	jws, err := holder.SignDecision(k, s.id, holderGate(s.gate), holder.Approve)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sandboxproof.VerifyMandate(jws, sandboxproof.MandateCheck{SessionID: s.id, IssuerKID: s.issuer.KID}); err == nil {
		t.Fatal("a gate decision was accepted as a mandate")
	}
	header, _ := base64.RawURLEncoding.DecodeString(strings.Split(jws, ".")[0])
	if !strings.Contains(string(header), `"typ":"pier-gate-decision+jwt"`) {
		t.Fatalf("decision header %s", header)
	}
}
