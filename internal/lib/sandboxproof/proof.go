package sandboxproof

import (
	"fmt"
	"time"
)

// Version is the proof format version this package mints.
const Version = "v1"

// DecidedGate is a gate together with the decision the server accepted for it.
type DecidedGate struct {
	Gate
	// AttemptID is the approval attempt that opened the gate.
	AttemptID string
	// Decision is Decision.JWS, exactly as the holder posted it.
	Decision string
	// DecidedAt is when the server accepted the decision.
	DecidedAt time.Time
	// DecidedOutcome is Decision.Outcome.
	DecidedOutcome string
}

// ProofInput is everything a proof signs.
type ProofInput struct {
	ProofID   string
	SessionID string
	IssuedAt  time.Time
	// Mandate is the registered mandate, compact JWS.
	Mandate  string
	Attempts []Attempt
	Gates    []DecidedGate
}

// gateEntry is one gate as the signed payload carries it
// (docs/sandbox-proof.md): the gate as raised, then the holder's decision.
type gateEntry struct {
	ID            string `json:"id"`
	AttemptID     string `json:"attemptId"`
	RequestDigest string `json:"requestDigest"`
	Nonce         string `json:"nonce"`
	Outcome       string `json:"outcome"`
	ExpiresAt     string `json:"expiresAt"` // RFC 3339, UTC

	// Decision is the holder's compact JWS over the gate.
	Decision       string `json:"decision"`
	DecidedAt      string `json:"decidedAt"` // RFC 3339, UTC
	DecidedOutcome string `json:"decidedOutcome"`
}

// proofPayload is what the proof key signs; the field order is the wire
// order the verifiers expect.
type proofPayload struct {
	Version   string `json:"version"`
	ProofID   string `json:"proofId"`
	SessionID string `json:"sessionId"`
	IssuedAt  string `json:"issuedAt"` // RFC 3339, UTC

	// Mandate is the holder's registered mandate, compact JWS.
	Mandate  string      `json:"mandate"`
	Attempts []Attempt   `json:"attempts"`
	Gates    []gateEntry `json:"gates"`
}

type flattenedJWS struct {
	Protected string `json:"protected"`
	Payload   string `json:"payload"`
	Signature string `json:"signature"`
}

// MintProof signs the proof with the proof key and returns proof.json: the
// bytes to publish at /reference/sandbox/proof.json and to return, parsed, as
// data from GET /v1/sandbox/proofs/{proofId}.
//
// It refuses inputs that could never verify (no allowed attempt, no gate, a
// gate decided after it expired, a gate without its attempt), so a server bug
// fails here rather than in an auditor's hands. It does not re-check the
// signatures it is handed; the verifier does that independently.
func MintProof(proofKey *SigningKey, in ProofInput) ([]byte, error) {
	if err := checkProofInput(in); err != nil {
		return nil, err
	}
	payload := proofPayload{
		Version: Version, ProofID: in.ProofID, SessionID: in.SessionID,
		IssuedAt: FormatTime(in.IssuedAt), Mandate: in.Mandate,
		Attempts: in.Attempts, Gates: []gateEntry{},
	}
	for _, g := range in.Gates {
		payload.Gates = append(payload.Gates, gateEntry{
			ID: g.ID, AttemptID: g.AttemptID, RequestDigest: g.RequestDigest, Nonce: g.Nonce,
			Outcome: g.Outcome, ExpiresAt: g.ExpiresAt, Decision: g.Decision,
			DecidedAt: FormatTime(g.DecidedAt), DecidedOutcome: g.DecidedOutcome,
		})
	}
	protected, body, sig, err := signedParts(proofKey, TypProof, payload)
	if err != nil {
		return nil, err
	}
	return marshalFile(flattenedJWS{Protected: protected, Payload: body, Signature: b64(sig)})
}

func checkProofInput(in ProofInput) error {
	if !ProofIDPattern().MatchString(in.ProofID) {
		return fmt.Errorf("%w: proof id %q does not match %s", ErrMalformed, in.ProofID, ProofIDPattern())
	}
	if !IDPattern().MatchString(in.SessionID) {
		return fmt.Errorf("%w: session id %q does not match %s", ErrMalformed, in.SessionID, IDPattern())
	}
	if len(in.Attempts) == 0 || len(in.Attempts) > 32 || len(in.Gates) > 32 {
		return fmt.Errorf("%w: a proof holds 1 to 32 attempts and up to 32 gates", ErrMalformed)
	}
	approvals := map[string]Attempt{}
	allowed := false
	for _, a := range in.Attempts {
		switch a.Scenario {
		case ScenarioAllowed:
			allowed = true
		case ScenarioApproval:
			approvals[a.AttemptID] = a
		}
	}
	if !allowed || len(in.Gates) == 0 {
		return fmt.Errorf("%w: a proof needs an allowed attempt and a decided gate", ErrMalformed)
	}
	gated := map[string]bool{}
	for _, g := range in.Gates {
		a, ok := approvals[g.AttemptID]
		if !ok || a.RequestDigest != g.RequestDigest || gated[g.AttemptID] {
			return fmt.Errorf("%w: gate %s does not belong to exactly one approval attempt", ErrMismatch, g.ID)
		}
		gated[g.AttemptID] = true
		if g.DecidedOutcome != DecisionApproved && g.DecidedOutcome != DecisionDenied {
			return fmt.Errorf("%w: gate %s has no decision", ErrMalformed, g.ID)
		}
		expires, err := parseTime(g.ExpiresAt)
		if err != nil {
			return fmt.Errorf("%w: gate %s: %v", ErrMalformed, g.ID, err)
		}
		if g.DecidedAt.UTC().Truncate(time.Second).After(expires) {
			return fmt.Errorf("%w: gate %s was decided after it expired", ErrExpired, g.ID)
		}
	}
	if len(gated) != len(approvals) {
		return fmt.Errorf("%w: every approval attempt needs its decided gate", ErrMalformed)
	}
	return nil
}
