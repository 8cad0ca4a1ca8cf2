package holder

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// The typ headers of holder signatures (docs/sandbox-proof.md §2).
const (
	typMandate  = "pier-mandate+jwt"
	typDecision = "pier-gate-decision+jwt"
)

// Decision outcomes.
const (
	Approve = "approved"
	Deny    = "denied"
)

// MandateLifetime is how long a mandate from NewMandate stays valid.
const MandateLifetime = time.Hour

// Mandate is the sandbox's only mandate: an open mandate for 100 fake USD.
type Mandate struct {
	SessionID string
	// IssuerKID is the kid of the sandbox issuer key, the mandate's audience.
	IssuerKID string
	IssuedAt  time.Time
	ExpiresAt time.Time
	Nonce     string
}

// NewMandate fills in a fresh nonce and a one-hour validity from now.
func NewMandate(sessionID, issuerKID string, now time.Time) (Mandate, error) {
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return Mandate{}, err
	}
	return Mandate{
		SessionID: sessionID, IssuerKID: issuerKID,
		IssuedAt: now, ExpiresAt: now.Add(MandateLifetime),
		Nonce: base64.RawURLEncoding.EncodeToString(nonce),
	}, nil
}

type mandatePayload struct {
	Kind      string `json:"kind"`
	AmountUSD int    `json:"amountUsd"`
	Currency  string `json:"currency"`
	Fake      bool   `json:"fake"`
	SessionID string `json:"sessionId"`
	Aud       string `json:"aud"`
	IssuedAt  int64  `json:"iat"`
	ExpiresAt int64  `json:"exp"`
	Nonce     string `json:"nonce"`
}

// SignMandate signs the mandate as a compact JWS carrying the holder's public key.
func SignMandate(k *Key, m Mandate) (string, error) {
	if m.SessionID == "" || m.IssuerKID == "" || m.Nonce == "" {
		return "", errors.New("holder: mandate needs a session id, an issuer kid and a nonce")
	}
	if !m.ExpiresAt.After(m.IssuedAt) {
		return "", errors.New("holder: mandate must expire after it is issued")
	}
	return sign(k, typMandate, mandatePayload{
		Kind: "open", AmountUSD: 100, Currency: "USD", Fake: true,
		SessionID: m.SessionID, Aud: m.IssuerKID,
		IssuedAt: m.IssuedAt.Unix(), ExpiresAt: m.ExpiresAt.Unix(), Nonce: m.Nonce,
	})
}

// Gate is the gate an approval attempt opens, as the attempt response
// carries it in data.gate.
type Gate struct {
	ID            string `json:"id"`
	RequestDigest string `json:"requestDigest"`
	Nonce         string `json:"nonce"`
	Outcome       string `json:"outcome"`
	ExpiresAt     string `json:"expiresAt"`
}

type decisionPayload struct {
	SessionID     string `json:"sessionId"`
	GateID        string `json:"gateId"`
	RequestDigest string `json:"requestDigest"`
	Nonce         string `json:"nonce"`
	Outcome       string `json:"outcome"`
	ExpiresAt     string `json:"expiresAt"`
}

// SignDecision signs the holder's decision on a gate: Approve or Deny. The
// session and gate ids are signed along with the gate's digest, nonce and
// expiry, so the signature decides this gate and no other.
func SignDecision(k *Key, sessionID string, g Gate, outcome string) (string, error) {
	if outcome != Approve && outcome != Deny {
		return "", fmt.Errorf("holder: outcome must be %q or %q", Approve, Deny)
	}
	// The gate offers one outcome to approve; approving anything else would
	// sign something the sandbox never asked for.
	if outcome == Approve && g.Outcome != Approve {
		return "", fmt.Errorf("holder: gate offers outcome %q, not %q", g.Outcome, Approve)
	}
	if sessionID == "" || g.ID == "" || g.RequestDigest == "" || g.Nonce == "" || g.ExpiresAt == "" {
		return "", errors.New("holder: gate needs id, requestDigest, nonce and expiresAt")
	}
	return sign(k, typDecision, decisionPayload{
		SessionID: sessionID, GateID: g.ID, RequestDigest: g.RequestDigest,
		Nonce: g.Nonce, Outcome: outcome, ExpiresAt: g.ExpiresAt,
	})
}

func sign(k *Key, typ string, payload any) (string, error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return "", err
	}
	opts := (&jose.SignerOptions{EmbedJWK: true}).WithType(jose.ContentType(typ))
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k.private}, opts)
	if err != nil {
		return "", err
	}
	obj, err := signer.Sign(body)
	if err != nil {
		return "", err
	}
	return obj.CompactSerialize()
}

// SignDetached signs payload as a compact JWS with a detached payload
// (RFC 7515 appendix F): the result reads header..signature and the payload
// travels separately. The protected header carries typ, the key's RFC 7638
// thumbprint as kid and the public key as jwk. Conformance reports are
// signed this way over their digest.
func SignDetached(k *Key, typ string, payload []byte) (string, error) {
	opts := (&jose.SignerOptions{EmbedJWK: true}).WithType(jose.ContentType(typ)).WithHeader("kid", k.Thumbprint())
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k.private}, opts)
	if err != nil {
		return "", err
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return obj.DetachedCompactSerialize()
}
