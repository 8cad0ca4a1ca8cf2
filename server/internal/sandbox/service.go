package sandbox

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/pierhq/pier/internal/lib/sandboxproof"
	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

// CapabilityPrefix starts every sandbox agent capability, so that it is
// never mistaken for an API key (agk_…).
const CapabilityPrefix = "sbx_"

// RegistrationPrefix starts a registration secret: what the session's
// creator hands to the holder so that the holder, and no one who merely
// learns the session id, registers the mandate.
const RegistrationPrefix = "sbr_"

// MaxAttempts bounds a session's attempts: a proof carries at most 32.
const MaxAttempts = 32

// Records is what the sandbox keeps in the store: its sessions, attempts,
// gates and proofs, its releases and signing keys, and which engine holds
// them. *store.Store is one.
type Records interface {
	Sandbox() store.Sandbox
	SandboxReleases() store.SandboxReleases
	Engine() store.Engine
}

// Config wires the service.
type Config struct {
	Store Records
	Keys  *Keys
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	Log *slog.Logger
	// BaseURL gives the public base URL that request actions point at.
	BaseURL func() string
}

// Service runs sandbox sessions and publishes the reference release.
type Service struct {
	st      Records
	keys    *Keys
	now     func() time.Time
	log     *slog.Logger
	baseURL func() string

	pending []byte // the manifest served until a release is published

	mu      sync.Mutex
	release *release // the last release read, by id; releases never change
}

// New returns the service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Keys == nil {
		return nil, errors.New("sandbox: a store and keys are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	pending, err := pendingManifest()
	if err != nil {
		return nil, err
	}
	return &Service{st: cfg.Store, keys: cfg.Keys, now: cfg.Now, log: cfg.Log, baseURL: cfg.BaseURL, pending: pending}, nil
}

// IssuerKID is the kid of the issuer key that mandates must name.
func (s *Service) IssuerKID() string { return s.keys.Issuer.KID }

// Created is a new session with its capability, which is shown only here.
type Created struct {
	Session models.SandboxSession
	// Capability is the sandbox-only agent capability; the store keeps only
	// its SHA-256.
	Capability string
	// RegistrationSecret is what the creator hands the holder to register
	// the mandate; the store keeps only its SHA-256.
	RegistrationSecret string
	// Steps are the session's request actions: the holder fetches the issuer
	// key and registers a mandate, then the agent attempts.
	Steps []models.SandboxAction
	// Actions are the same steps for the envelope.
	Actions []models.Action
}

// AuthorizationHeader is the complete header value the agent sends.
func (c *Created) AuthorizationHeader() string { return "Bearer " + c.Capability }

// CreateSession opens a session that waits for the holder's mandate.
func (s *Service) CreateSession(ctx context.Context) (*Created, error) {
	return s.createSession(ctx, false)
}

func (s *Service) createSession(ctx context.Context, reference bool) (*Created, error) {
	id, err := sandboxproof.NewID(sandboxproof.PrefixSession)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	capability := CapabilityPrefix + auth.Token(32)
	registration := RegistrationPrefix + auth.Token(32)
	sess := store.SandboxSession{
		ID: id, CapabilityHash: auth.HashKey(capability), RegistrationHash: auth.HashKey(registration), Reference: reference,
		CreatedAt: s.now().UTC().Truncate(time.Microsecond),
	}
	if err := s.st.Sandbox().CreateSession(ctx, sess); err != nil {
		return nil, apierr.Internal(err)
	}
	l := s.links()
	steps := []any{l.fetchIssuerKey(), l.registerMandate(id), l.attempt(id)}
	return &Created{
		Session:            view(sess, nil, nil, s.now()),
		Capability:         capability,
		RegistrationSecret: registration,
		Steps:              asSandboxActions(steps...),
		Actions:            asActions(steps...),
	}, nil
}

// Session reads a session. It never carries the capability, which the
// store does not have.
func (s *Service) Session(ctx context.Context, id string) (models.SandboxSession, []models.Action, error) {
	sess, err := s.session(ctx, id)
	if err != nil {
		return models.SandboxSession{}, nil, err
	}
	attempts, err := s.st.Sandbox().Attempts(ctx, id)
	if err != nil {
		return models.SandboxSession{}, nil, apierr.Internal(err)
	}
	gates, err := s.st.Sandbox().Gates(ctx, id)
	if err != nil {
		return models.SandboxSession{}, nil, apierr.Internal(err)
	}
	v := view(sess, attempts, gates, s.now())
	l := s.links()
	var next []any
	switch v.State {
	case "awaiting_mandate":
		next = []any{l.fetchIssuerKey(), l.registerMandate(id)}
	case "proven":
		next = []any{l.readProof(sess.ProofID)}
	case "expired":
		next = []any{stop("done")}
	default:
		for _, g := range v.Gates {
			if g.State == "open" {
				next = append(next, l.decide(id, g.Id))
			}
		}
		next = append(next, l.attempt(id))
	}
	return v, asActions(next...), nil
}

func (s *Service) session(ctx context.Context, id string) (store.SandboxSession, error) {
	sess, err := s.st.Sandbox().Session(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return sess, notFound("no sandbox session " + id)
	}
	if err != nil {
		return sess, apierr.Internal(err)
	}
	return sess, nil
}

// MandateResult is a registered mandate.
type MandateResult struct {
	SessionID       string
	Mandate         models.SandboxMandate
	BudgetRemaining money.MicroUSD // micro-USD
	Actions         []models.Action
}

// RegisterMandate checks the holder's signed mandate and records it, once
// per session. The registration secret binds it to the session's creator,
// who handed the secret to the holder; the signature is the holder's
// authority. Adapters must refuse a request that carries an Authorization
// header before calling. A retry with the same Idempotency-Key is
// replayed by the adapter's idempotency layer.
func (s *Service) RegisterMandate(ctx context.Context, id, jws, registrationSecret string) (*MandateResult, error) {
	sess, err := s.session(ctx, id)
	if err != nil {
		return nil, err
	}
	l := s.links()
	if sess.RegistrationHash == "" || !secretMatches(registrationSecret, sess.RegistrationHash) {
		return nil, apierr.New("auth:invalid_credentials",
			"registrationSecret is not this session's: the holder registers the mandate with the registration secret returned, once, to whoever created the session; ask them for it, or create a session of your own",
			asActions(l.createSession())...)
	}

	already := func() error {
		return apierr.New("conflict:state", "this session already has a mandate; a session takes one mandate, so start a new session for another",
			asActions(l.readSession(id))...)
	}
	if sess.MandateJWS != "" {
		return nil, already()
	}
	m, err := sandboxproof.VerifyMandate(jws, sandboxproof.MandateCheck{SessionID: id, IssuerKID: s.keys.Issuer.KID, Now: s.now()})
	if err != nil {
		return nil, signedError(err, "mandate", asActions(l.fetchIssuerKey(), l.registerMandate(id)))
	}
	sess.MandateJWS = m.JWS
	sess.MandateSHA256 = sandboxproof.SHA256Hex([]byte(m.JWS))
	sess.HolderThumbprint = m.HolderThumbprint
	sess.IssuerKID = m.Audience
	sess.MandateExpiresAt = m.ExpiresAt
	sess.BudgetMicro = money.MicroUSD(sandboxproof.MandateAmountMicroUSD)
	ok, err := s.st.Sandbox().RegisterMandate(ctx, sess)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	if !ok {
		return nil, already()
	}
	return &MandateResult{
		SessionID:       id,
		Mandate:         mandateView(sess),
		BudgetRemaining: sess.BudgetMicro,
		Actions:         asActions(l.attempt(id)),
	}, nil
}

// AttemptResult is an attempt with its receipt, and for an approval the
// gate it opened.
type AttemptResult struct {
	SessionID       string
	Attempt         models.SandboxAttempt
	Gate            *models.SandboxGate
	ProofID         string
	Amount          money.MicroUSD // micro-USD
	BudgetRemaining money.MicroUSD // micro-USD
	Actions         []models.Action
}

// Attempt takes a fake charge for the agent that holds the session's
// capability. An allowed attempt is charged at once; an approval attempt
// holds its amount and opens a gate for the holder. Either way the amount is
// checked against what the mandate still covers and debited in the same
// transaction, under the session's lock, so that concurrent attempts never
// overspend.
func (s *Service) Attempt(ctx context.Context, id, authorization, scenario string) (*AttemptResult, error) {
	sess, err := s.session(ctx, id)
	if err != nil {
		return nil, err
	}
	if !capabilityMatches(authorization, sess.CapabilityHash) {
		e := apierr.New("auth:invalid_credentials",
			"the Authorization header is not this session's sandbox capability; send the authorizationHeader value returned when the session was created (API keys carry no sandbox authority)")
		e.Actions = []models.Action{mustManual("create_key")}
		return nil, e
	}
	amount, err := attemptAmount(scenario)
	if err != nil {
		return nil, err
	}
	l := s.links()
	res := &AttemptResult{SessionID: id, Amount: amount}
	err = s.st.Sandbox().InSession(ctx, id, func(tx *store.SandboxTx, sess *store.SandboxSession) error {
		now := s.now().UTC()
		if err := l.attemptRefused(id, sess, now); err != nil {
			return err
		}
		released, err := tx.ExpireGates(ctx, id, now.Truncate(time.Second))
		if err != nil {
			return apierr.Internal(err)
		}
		committed := sess.CommittedMicro - released
		if committed+amount > sess.BudgetMicro {
			return apierr.New("budget:insufficient", fmt.Sprintf("the mandate has %s USD of fake money left and this attempt needs %s USD",
				usdText(sess.BudgetMicro-committed), usdText(amount)), asActions(l.readSession(id), stop("done"))...)
		}
		row, gateRow, err := s.issueAttempt(id, scenario, amount, sess, now)
		if err != nil {
			return err
		}
		seq := row.Seq
		if err := tx.InsertAttempt(ctx, row, gateRow); err != nil {
			return apierr.Internal(err)
		}
		committed += amount
		if err := tx.SetBudget(ctx, id, committed, seq); err != nil {
			return apierr.Internal(err)
		}
		res.ProofID, err = s.mintIfReady(ctx, tx, sess, now)
		if err != nil {
			return err
		}
		res.Attempt = attemptView(row)
		res.BudgetRemaining = sess.BudgetMicro - committed
		if gateRow != nil {
			g := gateView(*gateRow)
			res.Gate = &g
		}
		return nil
	})
	if err != nil {
		return nil, asAPIError(err)
	}
	switch {
	case res.ProofID != "":
		res.Actions = asActions(l.readProof(res.ProofID))
	case res.Gate != nil:
		res.Actions = asActions(l.decide(id, res.Gate.Id), l.readSession(id))
	default:
		res.Actions = asActions(l.attempt(id), l.readSession(id))
	}
	return res, nil
}

// attemptAmount is what an attempt of the scenario charges, micro-USD.
func attemptAmount(scenario string) (money.MicroUSD, error) {
	switch scenario {
	case sandboxproof.ScenarioAllowed:
		return money.MicroUSD(sandboxproof.AllowedAmountMicroUSD), nil
	case sandboxproof.ScenarioApproval:
		return money.MicroUSD(sandboxproof.ApprovalAmountMicroUSD), nil
	}
	return 0, apierr.Newf("input:invalid", "scenario must be allowed or approval, not %q", scenario)
}

// attemptRefused is why a session takes no attempt now: no mandate yet,
// already proven, its mandate expired, or its attempts used up.
func (l links) attemptRefused(id string, sess *store.SandboxSession, now time.Time) error {
	switch {
	case sess.MandateJWS == "":
		return apierr.New("conflict:state", "the holder has not registered a mandate for this session yet; attempts need one",
			asActions(l.fetchIssuerKey(), l.registerMandate(id))...)
	case sess.ProofID != "":
		return apierr.New("conflict:state", "this session is proven and takes no more attempts; start a new session",
			asActions(l.readProof(sess.ProofID))...)
	case !now.Before(sess.MandateExpiresAt):
		return apierr.New("conflict:expired", "the session's mandate expired at "+sandboxproof.FormatTime(sess.MandateExpiresAt)+"; start a new session",
			asActions(stop("done"))...)
	case sess.AttemptCount >= MaxAttempts:
		return apierr.New("conflict:state", fmt.Sprintf("a session takes at most %d attempts; start a new session", MaxAttempts),
			asActions(stop("done"))...)
	}
	return nil
}

// issueAttempt has the issuer sign an attempt's receipt, and for an
// approval its gate, as the rows to store.
func (s *Service) issueAttempt(id, scenario string, amount money.MicroUSD, sess *store.SandboxSession, now time.Time) (store.SandboxAttempt, *store.SandboxGate, error) {
	attemptID, err := sandboxproof.NewID(sandboxproof.PrefixAttempt)
	if err != nil {
		return store.SandboxAttempt{}, nil, apierr.Internal(err)
	}
	var params *sandboxproof.GateParams
	if scenario == sandboxproof.ScenarioApproval {
		p, err := sandboxproof.NewGateParams(now)
		if err != nil {
			return store.SandboxAttempt{}, nil, apierr.Internal(err)
		}
		params = &p
	}
	att, gate, err := sandboxproof.IssueAttempt(s.keys.Issuer, sandboxproof.AttemptRequest{
		SessionID: id, AttemptID: attemptID, Scenario: scenario, AmountMicroUSD: int64(amount), Mandate: sess.MandateJWS,
	}, now, params)
	if errors.Is(err, sandboxproof.ErrExpired) {
		return store.SandboxAttempt{}, nil, apierr.New("conflict:expired", "the session's mandate has expired; start a new session", asActions(stop("done"))...)
	}
	if err != nil {
		return store.SandboxAttempt{}, nil, apierr.Internal(err)
	}
	seq := sess.AttemptCount + 1
	row := store.SandboxAttempt{
		ID: attemptID, SessionID: id, Seq: seq, Scenario: scenario, AmountMicro: amount,
		RequestDigest: att.RequestDigest, Outcome: att.Outcome, Receipt: att.Receipt, CreatedAt: now,
	}
	var gateRow *store.SandboxGate
	if gate != nil {
		expires, err := time.Parse(time.RFC3339, gate.ExpiresAt)
		if err != nil {
			return store.SandboxAttempt{}, nil, apierr.Internal(err)
		}
		gateRow = &store.SandboxGate{
			ID: gate.ID, SessionID: id, AttemptID: attemptID, Seq: seq, RequestDigest: gate.RequestDigest,
			Nonce: gate.Nonce, ExpiresText: gate.ExpiresAt, ExpiresAt: expires, State: store.GateOpen,
		}
	}
	return row, gateRow, nil
}

// DecisionResult is a decided gate.
type DecisionResult struct {
	SessionID string
	Gate      models.SandboxGateState
	ProofID   string
	// Released is what a denial gave back to the mandate, micro-USD.
	Released        money.MicroUSD
	BudgetRemaining money.MicroUSD
	Actions         []models.Action
}

// Decide records the holder's signed decision on a gate. The first valid
// decision wins (compare-and-set in the database); a second decision, a
// replayed signature and a decision after the gate's expiry are refused.
// The signature is the holder's only authority; adapters must refuse a
// request that carries an Authorization header before calling.
func (s *Service) Decide(ctx context.Context, id, gateID, jws string) (*DecisionResult, error) {
	sess, err := s.session(ctx, id)
	if err != nil {
		return nil, err
	}
	g, err := s.st.Sandbox().Gate(ctx, id, gateID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("no gate " + gateID + " in sandbox session " + id)
	}
	if err != nil {
		return nil, apierr.Internal(err)
	}
	l := s.links()
	// Time is checked below, after whether the gate is already decided, so
	// that a replay of the winning decision says so even once the gate's
	// time is up.
	d, err := sandboxproof.VerifyDecision(jws, sandboxproof.DecisionCheck{
		SessionID: id, Gate: proofGate(g), HolderThumbprint: sess.HolderThumbprint,
	})
	if err != nil {
		return nil, signedError(err, "decision", asActions(l.readSession(id)))
	}
	res := &DecisionResult{SessionID: id}
	err = s.st.Sandbox().InSession(ctx, id, func(tx *store.SandboxTx, sess *store.SandboxSession) error {
		now := s.now().UTC()
		g.DecisionJWS = d.JWS
		g.DecisionSHA256 = sandboxproof.SHA256Hex([]byte(d.JWS))
		g.DecidedOutcome = d.Outcome
		g.DecidedAt = now.Truncate(time.Second)
		won, err := tx.DecideGate(ctx, g)
		if err != nil {
			return apierr.Internal(err)
		}
		current, err := currentGate(ctx, tx, id, g)
		if err != nil {
			return apierr.Internal(err)
		}
		if !won {
			return l.lostDecision(id, g, current)
		}
		committed := sess.CommittedMicro
		if d.Outcome == sandboxproof.DecisionDenied {
			if res.Released, err = releaseDenied(ctx, tx, id, sess, g); err != nil {
				return err
			}
			committed -= res.Released
		}
		res.ProofID, err = s.mintIfReady(ctx, tx, sess, now)
		if err != nil {
			return err
		}
		res.Gate = gateStateView(current, now)
		res.BudgetRemaining = sess.BudgetMicro - committed
		return nil
	})
	if err != nil {
		return nil, asAPIError(err)
	}
	switch {
	case res.ProofID != "":
		res.Actions = asActions(l.readProof(res.ProofID))
	case d.Outcome == sandboxproof.DecisionDenied:
		res.Actions = asActions(l.attempt(id), stop("denied"))
	default:
		res.Actions = asActions(l.attempt(id))
	}
	return res, nil
}

// currentGate is the gate as stored now, after a decision on it was tried.
func currentGate(ctx context.Context, tx *store.SandboxTx, id string, g store.SandboxGate) (store.SandboxGate, error) {
	gates, err := tx.Gates(ctx, id)
	if err != nil {
		return g, err
	}
	current := g
	for _, x := range gates {
		if x.ID == g.ID {
			current = x
		}
	}
	return current, nil
}

// lostDecision is why a decision did not win its gate: another was first,
// or the gate's time was up.
func (l links) lostDecision(id string, g, current store.SandboxGate) error {
	if current.State == store.GateDecided {
		return apierr.New("conflict:gate_decided", fmt.Sprintf("gate %s was already decided (%s at %s); the first valid decision wins",
			g.ID, current.DecidedOutcome, sandboxproof.FormatTime(current.DecidedAt)), asActions(l.readSession(id))...)
	}
	return apierr.New("conflict:expired", "gate "+g.ID+" expired at "+g.ExpiresText+" without a decision; the agent may attempt again",
		asActions(l.attempt(id), l.readSession(id))...)
}

// releaseDenied gives a denied attempt's amount back to the mandate and
// returns it.
func releaseDenied(ctx context.Context, tx *store.SandboxTx, id string, sess *store.SandboxSession, g store.SandboxGate) (money.MicroUSD, error) {
	attempts, err := tx.Attempts(ctx, id)
	if err != nil {
		return 0, apierr.Internal(err)
	}
	var released money.MicroUSD
	for _, a := range attempts {
		if a.ID == g.AttemptID {
			released = a.AmountMicro
		}
	}
	if err := tx.SetBudget(ctx, id, sess.CommittedMicro-released, sess.AttemptCount); err != nil {
		return 0, apierr.Internal(err)
	}
	return released, nil
}

// mintIfReady mints the session's proof once it has an allowed attempt and
// a decided gate. It runs inside the transaction that made the session
// ready, so a session gets exactly one proof. Approval attempts whose gate
// is not decided are left out: every approval attempt in a proof has its
// decided gate.
func (s *Service) mintIfReady(ctx context.Context, tx *store.SandboxTx, sess *store.SandboxSession, now time.Time) (string, error) {
	if sess.ProofID != "" {
		return sess.ProofID, nil
	}
	attempts, err := tx.Attempts(ctx, sess.ID)
	if err != nil {
		return "", apierr.Internal(err)
	}
	gates, err := tx.Gates(ctx, sess.ID)
	if err != nil {
		return "", apierr.Internal(err)
	}
	decided := map[string]store.SandboxGate{}
	var proofGates []sandboxproof.DecidedGate
	for _, g := range gates {
		if g.State != store.GateDecided {
			continue
		}
		decided[g.AttemptID] = g
		proofGates = append(proofGates, sandboxproof.DecidedGate{
			Gate: proofGate(g), AttemptID: g.AttemptID, Decision: g.DecisionJWS, DecidedAt: g.DecidedAt, DecidedOutcome: g.DecidedOutcome,
		})
	}
	var entries []sandboxproof.Attempt
	allowed := false
	for _, a := range attempts {
		if a.Scenario == sandboxproof.ScenarioApproval {
			if _, ok := decided[a.ID]; !ok {
				continue
			}
		} else {
			allowed = true
		}
		amount, err := sandboxproof.USDNumber(int64(a.AmountMicro))
		if err != nil {
			return "", apierr.Internal(err)
		}
		entries = append(entries, sandboxproof.Attempt{
			AttemptID: a.ID, Scenario: a.Scenario, AmountUSD: amount, Currency: "USD",
			RequestDigest: a.RequestDigest, Outcome: a.Outcome, Receipt: a.Receipt,
		})
	}
	if !allowed || len(proofGates) == 0 {
		return "", nil
	}
	proofID, err := sandboxproof.NewProofID()
	if err != nil {
		return "", apierr.Internal(err)
	}
	proof, err := sandboxproof.MintProof(s.keys.Proof, sandboxproof.ProofInput{
		ProofID: proofID, SessionID: sess.ID, IssuedAt: now, Mandate: sess.MandateJWS, Attempts: entries, Gates: proofGates,
	})
	if err != nil {
		return "", apierr.Internal(err)
	}
	if err := tx.InsertProof(ctx, sess.ID, proofID, proof, now); err != nil {
		return "", apierr.Internal(err)
	}
	return proofID, nil
}

// Proof returns a minted proof exactly as signed.
func (s *Service) Proof(ctx context.Context, proofID string) ([]byte, []models.Action, error) {
	proof, err := s.st.Sandbox().Proof(ctx, proofID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, notFound("no sandbox proof " + proofID)
	}
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	return proof, s.proofActions(), nil
}

// proofActions point an auditor at the verifier.
func (s *Service) proofActions() []models.Action {
	l := s.links()
	return asActions(models.UrlAction{Kind: "url", Actor: "auditor", Url: l.base + sandboxproof.PathVerifierMJS, Purpose: "download"})
}

// capabilityMatches compares the presented Authorization header with the
// stored hash in constant time.
func secretMatches(secret, hash string) bool {
	got := auth.HashKey(strings.TrimSpace(secret))
	return secret != "" && subtle.ConstantTimeCompare([]byte(got), []byte(hash)) == 1
}

func capabilityMatches(header, hash string) bool {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := auth.HashKey(strings.TrimSpace(token))
	return subtle.ConstantTimeCompare([]byte(got), []byte(hash)) == 1
}

// signedError turns a refused holder signature into its blockedBy code.
func signedError(err error, what string, next []models.Action) *apierr.Error {
	msg := what + ": " + strings.ReplaceAll(err.Error(), "sandboxproof: ", "")
	var code models.BlockedBy
	switch {
	case errors.Is(err, sandboxproof.ErrBadSignature), errors.Is(err, sandboxproof.ErrWrongKey):
		code = "auth:invalid_signature"
	case errors.Is(err, sandboxproof.ErrMismatch):
		code = "input:signed_mismatch"
	case errors.Is(err, sandboxproof.ErrExpired):
		code = "conflict:expired"
	case errors.Is(err, sandboxproof.ErrMalformed), errors.Is(err, sandboxproof.ErrNotYetValid):
		code = "input:invalid"
	default:
		return apierr.Internal(err)
	}
	return apierr.New(code, msg, next...)
}

func notFound(msg string) *apierr.Error {
	return apierr.New("not_found:resource", msg, asActions(stop("not_found"))...)
}

func asAPIError(err error) error {
	var e *apierr.Error
	if errors.As(err, &e) {
		return e
	}
	return apierr.Internal(err)
}

func mustManual(step models.ManualActionStep) models.Action {
	return asActions(models.ManualAction{Kind: "manual", Actor: "agent", Step: step})[0]
}

func usdText(micro money.MicroUSD) string {
	n, err := sandboxproof.USDNumber(int64(micro))
	if err != nil {
		return micro.Decimal()
	}
	return n.String()
}
