package sandbox

import (
	"time"

	"github.com/pierhq/pier/internal/lib/sandboxproof"
	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

// gateExpired is the one rule for a gate's time: a decision recorded at a
// whole second no later than the gate's expiry is in time.
func gateExpired(g store.SandboxGate, now time.Time) bool {
	return now.UTC().Truncate(time.Second).After(g.ExpiresAt)
}

// view renders a session as the contract's resource. It never includes the
// capability, which the store does not have.
func view(sess store.SandboxSession, attempts []store.SandboxAttempt, gates []store.SandboxGate, now time.Time) models.SandboxSession {
	v := models.SandboxSession{
		Id:                sess.ID,
		CreatedAt:         sess.CreatedAt,
		MandateRegistered: sess.MandateJWS != "",
		Attempts:          []models.SandboxAttempt{},
		Gates:             []models.SandboxGateState{},
	}
	if sess.ProofID != "" {
		id := sess.ProofID
		v.ProofId = &id
	}
	amounts := map[string]money.MicroUSD{}
	for _, a := range attempts {
		v.Attempts = append(v.Attempts, attemptView(a))
		amounts[a.ID] = a.AmountMicro
	}
	committed := sess.CommittedMicro
	for _, g := range gates {
		gs := gateStateView(g, now)
		if g.State == store.GateOpen && gs.State == "expired" {
			committed -= amounts[g.AttemptID] // released at the next attempt
		}
		v.Gates = append(v.Gates, gs)
	}
	switch {
	case sess.ProofID != "":
		v.State = "proven"
	case sess.MandateJWS == "":
		v.State = "awaiting_mandate"
	case !now.Before(sess.MandateExpiresAt):
		v.State = "expired"
	default:
		v.State = "active"
	}
	if sess.MandateJWS != "" {
		m := mandateView(sess)
		v.Mandate = &m
		left := (sess.BudgetMicro - committed).USD()
		v.BudgetRemainingUsd = &left
	}
	return v
}

func mandateView(sess store.SandboxSession) models.SandboxMandate {
	return models.SandboxMandate{
		AmountUsd:           sess.BudgetMicro.USD(),
		Currency:            "USD",
		HolderKeyThumbprint: sess.HolderThumbprint,
		IssuerKid:           sess.IssuerKID,
		ExpiresAt:           sandboxproof.FormatTime(sess.MandateExpiresAt),
		MandateSha256:       sess.MandateSHA256,
	}
}

// attemptView is the attempt entry exactly as a proof carries it.
func attemptView(a store.SandboxAttempt) models.SandboxAttempt {
	return models.SandboxAttempt{
		AttemptId:     a.ID,
		Scenario:      models.SandboxAttemptScenario(a.Scenario),
		AmountUsd:     a.AmountMicro.USD(),
		Currency:      "USD",
		RequestDigest: a.RequestDigest,
		Outcome:       models.SandboxAttemptOutcome(a.Outcome),
		Receipt:       a.Receipt,
	}
}

// gateView is the gate the holder signs over, exactly.
func gateView(g store.SandboxGate) models.SandboxGate {
	return models.SandboxGate{
		Id:            g.ID,
		RequestDigest: g.RequestDigest,
		Nonce:         g.Nonce,
		Outcome:       sandboxproof.GateOutcome,
		ExpiresAt:     g.ExpiresText,
	}
}

func gateStateView(g store.SandboxGate, now time.Time) models.SandboxGateState {
	v := models.SandboxGateState{
		Id:            g.ID,
		AttemptId:     g.AttemptID,
		RequestDigest: g.RequestDigest,
		Nonce:         g.Nonce,
		Outcome:       sandboxproof.GateOutcome,
		ExpiresAt:     g.ExpiresText,
		State:         models.SandboxGateStateState(g.State),
	}
	if g.State == store.GateOpen && gateExpired(g, now) {
		v.State = "expired"
	}
	if g.State == store.GateDecided {
		outcome := models.SandboxGateStateDecidedOutcome(g.DecidedOutcome)
		at := sandboxproof.FormatTime(g.DecidedAt)
		v.DecidedOutcome = &outcome
		v.DecidedAt = &at
	}
	return v
}

// proofGate is the stored gate as the minting package reads it.
func proofGate(g store.SandboxGate) sandboxproof.Gate {
	return sandboxproof.Gate{
		ID: g.ID, RequestDigest: g.RequestDigest, Nonce: g.Nonce, Outcome: sandboxproof.GateOutcome, ExpiresAt: g.ExpiresText,
	}
}
