package sandboxproof

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gowebpki/jcs"
)

// Scenarios, outcomes and decisions, as the format spells them.
const (
	ScenarioAllowed  = "allowed"
	ScenarioApproval = "approval"

	OutcomeCharged = "charged"
	OutcomeGated   = "gated"

	// GateOutcome is the outcome every gate offers: a holder signature over
	// the gate's values with this outcome approves the attempt.
	GateOutcome = "approved"

	DecisionApproved = "approved"
	DecisionDenied   = "denied"

	// DefaultGateTTL is how long the reference server keeps a gate open.
	DefaultGateTTL = 10 * time.Minute
)

// AttemptRequest is the server's reading of an agent's attempt: what the
// request digest binds.
type AttemptRequest struct {
	SessionID      string
	AttemptID      string
	Scenario       string
	AmountMicroUSD int64
	// Mandate is the session's registered mandate, compact JWS.
	Mandate string
}

// RequestDigest is the hex SHA-256 of the attempt's canonical JSON (RFC 8785
// form; docs/sandbox-proof.md §3.2).
func RequestDigest(r AttemptRequest) (string, error) {
	amount, err := USDNumber(r.AmountMicroUSD)
	if err != nil {
		return "", err
	}
	if !IDPattern().MatchString(r.SessionID) || !IDPattern().MatchString(r.AttemptID) {
		return "", fmt.Errorf("%w: session and attempt ids must match %s", ErrMalformed, IDPattern())
	}
	if r.Scenario != ScenarioAllowed && r.Scenario != ScenarioApproval {
		return "", fmt.Errorf("%w: unknown scenario %q", ErrMalformed, r.Scenario)
	}
	mandateSum := sha256.Sum256([]byte(r.Mandate))
	body, err := json.Marshal(map[string]any{
		"kind":          "pier.sandbox.attempt.v1",
		"sessionId":     r.SessionID,
		"attemptId":     r.AttemptID,
		"scenario":      r.Scenario,
		"amountUsd":     amount,
		"currency":      "USD",
		"mandateSha256": hex.EncodeToString(mandateSum[:]),
	})
	if err != nil {
		return "", err
	}
	canonical, err := jcs.Transform(body)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:]), nil
}

// Attempt is an attempt entry of a proof (§4.1). The server returns it as
// data.attempt and keeps it for minting.
type Attempt struct {
	AttemptID     string      `json:"attemptId"`
	Scenario      string      `json:"scenario"`
	AmountUSD     json.Number `json:"amountUsd"`
	Currency      string      `json:"currency"`
	RequestDigest string      `json:"requestDigest"`
	Outcome       string      `json:"outcome"`
	Receipt       string      `json:"receipt"`
}

// Gate is what an approval attempt opens (§3.3), returned as data.gate and
// signed over by the holder.
type Gate struct {
	ID            string `json:"id"`
	RequestDigest string `json:"requestDigest"`
	Nonce         string `json:"nonce"`
	Outcome       string `json:"outcome"`
	ExpiresAt     string `json:"expiresAt"`
}

// GateParams are the server's choices for a new gate.
type GateParams struct {
	ID        string
	Nonce     string
	ExpiresAt time.Time
}

// NewGateParams picks a fresh gate id and nonce, expiring DefaultGateTTL after now.
func NewGateParams(now time.Time) (GateParams, error) {
	id, err := NewID(PrefixGate)
	if err != nil {
		return GateParams{}, err
	}
	nonce, err := NewNonce()
	if err != nil {
		return GateParams{}, err
	}
	return GateParams{ID: id, Nonce: nonce, ExpiresAt: now.Add(DefaultGateTTL)}, nil
}

type receiptPayload struct {
	SessionID     string      `json:"sessionId"`
	AttemptID     string      `json:"attemptId"`
	Scenario      string      `json:"scenario"`
	AmountUSD     json.Number `json:"amountUsd"`
	Currency      string      `json:"currency"`
	Fake          bool        `json:"fake"`
	RequestDigest string      `json:"requestDigest"`
	Outcome       string      `json:"outcome"`
	GateID        string      `json:"gateId,omitempty"`
	IssuedAt      int64       `json:"iat"`
}

// IssueAttempt computes the request digest and signs the receipt with the
// issuer key. An approval attempt needs gate parameters and returns the gate
// it opens; an allowed attempt must pass nil and returns no gate.
//
// It refuses to sign once the mandate has expired, since the verifier
// rejects a receipt issued after the mandate's exp.
func IssueAttempt(issuer *SigningKey, req AttemptRequest, issuedAt time.Time, gate *GateParams) (Attempt, *Gate, error) {
	mandate, err := VerifyMandate(req.Mandate, MandateCheck{SessionID: req.SessionID, IssuerKID: issuer.KID})
	if err != nil {
		return Attempt{}, nil, fmt.Errorf("sandboxproof: session mandate: %w", err)
	}
	if issuedAt.Unix() > mandate.ExpiresAt.Unix() {
		return Attempt{}, nil, fmt.Errorf("%w: mandate expired at %s", ErrExpired, FormatTime(mandate.ExpiresAt))
	}
	digest, err := RequestDigest(req)
	if err != nil {
		return Attempt{}, nil, err
	}
	amount, _ := USDNumber(req.AmountMicroUSD) // RequestDigest validated it
	receipt := receiptPayload{
		SessionID: req.SessionID, AttemptID: req.AttemptID, Scenario: req.Scenario,
		AmountUSD: amount, Currency: "USD", Fake: true, RequestDigest: digest,
		IssuedAt: issuedAt.Unix(),
	}
	var opened *Gate
	switch req.Scenario {
	case ScenarioAllowed:
		if gate != nil {
			return Attempt{}, nil, fmt.Errorf("%w: an allowed attempt opens no gate", ErrMalformed)
		}
		receipt.Outcome = OutcomeCharged
	case ScenarioApproval:
		if gate == nil || !IDPattern().MatchString(gate.ID) || !noncePattern().MatchString(gate.Nonce) {
			return Attempt{}, nil, fmt.Errorf("%w: an approval attempt needs a gate id and nonce", ErrMalformed)
		}
		receipt.Outcome = OutcomeGated
		receipt.GateID = gate.ID
		opened = &Gate{ID: gate.ID, RequestDigest: digest, Nonce: gate.Nonce, Outcome: GateOutcome, ExpiresAt: FormatTime(gate.ExpiresAt)}
	}
	signed, err := signCompact(issuer, TypReceipt, receipt)
	if err != nil {
		return Attempt{}, nil, err
	}
	return Attempt{
		AttemptID: req.AttemptID, Scenario: req.Scenario, AmountUSD: amount, Currency: "USD",
		RequestDigest: digest, Outcome: receipt.Outcome, Receipt: signed,
	}, opened, nil
}
