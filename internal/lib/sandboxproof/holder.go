package sandboxproof

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Mandate is a registered mandate as the server keeps it.
type Mandate struct {
	// JWS is the compact JWS exactly as the holder sent it; proofs embed it
	// verbatim, so store this string and nothing re-encoded.
	JWS       string
	SessionID string
	Audience  string
	Nonce     string
	IssuedAt  time.Time
	ExpiresAt time.Time
	// HolderThumbprint names the holder key. Gate decisions must come from
	// the same key.
	HolderThumbprint string
}

// MandateCheck is what the server expects of a mandate.
type MandateCheck struct {
	SessionID string
	IssuerKID string
	// Now is the server's clock; zero skips the time checks, which is what
	// re-reading a stored mandate needs.
	Now time.Time
}

// maxMandateLifetime and maxClockSkew bound what a holder may claim.
const (
	maxMandateLifetime = 24 * time.Hour
	maxClockSkew       = 300 * time.Second
)

// VerifyMandate checks a mandate posted to POST /v1/sandbox/sessions/{id}/mandate.
func VerifyMandate(jws string, c MandateCheck) (*Mandate, error) {
	h, err := verifyHolderJWS(jws, TypMandate)
	if err != nil {
		return nil, err
	}
	m, err := decodeMembers(h.members, []string{"kind", "amountUsd", "currency", "fake", "sessionId", "aud", "iat", "exp", "nonce"})
	if err != nil {
		return nil, err
	}
	var (
		kind, currency, sessionID, aud, nonce string
		amount                                float64
		fake                                  bool
		iat, exp                              float64
	)
	if err := m.get("kind", &kind); err != nil {
		return nil, err
	}
	if err := m.get("amountUsd", &amount); err != nil {
		return nil, err
	}
	if err := m.get("currency", &currency); err != nil {
		return nil, err
	}
	if err := m.get("fake", &fake); err != nil {
		return nil, err
	}
	if err := m.get("sessionId", &sessionID); err != nil {
		return nil, err
	}
	if err := m.get("aud", &aud); err != nil {
		return nil, err
	}
	if err := m.get("iat", &iat); err != nil {
		return nil, err
	}
	if err := m.get("exp", &exp); err != nil {
		return nil, err
	}
	if err := m.get("nonce", &nonce); err != nil {
		return nil, err
	}
	switch {
	case kind != "open":
		return nil, fmt.Errorf("%w: kind must be \"open\"", ErrMalformed)
	case amount != 100:
		return nil, fmt.Errorf("%w: amountUsd must be 100", ErrMalformed)
	case currency != "USD":
		return nil, fmt.Errorf("%w: currency must be \"USD\"", ErrMalformed)
	case !fake:
		return nil, fmt.Errorf("%w: fake must be true", ErrMalformed)
	case !noncePattern().MatchString(nonce):
		return nil, fmt.Errorf("%w: nonce does not match its pattern", ErrMalformed)
	case !isNumericDate(iat) || !isNumericDate(exp):
		return nil, fmt.Errorf("%w: iat and exp must be integer seconds", ErrMalformed)
	case exp <= iat || exp-iat > maxMandateLifetime.Seconds():
		return nil, fmt.Errorf("%w: exp must follow iat by at most 24 hours", ErrMalformed)
	case sessionID != c.SessionID:
		return nil, fmt.Errorf("%w: mandate names session %q", ErrMismatch, sessionID)
	case aud != c.IssuerKID:
		return nil, fmt.Errorf("%w: mandate audience %q is not the issuer key %q", ErrMismatch, aud, c.IssuerKID)
	}
	out := &Mandate{
		JWS: jws, SessionID: sessionID, Audience: aud, Nonce: nonce,
		IssuedAt: time.Unix(int64(iat), 0).UTC(), ExpiresAt: time.Unix(int64(exp), 0).UTC(),
		HolderThumbprint: h.thumbprint,
	}
	if !c.Now.IsZero() {
		if !c.Now.Before(out.ExpiresAt) {
			return nil, fmt.Errorf("%w: mandate expired at %s", ErrExpired, FormatTime(out.ExpiresAt))
		}
		if out.IssuedAt.After(c.Now.Add(maxClockSkew)) {
			return nil, fmt.Errorf("%w: mandate issued at %s", ErrNotYetValid, FormatTime(out.IssuedAt))
		}
	}
	return out, nil
}

// Decision is a verified gate decision.
type Decision struct {
	// JWS is the decision exactly as posted; proofs embed it verbatim.
	JWS string
	// Outcome is DecisionApproved or DecisionDenied.
	Outcome string
}

// DecisionCheck is what the server expects of a decision posted to
// POST /v1/sandbox/sessions/{id}/gates/{gateId}/decision.
type DecisionCheck struct {
	SessionID string
	Gate      Gate
	// HolderThumbprint is Mandate.HolderThumbprint of the session's mandate.
	HolderThumbprint string
	Now              time.Time
}

// VerifyDecision checks a gate decision. It does not know whether the gate is
// already decided: the caller records the first valid decision with a
// compare-and-set and refuses the rest.
func VerifyDecision(jws string, c DecisionCheck) (*Decision, error) {
	h, err := verifyHolderJWS(jws, TypDecision)
	if err != nil {
		return nil, err
	}
	if h.thumbprint != c.HolderThumbprint {
		return nil, fmt.Errorf("%w: decision is not signed by the mandate's holder key", ErrWrongKey)
	}
	m, err := decodeMembers(h.members, []string{"sessionId", "gateId", "requestDigest", "nonce", "outcome", "expiresAt"})
	if err != nil {
		return nil, err
	}
	var got struct{ sessionID, gateID, digest, nonce, outcome, expiresAt string }
	for name, dst := range map[string]*string{
		"sessionId": &got.sessionID, "gateId": &got.gateID, "requestDigest": &got.digest,
		"nonce": &got.nonce, "outcome": &got.outcome, "expiresAt": &got.expiresAt,
	} {
		if err := m.get(name, dst); err != nil {
			return nil, err
		}
	}
	switch {
	case got.outcome != DecisionApproved && got.outcome != DecisionDenied:
		return nil, fmt.Errorf("%w: outcome must be %q or %q", ErrMalformed, DecisionApproved, DecisionDenied)
	case got.sessionID != c.SessionID:
		return nil, fmt.Errorf("%w: decision names session %q", ErrMismatch, got.sessionID)
	case got.gateID != c.Gate.ID:
		return nil, fmt.Errorf("%w: decision names gate %q", ErrMismatch, got.gateID)
	case got.digest != c.Gate.RequestDigest:
		return nil, fmt.Errorf("%w: requestDigest differs from the gate's", ErrMismatch)
	case got.nonce != c.Gate.Nonce:
		return nil, fmt.Errorf("%w: nonce differs from the gate's", ErrMismatch)
	case got.expiresAt != c.Gate.ExpiresAt:
		return nil, fmt.Errorf("%w: expiresAt differs from the gate's", ErrMismatch)
	}
	expires, err := parseTime(c.Gate.ExpiresAt)
	if err != nil {
		return nil, fmt.Errorf("%w: gate expiresAt: %v", ErrMalformed, err)
	}
	// The verifier compares the recorded second, so the server must too.
	if c.Now.UTC().Truncate(time.Second).After(expires) {
		return nil, fmt.Errorf("%w: gate expired at %s", ErrExpired, c.Gate.ExpiresAt)
	}
	return &Decision{JWS: jws, Outcome: got.outcome}, nil
}

type members map[string]json.RawMessage

func decodeMembers(m map[string]json.RawMessage, names []string) (members, error) {
	if err := checkMembers(m, names, nil); err != nil {
		return nil, fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	return m, nil
}

func (m members) get(name string, dst any) error {
	if err := json.Unmarshal(m[name], dst); err != nil {
		return fmt.Errorf("%w: member %q has the wrong type", ErrMalformed, name)
	}
	return nil
}

func isNumericDate(f float64) bool {
	return f >= 0 && f <= 1<<53 && f == math.Trunc(f)
}
