package service

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/payments"
	"github.com/pierhq/pier/server/internal/store"
)

// Billing: card flows on the built-in test payment provider. A signup opens
// one after its review; an agent opens one for an existing account (a
// scratch account without a card, or an expired card). The card page acts
// only for a signed-in human of the organisation; the agent polls with the
// flow's secret.

// BillingSetupTTL is how long a card flow stays open.
const BillingSetupTTL = 24 * time.Hour

// BillingURL is the card page of a flow. Like an approval URL it carries
// an id and no authority.
func (s *Service) BillingURL(id string) string { return s.baseURL() + "/billing/" + id }

// FormatUSD renders micro-USD for people, such as "$12.50".
func FormatUSD[T ~int64](m T) string {
	sign := ""
	if m < 0 {
		sign, m = "-", -m
	}
	cents := (int64(m) + 5_000) / 10_000
	return fmt.Sprintf("%s$%d.%02d", sign, cents/100, cents%100)
}

// openBillingSetup records a pending card flow inside tx and returns it
// with its poll secret.
func (s *Service) openBillingSetup(ctx context.Context, tx *store.Tx, orgID, reason, signupID, actor string, now time.Time) (store.BillingSetup, string, error) {
	secret := auth.Token(32)
	b := store.BillingSetup{ID: auth.ID("bss"), OrgID: orgID, SecretHash: auth.HashKey(secret), Reason: reason, SignupID: signupID,
		State: "pending", CreatedAt: now.UTC(), ExpiresAt: now.Add(BillingSetupTTL).UTC().Truncate(time.Second)}
	if err := tx.Onboarding().CreateBillingSetup(ctx, b); err != nil {
		return b, "", err
	}
	_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: orgID, Actor: actor, Action: "open_billing_setup", ObjectType: "billing_setup", ObjectID: b.ID,
		Details: map[string]any{"reason": reason, "expiresAt": b.ExpiresAt.Format(time.RFC3339)}}, now)
	return b, secret, err
}

// orgRemaining is what the organisation's projects have left to spend.
func (s *Service) orgRemaining(ctx context.Context, orgID string) (int64, error) {
	ps, err := s.Store.Projects().List(ctx, orgID)
	if err != nil {
		return 0, err
	}
	var left int64
	for _, p := range ps {
		holds, err := s.Store.Quotes().ActiveHolds(ctx, p.ID, s.Now())
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

func (s *Service) billingPoll(id, secret string) sdk.ToolAction {
	t := actions.ToolAction("poll_billing", "agent", map[string]any{"setupSessionId": id, "pollSecret": secret})
	t.RetryAfterSeconds = ptr(SignupPollSeconds)
	return t
}

// CreateBillingSetupLink opens a card flow for the caller's organisation
// and returns the page for its human and the secret its poll is bound to.
func (s *Service) CreateBillingSetupLink(ctx context.Context, p *auth.Principal, req sdk.BillingSetupLinkRequest) (*sdk.BillingSetupLink, []sdk.Action, error) {
	reason := ""
	if req.Reason != nil {
		reason = string(*req.Reason)
	}
	if reason == "" {
		// Say why, from the account's state: no card yet, an expired one,
		// or a working card being replaced.
		pm, err := s.Store.Onboarding().ActivePaymentMethod(ctx, p.OrgID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			reason = "scratch_account"
		case err != nil:
			return nil, nil, apierr.Internal(err)
		case payments.Expired(pm.ExpMonth, pm.ExpYear, s.Now()):
			reason = "expired_card"
		default:
			reason = "replace_card"
		}
	}
	var b store.BillingSetup
	var secret string
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		b, secret, err = s.openBillingSetup(ctx, tx, p.OrgID, reason, "", actorOf(p), s.Now())
		return err
	})
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	left, err := s.orgRemaining(ctx, p.OrgID)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	url := s.BillingURL(b.ID)
	m := s.Mutation("create_billing_setup_link", nil, []sdk.ResourceRef{{Type: "billing_setup", Id: b.ID, Url: &url}}, nil, left)
	out := &sdk.BillingSetupLink{SetupUrl: url, SetupSessionId: b.ID, PollSecret: secret, ExpiresAt: b.ExpiresAt,
		Receipt: m.Receipt, Undo: m.Undo, BudgetRemainingUsd: m.BudgetRemainingUsd}
	card := sdk.UrlAction{Kind: sdk.Url, Id: ptr("card"), Actor: "human", Url: url, Purpose: sdk.CardSetup}
	poll := s.billingPoll(b.ID, secret)
	poll.After = &[]string{"card"}
	return out, []sdk.Action{actions.Wrap(card), actions.Wrap(poll)}, nil
}

// PollBilling reports a card flow's state to the caller's organisation,
// bound to the flow's secret: another organisation, an unknown flow and a
// wrong secret get the same answer.
func (s *Service) PollBilling(ctx context.Context, p *auth.Principal, req sdk.BillingPollRequest) (*sdk.BillingPollResult, []sdk.Action, error) {
	b, err := s.Store.Onboarding().BillingSetup(ctx, p.OrgID, req.SetupSessionId)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, nil, apierr.Internal(err)
	}
	stored := b.SecretHash
	if stored == "" {
		stored = strings.Repeat("0", 64)
	}
	if subtle.ConstantTimeCompare([]byte(auth.HashKey(req.PollSecret)), []byte(stored)) != 1 || b.ID == "" {
		return nil, nil, apierr.New("not_found:resource", "no card flow in your organisation matches this id and secret",
			actions.Tool("create_billing_setup_link", "agent", nil))
	}
	state := b.State
	if state != "complete" && !s.Now().Before(b.ExpiresAt) {
		state = "expired"
	}
	res := &sdk.BillingPollResult{State: sdk.BillingPollResultState(state)}
	switch state {
	case "complete":
		return res, []sdk.Action{actions.Stop("done")}, nil
	case "expired":
		return res, []sdk.Action{actions.Tool("create_billing_setup_link", "agent", nil)}, nil
	}
	card := actions.URL(s.BillingURL(b.ID), sdk.CardSetup, "human")
	return res, []sdk.Action{card, actions.Wrap(s.billingPoll(b.ID, req.PollSecret))}, nil
}

// CardSetup is what the card page shows.
type CardSetup struct {
	ID, Reason, State, DeclineCode string
	Expired                        bool
	ForSignup                      bool
	ExpiresAt                      time.Time
	Card                           *store.PaymentMethod // the card the flow added, or the one on file
}

func setupNotFound(id string) *apierr.Error {
	return apierr.Newf("not_found:resource", "no card setup %s in your organisation", id)
}

// CardSetupFor reads a card flow of the human's organisation.
func (s *Service) CardSetupFor(ctx context.Context, h Human, id string) (CardSetup, error) {
	b, err := s.Store.Onboarding().BillingSetup(ctx, h.OrgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return CardSetup{}, setupNotFound(id)
	}
	if err != nil {
		return CardSetup{}, apierr.Internal(err)
	}
	cs := CardSetup{ID: b.ID, Reason: b.Reason, State: b.State, DeclineCode: b.DeclineCode, ForSignup: b.SignupID != "", ExpiresAt: b.ExpiresAt,
		Expired: b.State != "complete" && !s.Now().Before(b.ExpiresAt)}
	if pm, err := s.Store.Onboarding().ActivePaymentMethod(ctx, h.OrgID); err == nil {
		cs.Card = &pm
	}
	return cs, nil
}

// SubmitCard runs a card through the test provider for a flow of the
// human's organisation. A refused card is recorded (brand and last four
// only) and returned as a *payments.Decline; the flow stays open for
// another try. An accepted card becomes the organisation's card on file,
// and completes the signup the flow belongs to.
func (s *Service) SubmitCard(ctx context.Context, h Human, id string, card payments.Card) (store.PaymentMethod, error) {
	var pm store.PaymentMethod
	var decline *payments.Decline
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		now := s.Now()
		b, err := tx.Onboarding().LockBillingSetup(ctx, h.OrgID, id)
		if errors.Is(err, store.ErrNotFound) {
			return setupNotFound(id)
		}
		if err != nil {
			return err
		}
		if b.State == "complete" {
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
func (s *Service) PaymentMethodFor(ctx context.Context, orgID string) (*store.PaymentMethod, error) {
	pm, err := s.Store.Onboarding().ActivePaymentMethod(ctx, orgID)
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
func (s *Service) OpenCardSetup(ctx context.Context, h Human) (string, error) {
	reason := "replace_card"
	if pm, err := s.Store.Onboarding().ActivePaymentMethod(ctx, h.OrgID); errors.Is(err, store.ErrNotFound) {
		reason = "scratch_account"
	} else if err != nil {
		return "", err
	} else if payments.Expired(pm.ExpMonth, pm.ExpYear, s.Now()) {
		reason = "expired_card"
	}
	var id string
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		b, _, err := s.openBillingSetup(ctx, tx, h.OrgID, reason, "", signedInActor(h), s.Now())
		id = b.ID
		return err
	})
	return id, err
}
