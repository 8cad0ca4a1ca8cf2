package service

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/payments"
	"github.com/pierhq/pier/server/internal/store"
)

// SignupScopes are the scopes of the key a signup mints. buy_domain is not
// among them: domain purchases wait for a human until one grants it.
var SignupScopes = []string{"read", "quote", "launch"}

// signupNotFound is the one answer for an unknown session and a wrong or
// missing secret, so a poll learns nothing without the secret.
func signupNotFound() *apierr.Error {
	return apierr.New("not_found:resource", "no signup session matches this id and claim secret",
		actions.Tool("create_signup", "agent", nil))
}

// SignupRequest is what an agent says of the account it asks for; both
// may be empty.
type SignupRequest struct {
	Email, OrganizationName string
}

// Signup is a started signup: the session and the secret that claims it,
// the page its human reviews, and the mutation. No project exists yet, so
// no budget remains, and nothing undoes a signup but time.
type Signup struct {
	ID, ClaimSecret, ReviewURL string
	ExpiresAt                  time.Time
	Mutated
}

// SignupPoll is what a poll of a signup found: its state; once reviewed,
// the organisation and its first project; while the card is awaited, the
// card page (CardURL); and, on the one poll that claims it, the key.
type SignupPoll struct {
	State            SignupState
	OrgID, ProjectID string
	CardURL          string
	APIKey           string
}

// BillingSetupLink is a card flow opened for an organisation: the page for
// its human, the secret its poll is bound to, and the mutation.
type BillingSetupLink struct {
	ID, URL, PollSecret string
	ExpiresAt           time.Time
	Mutated
}

// BillingPoll is what a poll of a card flow found: its state and, while
// it is open, the card page.
type BillingPoll struct {
	State   BillingState
	CardURL string
}

// SignupReview is what the review page shows about a signup.
type SignupReview struct {
	ID, Email, OrgName string
	State              SignupState
	Expired            bool
	OrgID, SetupID     string
	CreatedAt          time.Time
	ExpiresAt          time.Time
}

// ReviewDecision is what the human set on the review page.
type ReviewDecision struct {
	OrganizationName, ProjectName string
	HumanName, Email              string
	BudgetMicro                   money.MicroUSD
	// ApprovalAboveMicro, when set, sends every purchase above it to a human.
	ApprovalAboveMicro *money.MicroUSD
}

// Approved is the outcome of a review: the session the reviewer is now
// signed in with, and the card flow that comes next.
type Approved struct {
	SessionSecret string
	Session       Session
	SetupID       string
}

// BillingSetupTTL is how long a card flow stays open.
const BillingSetupTTL = 24 * time.Hour

// CardSetup is what the card page shows.
type CardSetup struct {
	ID, Reason, DeclineCode string
	State                   BillingState
	Expired                 bool
	ForSignup               bool
	ExpiresAt               time.Time
	Card                    *store.PaymentMethod // the card the flow added, or the one on file
}

func setupNotFound(id string) *apierr.Error {
	return apierr.Newf("not_found:resource", "no card setup %s in your organisation", id)
}

// StartSignup creates a signup session waiting for a human's review.
func (s *Onboarding) StartSignup(ctx context.Context, caller string, req SignupRequest) (*Signup, error) {
	now := s.Now()
	// Onboarding takes no Idempotency-Key (SPEC §7 rule 2): the same
	// signup from the same caller within a short window is a retry, and
	// answers the session it started.
	key := signupKey(caller, req)
	if out, ok := s.recent.get(key, now); ok {
		return out, nil
	}
	secret, review := auth.Token(32), auth.Token(32)
	su := store.Signup{ID: auth.ID("sus"), SecretHash: auth.HashKey(secret), ReviewHash: auth.HashKey(review),
		CreatedAt: now.UTC(), ExpiresAt: now.Add(SignupTTL).UTC().Truncate(time.Second)}
	su.Email, su.OrgName = req.Email, strings.TrimSpace(req.OrganizationName)
	if err := s.store.Onboarding().CreateSignup(ctx, su); err != nil {
		return nil, apierr.Internal(err)
	}
	// Nothing undoes a signup but time: an unclaimed session expires. No
	// project exists yet, so no budget remains.
	out := &Signup{ID: su.ID, ClaimSecret: secret, ReviewURL: s.ReviewURL(review), ExpiresAt: su.ExpiresAt,
		Mutated: s.mutated("create_signup", nil, []Resource{{Type: "signup_session", ID: su.ID}}, nil, 0)}
	s.recent.put(key, out, now)
	return out, nil
}

// signupDedupWindow is how long an identical signup from the same caller
// answers the session the first one started.
const signupDedupWindow = 2 * time.Minute

// recentSignups remembers the signups of the last window, by caller and
// request, so a retried signup answers the same session. It is held in
// memory only (it holds the claim secret, which the store keeps only as a
// hash), bounded, and per process.
type recentSignups struct {
	mu sync.Mutex
	m  map[string]recentSignup
}

type recentSignup struct {
	out Signup
	at  time.Time
}

const maxRecentSignups = 10_000

func signupKey(caller string, req SignupRequest) string {
	email, org := strings.ToLower(strings.TrimSpace(req.Email)), strings.TrimSpace(req.OrganizationName)
	return caller + "\x00" + email + "\x00" + org
}

func (r *recentSignups) get(key string, now time.Time) (*Signup, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[key]
	if !ok || now.Sub(e.at) >= signupDedupWindow {
		return nil, false
	}
	out := e.out
	return &out, true
}

func (r *recentSignups) put(key string, out *Signup, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]recentSignup{}
	}
	if len(r.m) >= maxRecentSignups {
		for k, e := range r.m {
			if now.Sub(e.at) >= signupDedupWindow {
				delete(r.m, k)
			}
		}
		if len(r.m) >= maxRecentSignups {
			return // a flood: new signups go undeduplicated until it drains
		}
	}
	r.m[key] = recentSignup{out: *out, at: now}
}

// PollSignup reports a signup's state to the holder of its claim secret.
// The first poll after the human finished mints the key and returns it;
// every later poll says it was claimed and never shows it again.
func (s *Onboarding) PollSignup(ctx context.Context, id, claimSecret string) (*SignupPoll, error) {
	su, err := s.store.Onboarding().Signup(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, apierr.Internal(err)
	}
	// Compare in constant time, and compare even when the id is unknown.
	stored := su.SecretHash
	if stored == "" {
		stored = strings.Repeat("0", 64)
	}
	if subtle.ConstantTimeCompare([]byte(auth.HashKey(claimSecret)), []byte(stored)) != 1 || su.ID == "" {
		return nil, signupNotFound()
	}
	now := s.Now()
	res := &SignupPoll{State: SignupState(su.State), OrgID: su.OrgID, ProjectID: su.ProjectID}
	switch res.State {
	case SignupPendingReview:
		if !now.Before(su.ExpiresAt) {
			res.State = SignupExpired
		}
		return res, nil
	case SignupPendingCard:
		res.CardURL = s.BillingURL(su.SetupID)
		return res, nil
	case SignupClaimed:
		return res, nil
	}
	// complete: exactly one poll wins the compare-and-set and sees the key.
	secret, err := s.claimSignup(ctx, su, now)
	if errors.Is(err, store.ErrConflict) {
		res.State = SignupClaimed
		return res, nil
	}
	if err != nil {
		return nil, apierr.Internal(err)
	}
	res.State, res.APIKey = SignupComplete, secret
	return res, nil
}

// claimSignup mints the key of a complete signup and marks it claimed,
// answering the key's secret; store.ErrConflict when another poll claimed
// it first.
func (s *Onboarding) claimSignup(ctx context.Context, su store.Signup, now time.Time) (string, error) {
	var secret string
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		cur, err := tx.Onboarding().LockSignup(ctx, su.ID)
		if err != nil {
			return err
		}
		if SignupState(cur.State) != SignupComplete {
			return store.ErrConflict
		}
		keySecret, k, err := s.accounts.createKey(ctx, tx, su.OrgID, "signup", SignupScopes, "system")
		if err != nil {
			return err
		}
		if err := tx.Onboarding().ClaimSignup(ctx, su.ID, k.ID, now); err != nil {
			return err
		}
		secret = keySecret
		_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: su.OrgID, Actor: "system", Action: "claim_signup", ObjectType: "signup", ObjectID: su.ID,
			Details: map[string]any{"keyId": k.ID}}, now)
		return err
	})
	return secret, err
}

// SignupForReview finds the signup a review token names.
func (s *Onboarding) SignupForReview(ctx context.Context, reviewToken string) (SignupReview, error) {
	su, err := s.store.Onboarding().SignupByReviewHash(ctx, auth.HashKey(reviewToken))
	if errors.Is(err, store.ErrNotFound) {
		return SignupReview{}, apierr.New("not_found:resource", "This review link does not name a signup.")
	}
	if err != nil {
		return SignupReview{}, apierr.Internal(err)
	}
	return SignupReview{ID: su.ID, Email: su.Email, OrgName: su.OrgName, State: SignupState(su.State), OrgID: su.OrgID, SetupID: su.SetupID,
		Expired: SignupState(su.State) == SignupPendingReview && !s.Now().Before(su.ExpiresAt), CreatedAt: su.CreatedAt, ExpiresAt: su.ExpiresAt}, nil
}

// ApproveSignup carries out a human's approval: the organisation, its first
// project with the budget and approval rules, the human and their session,
// and the card flow, in one transaction with a ledger entry each.
func (s *Onboarding) ApproveSignup(ctx context.Context, reviewToken string, d ReviewDecision) (Approved, error) {
	if err := d.settle(); err != nil {
		return Approved{}, err
	}
	su, err := s.store.Onboarding().SignupByReviewHash(ctx, auth.HashKey(reviewToken))
	if errors.Is(err, store.ErrNotFound) {
		return Approved{}, apierr.New("not_found:resource", "This review link does not name a signup.")
	}
	if err != nil {
		return Approved{}, apierr.Internal(err)
	}
	var out Approved
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		out, err = s.approveLocked(ctx, tx, su, d)
		return err
	})
	return out, err
}

// settle trims a review's names and checks them, the budget and the
// approval threshold; an unnamed human is the Owner.
func (d *ReviewDecision) settle() error {
	d.OrganizationName, d.ProjectName, d.HumanName = strings.TrimSpace(d.OrganizationName), strings.TrimSpace(d.ProjectName), strings.TrimSpace(d.HumanName)
	switch {
	case d.OrganizationName == "" || len(d.OrganizationName) > 100:
		return apierr.New("input:invalid", "Name the organisation (up to 100 characters).")
	case d.ProjectName == "" || len(d.ProjectName) > 100:
		return apierr.New("input:invalid", "Name the first project (up to 100 characters).")
	case len(d.HumanName) > 100 || len(d.Email) > 254:
		return apierr.New("input:invalid", "Your name or email is too long.")
	case d.BudgetMicro < MinSignupBudget || d.BudgetMicro > MaxSignupBudget:
		return apierr.Newf("input:invalid", "The budget must be between %s and %s.", MinSignupBudget, MaxSignupBudget)
	case d.ApprovalAboveMicro != nil && *d.ApprovalAboveMicro < 0:
		return apierr.New("input:invalid", "The approval threshold cannot be negative.")
	}
	if d.HumanName == "" {
		d.HumanName = "Owner"
	}
	return nil
}

// approveLocked approves a signup still pending review under its lock:
// the organisation and its human, the first project, the billing setup,
// and the human's session.
func (s *Onboarding) approveLocked(ctx context.Context, tx *store.Tx, su store.Signup, d ReviewDecision) (Approved, error) {
	now := s.Now()
	cur, err := tx.Onboarding().LockSignup(ctx, su.ID)
	if err != nil {
		return Approved{}, err
	}
	if SignupState(cur.State) != SignupPendingReview {
		return Approved{}, apierr.New("conflict:state", "This signup was already reviewed.")
	}
	if !now.Before(cur.ExpiresAt) {
		return Approved{}, apierr.New("conflict:expired", "This signup expired before it was reviewed.")
	}
	org, h, err := createSignupOrganization(ctx, tx, su, d, now)
	if err != nil {
		return Approved{}, err
	}
	actor := "human:" + h.ID
	p, err := createFirstProject(ctx, tx, org.ID, actor, d, now)
	if err != nil {
		return Approved{}, err
	}
	setup, _, err := s.openBillingSetup(ctx, tx, org.ID, "signup", su.ID, actor, now)
	if err != nil {
		return Approved{}, err
	}
	cur.OrgID, cur.ProjectID, cur.HumanID, cur.SetupID = org.ID, p.ID, h.ID, setup.ID
	if err := tx.Onboarding().ReviewSignup(ctx, cur, now); err != nil {
		return Approved{}, err
	}
	if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: org.ID, Actor: actor, Action: "approve_signup", ObjectType: "signup", ObjectID: su.ID,
		Details: map[string]any{"projectId": p.ID, "keyScopes": SignupScopes, "billingSetupId": setup.ID}}, now); err != nil {
		return Approved{}, err
	}
	secret, sess, err := s.accounts.startSession(ctx, tx, h, "signup_review", now)
	if err != nil {
		return Approved{}, err
	}
	sess.OrgName = org.Name
	return Approved{SessionSecret: secret, Session: sess, SetupID: setup.ID}, nil
}

// createSignupOrganization creates the organisation and the human who
// approved its signup. Its ledger starts with the signup the agent began,
// before the organisation existed.
func createSignupOrganization(ctx context.Context, tx *store.Tx, su store.Signup, d ReviewDecision, now time.Time) (store.Organization, store.Human, error) {
	org, err := tx.Accounts().CreateOrganization(ctx, auth.ID("org"), d.OrganizationName, now.UTC())
	if err != nil {
		return org, store.Human{}, err
	}
	h := store.Human{ID: auth.ID("usr"), OrgID: org.ID, Kind: "person", Name: d.HumanName, Email: d.Email, CreatedAt: now.UTC()}
	if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: org.ID, Actor: "agent:anonymous", Action: "start_signup", ObjectType: "signup", ObjectID: su.ID,
		Details: map[string]any{"startedAt": su.CreatedAt.Format(time.RFC3339Nano), "email": su.Email}}, now); err != nil {
		return org, h, err
	}
	if err := tx.Accounts().CreateHuman(ctx, h); err != nil {
		return org, h, err
	}
	_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: org.ID, Actor: "human:" + h.ID, Action: "create_organization", ObjectType: "organization", ObjectID: org.ID,
		Details: map[string]any{"name": org.Name, "humanId": h.ID, "humanName": h.Name}}, now)
	return org, h, err
}

// createFirstProject creates a signup's project with its budget and the
// default policy, under the approval threshold the human chose.
func createFirstProject(ctx context.Context, tx *store.Tx, orgID, actor string, d ReviewDecision, now time.Time) (store.Project, error) {
	pol := DefaultPolicy()
	if d.ApprovalAboveMicro != nil {
		pol.ApprovalRules.ApprovalAbove = ptr(*d.ApprovalAboveMicro)
	}
	polJSON, _ := json.Marshal(pol)
	p := store.Project{ID: auth.ID("prj"), OrgID: orgID, Name: d.ProjectName, LimitMicro: d.BudgetMicro, Policy: string(polJSON), CreatedAt: now.UTC()}
	if err := tx.Projects().Create(ctx, p); err != nil {
		return p, err
	}
	_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: orgID, Actor: actor, Action: "create_project", ObjectType: "project", ObjectID: p.ID,
		Details: map[string]any{"name": p.Name, "budgetLimitMicroUsd": p.LimitMicro, "policy": json.RawMessage(polJSON)}}, now)
	return p, err
}

// openBillingSetup records a pending card flow inside tx and returns it
// with its poll secret.
func (s *Onboarding) openBillingSetup(ctx context.Context, tx *store.Tx, orgID, reason, signupID, actor string, now time.Time) (store.BillingSetup, string, error) {
	secret := auth.Token(32)
	b := store.BillingSetup{ID: auth.ID("bss"), OrgID: orgID, SecretHash: auth.HashKey(secret), Reason: reason, SignupID: signupID,
		State: string(BillingPending), CreatedAt: now.UTC(), ExpiresAt: now.Add(BillingSetupTTL).UTC().Truncate(time.Second)}
	if err := tx.Onboarding().CreateBillingSetup(ctx, b); err != nil {
		return b, "", err
	}
	_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: orgID, Actor: actor, Action: "open_billing_setup", ObjectType: "billing_setup", ObjectID: b.ID,
		Details: map[string]any{"reason": reason, "expiresAt": b.ExpiresAt.Format(time.RFC3339)}}, now)
	return b, secret, err
}

// orgRemaining is what the organisation's projects have left to spend.
func (s *Onboarding) orgRemaining(ctx context.Context, orgID string) (money.MicroUSD, error) {
	ps, err := s.store.Projects().List(ctx, orgID)
	if err != nil {
		return 0, err
	}
	var left money.MicroUSD
	for _, p := range ps {
		holds, err := s.store.Quotes().ActiveHolds(ctx, p.ID, s.Now())
		if err != nil {
			return 0, err
		}
		left += p.LimitMicro - p.SpentMicro
		for _, h := range holds {
			left -= h.AmountMicro
		}
	}
	return left, nil
}

// CreateBillingSetupLink opens a card flow for the caller's organisation
// and returns the page for its human and the secret its poll is bound to.
// With no reason given, the account's state says why.
func (s *Onboarding) CreateBillingSetupLink(ctx context.Context, p *auth.Principal, reason string) (*BillingSetupLink, error) {
	if reason == "" {
		// Say why, from the account's state: no card yet, an expired one,
		// or a working card being replaced.
		pm, err := s.store.Onboarding().ActivePaymentMethod(ctx, p.OrgID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			reason = "scratch_account"
		case err != nil:
			return nil, apierr.Internal(err)
		case payments.Expired(pm.ExpMonth, pm.ExpYear, s.Now()):
			reason = "expired_card"
		default:
			reason = "replace_card"
		}
	}
	var b store.BillingSetup
	var secret string
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		b, secret, err = s.openBillingSetup(ctx, tx, p.OrgID, reason, "", actorOf(p), s.Now())
		return err
	})
	if err != nil {
		return nil, apierr.Internal(err)
	}
	left, err := s.orgRemaining(ctx, p.OrgID)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	url := s.BillingURL(b.ID)
	return &BillingSetupLink{ID: b.ID, URL: url, PollSecret: secret, ExpiresAt: b.ExpiresAt,
		Mutated: s.mutated("create_billing_setup_link", nil, []Resource{{Type: "billing_setup", ID: b.ID, URL: url}}, nil, left)}, nil
}

// PollBilling reports a card flow's state to the caller's organisation,
// bound to the flow's secret: another organisation, an unknown flow and a
// wrong secret get the same answer.
func (s *Onboarding) PollBilling(ctx context.Context, p *auth.Principal, id, pollSecret string) (*BillingPoll, error) {
	b, err := s.store.Onboarding().BillingSetup(ctx, p.OrgID, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, apierr.Internal(err)
	}
	stored := b.SecretHash
	if stored == "" {
		stored = strings.Repeat("0", 64)
	}
	if subtle.ConstantTimeCompare([]byte(auth.HashKey(pollSecret)), []byte(stored)) != 1 || b.ID == "" {
		return nil, apierr.New("not_found:resource", "no card flow in your organisation matches this id and secret",
			actions.Tool("create_billing_setup_link", "agent", nil))
	}
	state := BillingState(b.State)
	if state != BillingComplete && !s.Now().Before(b.ExpiresAt) {
		state = BillingExpired
	}
	res := &BillingPoll{State: state}
	if state != BillingComplete && state != BillingExpired {
		res.CardURL = s.BillingURL(b.ID)
	}
	return res, nil
}

// CardSetupFor reads a card flow of the human's organisation.
func (s *Onboarding) CardSetupFor(ctx context.Context, h Human, id string) (CardSetup, error) {
	b, err := s.store.Onboarding().BillingSetup(ctx, h.OrgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return CardSetup{}, setupNotFound(id)
	}
	if err != nil {
		return CardSetup{}, apierr.Internal(err)
	}
	cs := CardSetup{ID: b.ID, Reason: b.Reason, State: BillingState(b.State), DeclineCode: b.DeclineCode, ForSignup: b.SignupID != "", ExpiresAt: b.ExpiresAt,
		Expired: BillingState(b.State) != BillingComplete && !s.Now().Before(b.ExpiresAt)}
	if pm, err := s.store.Onboarding().ActivePaymentMethod(ctx, h.OrgID); err == nil {
		cs.Card = &pm
	}
	return cs, nil
}

// SubmitCard runs a card through the test provider for a flow of the
// human's organisation. A refused card is recorded (brand and last four
// only) and returned as a *payments.Decline; the flow stays open for
// another try. An accepted card becomes the organisation's card on file,
// and completes the signup the flow belongs to.
func (s *Onboarding) SubmitCard(ctx context.Context, h Human, id string, card payments.Card) (store.PaymentMethod, error) {
	var pm store.PaymentMethod
	var decline *payments.Decline
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		now := s.Now()
		b, err := tx.Onboarding().LockBillingSetup(ctx, h.OrgID, id)
		if errors.Is(err, store.ErrNotFound) {
			return setupNotFound(id)
		}
		if err != nil {
			return err
		}
		if BillingState(b.State) == BillingComplete {
			return apierr.New("conflict:state", "This card setup is already complete.")
		}
		if !now.Before(b.ExpiresAt) {
			return apierr.New("conflict:expired", "This card setup link has expired.")
		}
		m, err := payments.Authorize(card, now)
		if errors.As(err, &decline) {
			if err := tx.Onboarding().DeclineBillingSetup(ctx, b.ID, decline.Code); err != nil {
				return err
			}
			_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: h.OrgID, Actor: signedInActor(h), Action: "card_declined", ObjectType: "billing_setup", ObjectID: b.ID,
				Details: map[string]any{"code": decline.Code, "brand": payments.Brand(payments.Normalize(card.Number)), "last4": payments.Last4(card.Number)}}, now)
			return err
		}
		if err != nil {
			return err
		}
		pm = store.PaymentMethod{ID: auth.ID("pm"), OrgID: h.OrgID, Brand: m.Brand, Last4: m.Last4, ExpMonth: m.ExpMonth, ExpYear: m.ExpYear, State: "active", CreatedAt: now.UTC()}
		if err := tx.Onboarding().AddPaymentMethod(ctx, pm); err != nil {
			return err
		}
		if err := tx.Onboarding().CompleteBillingSetup(ctx, b.ID, pm.ID, now); err != nil {
			return err
		}
		if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: h.OrgID, Actor: signedInActor(h), Action: "add_payment_method", ObjectType: "payment_method", ObjectID: pm.ID,
			Details: map[string]any{"billingSetupId": b.ID, "brand": pm.Brand, "last4": pm.Last4, "expMonth": pm.ExpMonth, "expYear": pm.ExpYear}}, now); err != nil {
			return err
		}
		if b.SignupID == "" {
			return nil
		}
		if err := tx.Onboarding().CompleteSignup(ctx, b.SignupID, now); err != nil {
			return err
		}
		_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: h.OrgID, Actor: signedInActor(h), Action: "complete_signup", ObjectType: "signup", ObjectID: b.SignupID,
			Details: map[string]any{"paymentMethodId": pm.ID}}, now)
		return err
	})
	if err != nil {
		return pm, err
	}
	if decline != nil {
		return pm, decline
	}
	return pm, nil
}

// PaymentMethodFor returns the organisation's card on file, if any.
func (s *Onboarding) PaymentMethodFor(ctx context.Context, orgID string) (*store.PaymentMethod, error) {
	pm, err := s.store.Onboarding().ActivePaymentMethod(ctx, orgID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &pm, nil
}

// OpenCardSetup lets a signed-in human start a card flow themselves, from
// the dashboard.
func (s *Onboarding) OpenCardSetup(ctx context.Context, h Human) (string, error) {
	reason := "replace_card"
	if pm, err := s.store.Onboarding().ActivePaymentMethod(ctx, h.OrgID); errors.Is(err, store.ErrNotFound) {
		reason = "scratch_account"
	} else if err != nil {
		return "", err
	} else if payments.Expired(pm.ExpMonth, pm.ExpYear, s.Now()) {
		reason = "expired_card"
	}
	var id string
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		b, _, err := s.openBillingSetup(ctx, tx, h.OrgID, reason, "", signedInActor(h), s.Now())
		id = b.ID
		return err
	})
	return id, err
}

// Signup (SPEC §2.8, §5): an agent starts it anonymously and keeps the
// session id and claim secret; the human gets only the review URL, reviews
// the account's authority, pricing, budget and approval rules, approves, and
// sets up a card. The agent's poll, bound to the claim secret, then returns
// a key exactly once.

const (
	// SignupTTL is how long a signup waits for its review.
	SignupTTL = 24 * time.Hour
	// SignupPollSeconds is the wait the poll action asks for. It matches the
	// signup rate-limit class's refill, so a polling agent is never limited.
	SignupPollSeconds = 5
	// MinSignupBudget and MaxSignupBudget bound the first project's budget
	// a review may set, in micro-USD. A larger budget is a raise, which a
	// human approves later.
	MinSignupBudget money.MicroUSD = 1_000_000
	MaxSignupBudget money.MicroUSD = 10_000_000_000
)
