package service

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/payments"
	"github.com/pierhq/pier/server/internal/store"
)

func decision(budgetUSD int64) ReviewDecision {
	return ReviewDecision{OrganizationName: " Acme ", ProjectName: "site", HumanName: "Ada", Email: "ada@example.org", BudgetMicro: money.MicroUSD(budgetUSD * 1_000_000)}
}

func reviewToken(url string) string { return url[strings.LastIndex(url, "/")+1:] }

var goodCard = payments.Card{Number: "4242 4242 4242 4242", ExpMonth: 12, ExpYear: 2030, CVC: "123"}

// A signup is started by an agent, reviewed and carded by a human, and
// claimed by the agent's poll exactly once.
func TestSignupFlow(t *testing.T) {
	h := newHarness(t)
	req := SignupRequest{Email: "ada@example.org", OrganizationName: "Acme"}
	su, err := h.svc.Onboarding.StartSignup(h.ctx, "203.0.113.9", req)
	h.must(err)
	if su.Receipt.Action != "create_signup" || !su.Undo.Irreversible || su.BudgetRemaining != 0 {
		t.Fatalf("signup %+v", su)
	}
	again, _ := h.svc.Onboarding.StartSignup(h.ctx, "203.0.113.9", SignupRequest{Email: " ADA@example.org", OrganizationName: "Acme "})
	other, _ := h.svc.Onboarding.StartSignup(h.ctx, "198.51.100.1", req)
	if again.ID != su.ID || again.ClaimSecret != su.ClaimSecret || other.ID == su.ID {
		t.Fatal("a retried signup is not the same session, or another caller's is")
	}
	poll := func() (*SignupPoll, error) { return h.svc.Onboarding.PollSignup(h.ctx, su.ID, su.ClaimSecret) }
	wantCode(t, second2(h.svc.Onboarding.PollSignup(h.ctx, su.ID, "wrong")), "not_found:resource")
	wantCode(t, second2(h.svc.Onboarding.PollSignup(h.ctx, "sus_nope", su.ClaimSecret)), "not_found:resource")
	if r, _ := poll(); r.State != SignupPendingReview || r.OrgID != "" || r.CardURL != "" {
		t.Fatalf("poll %+v", r)
	}
	token := reviewToken(su.ReviewURL)
	rv, err := h.svc.Onboarding.SignupForReview(h.ctx, token)
	h.must(err)
	if rv.OrgName != "Acme" || rv.Expired {
		t.Fatalf("review %+v", rv)
	}
	ap, err := h.svc.Onboarding.ApproveSignup(h.ctx, token, decision(50))
	h.must(err)
	wantCode(t, second2(h.svc.Onboarding.ApproveSignup(h.ctx, token, decision(50))), "conflict:state")
	if r, _ := poll(); r.State != SignupPendingCard || r.CardURL != h.svc.Onboarding.BillingURL(ap.SetupID) || r.OrgID == "" {
		t.Fatalf("poll %+v", r)
	}
	hu := ap.Session.Human
	cs, err := h.svc.Onboarding.CardSetupFor(h.ctx, hu, ap.SetupID)
	h.must(err)
	if !cs.ForSignup || cs.State != BillingPending || cs.Card != nil {
		t.Fatalf("card setup %+v", cs)
	}
	_, err = h.svc.Onboarding.SubmitCard(h.ctx, hu, ap.SetupID, payments.Card{Number: "4000000000000002", ExpMonth: 1, ExpYear: 2031, CVC: "123"})
	var decline *payments.Decline
	if !errors.As(err, &decline) || decline.Code != payments.CardDeclined {
		t.Fatalf("declined card: %v", err)
	}
	if cs, _ := h.svc.Onboarding.CardSetupFor(h.ctx, hu, ap.SetupID); cs.DeclineCode != payments.CardDeclined || cs.State == BillingComplete {
		t.Fatalf("after a decline %+v", cs)
	}
	pm, err := h.svc.Onboarding.SubmitCard(h.ctx, hu, ap.SetupID, goodCard)
	h.must(err)
	if pm.Last4 != "4242" || pm.Brand != "visa" {
		t.Fatalf("card %+v", pm)
	}
	wantCode(t, second2(h.svc.Onboarding.SubmitCard(h.ctx, hu, ap.SetupID, goodCard)), "conflict:state")
	r, err := poll()
	h.must(err)
	if r.State != SignupComplete || r.APIKey == "" || r.ProjectID == "" {
		t.Fatalf("claim %+v", r)
	}
	if r, _ := poll(); r.State != SignupClaimed || r.APIKey != "" {
		t.Fatalf("second claim %+v", r)
	}
	keys, _ := h.svc.Accounts.ListKeys(h.ctx, hu.OrgID)
	if len(keys) != 1 || keys[0].HasScope("buy_domain") {
		t.Fatalf("keys %+v", keys)
	}
}

func second2[A any](_ A, err error) error { return err }

// A review is refused, typed, when its decision is out of bounds, its
// link unknown, or its signup expired.
func TestSignupReviewRefusals(t *testing.T) {
	h := newHarness(t)
	su, _ := h.svc.Onboarding.StartSignup(h.ctx, "x", SignupRequest{})
	token := reviewToken(su.ReviewURL)
	long := strings.Repeat("a", 101)
	for _, c := range []struct {
		mod  func(*ReviewDecision)
		code models.BlockedBy
	}{
		{func(d *ReviewDecision) { d.OrganizationName = " " }, "input:invalid"},
		{func(d *ReviewDecision) { d.ProjectName = long }, "input:invalid"},
		{func(d *ReviewDecision) { d.HumanName = long }, "input:invalid"},
		{func(d *ReviewDecision) { d.BudgetMicro = MinSignupBudget - 1 }, "input:invalid"},
		{func(d *ReviewDecision) { d.BudgetMicro = MaxSignupBudget + 1 }, "input:invalid"},
		{func(d *ReviewDecision) { d.ApprovalAboveMicro = ptr(money.MicroUSD(-1)) }, "input:invalid"},
	} {
		d := decision(10)
		c.mod(&d)
		wantCode(t, second2(h.svc.Onboarding.ApproveSignup(h.ctx, token, d)), c.code)
	}
	wantCode(t, second2(h.svc.Onboarding.ApproveSignup(h.ctx, "nope", decision(10))), "not_found:resource")
	wantCode(t, second2(h.svc.Onboarding.SignupForReview(h.ctx, "nope")), "not_found:resource")
	h.clock.Advance(SignupTTL)
	if rv, _ := h.svc.Onboarding.SignupForReview(h.ctx, token); !rv.Expired {
		t.Fatal("not expired after SignupTTL")
	}
	if r, _ := h.svc.Onboarding.PollSignup(h.ctx, su.ID, su.ClaimSecret); r.State != SignupExpired {
		t.Fatalf("poll %s", r.State)
	}
	wantCode(t, second2(h.svc.Onboarding.ApproveSignup(h.ctx, token, decision(10))), "conflict:expired")
	// With an approval threshold, the first project sends purchases above it to a human.
	su2, _ := h.svc.Onboarding.StartSignup(h.ctx, "y", SignupRequest{})
	d := decision(10)
	d.ApprovalAboveMicro, d.HumanName = ptr(money.MicroUSD(5_000_000)), ""
	ap, err := h.svc.Onboarding.ApproveSignup(h.ctx, reviewToken(su2.ReviewURL), d)
	h.must(err)
	pl, _ := h.svc.Projects.List(h.ctx, ap.Session.OrgID, store.Filter{})
	if a := pl.Items[0].Policy.ApprovalRules.ApprovalAbove; a == nil || *a != 5_000_000 || ap.Session.Name != "Owner" {
		t.Fatalf("project %+v, human %q", pl.Items[0].Policy, ap.Session.Name)
	}
}

// A card flow an agent opens is polled with its secret, by its own
// organisation only, until the human completes or it expires.
func TestBillingSetup(t *testing.T) {
	h := newHarness(t)
	a, b := h.tenant(10, DefaultPolicy()), h.tenant(10, DefaultPolicy())
	link, err := h.svc.Onboarding.CreateBillingSetupLink(h.ctx, a.agent, "")
	h.must(err)
	if link.BudgetRemaining != 10_000_000 || link.URL != h.svc.Onboarding.BillingURL(link.ID) || link.Receipt.Created[0].URL != link.URL {
		t.Fatalf("link %+v", link)
	}
	if cs, _ := h.svc.Onboarding.CardSetupFor(h.ctx, a.human, link.ID); cs.Reason != "scratch_account" {
		t.Fatalf("reason %q", cs.Reason)
	}
	poll := func(p tenant, id, secret string) (*BillingPoll, error) {
		return h.svc.Onboarding.PollBilling(h.ctx, p.agent, id, secret)
	}
	wantCode(t, second2(poll(b, link.ID, link.PollSecret)), "not_found:resource")
	wantCode(t, second2(poll(a, link.ID, "x")), "not_found:resource")
	wantCode(t, second2(h.svc.Onboarding.CardSetupFor(h.ctx, b.human, link.ID)), "not_found:resource")
	wantCode(t, second2(h.svc.Onboarding.SubmitCard(h.ctx, b.human, link.ID, goodCard)), "not_found:resource")
	if r, _ := poll(a, link.ID, link.PollSecret); r.State != BillingPending || r.CardURL != link.URL {
		t.Fatalf("poll %s", r.State)
	}
	for _, c := range []struct {
		card payments.Card
		code string
	}{
		{payments.Card{Number: "1234", ExpMonth: 1, ExpYear: 2030, CVC: "123"}, payments.IncorrectNumber},
		{payments.Card{Number: goodCard.Number, ExpMonth: 13, ExpYear: 2030, CVC: "123"}, payments.InvalidExpiry},
		{payments.Card{Number: goodCard.Number, ExpMonth: 1, ExpYear: 2020, CVC: "123"}, payments.ExpiredCard},
		{payments.Card{Number: goodCard.Number, ExpMonth: 1, ExpYear: 2030, CVC: "1"}, payments.InvalidCVC},
		{payments.Card{Number: "4000000000009995", ExpMonth: 1, ExpYear: 2030, CVC: "123"}, payments.InsufficientFunds},
	} {
		var d *payments.Decline
		if _, err := h.svc.Onboarding.SubmitCard(h.ctx, a.human, link.ID, c.card); !errors.As(err, &d) || d.Code != c.code {
			t.Fatalf("want %s, got %v", c.code, err)
		}
	}
	h.must(second2(h.svc.Onboarding.SubmitCard(h.ctx, a.human, link.ID, goodCard)))
	if r, _ := poll(a, link.ID, link.PollSecret); r.State != BillingComplete || r.CardURL != "" {
		t.Fatalf("poll %s", r.State)
	}
	if pm, _ := h.svc.Onboarding.PaymentMethodFor(h.ctx, a.org); pm == nil || pm.Last4 != "4242" {
		t.Fatalf("card on file %+v", pm)
	}
	id, err := h.svc.Onboarding.OpenCardSetup(h.ctx, a.human)
	h.must(err)
	if cs, _ := h.svc.Onboarding.CardSetupFor(h.ctx, a.human, id); cs.Reason != "replace_card" || cs.Card == nil {
		t.Fatalf("replace %+v", cs)
	}
	// Past its life a flow expires, and the card on file expires with time too.
	h.clock.Advance(BillingSetupTTL)
	cardLink, _ := h.svc.Onboarding.CreateBillingSetupLink(h.ctx, a.agent, "")
	h.clock.Advance(5 * 365 * 24 * time.Hour)
	if r, _ := poll(a, cardLink.ID, cardLink.PollSecret); r.State != BillingExpired || r.CardURL != "" {
		t.Fatalf("poll %s", r.State)
	}
	wantCode(t, second2(h.svc.Onboarding.SubmitCard(h.ctx, a.human, cardLink.ID, goodCard)), "conflict:expired")
	id, _ = h.svc.Onboarding.OpenCardSetup(h.ctx, a.human)
	if cs, _ := h.svc.Onboarding.CardSetupFor(h.ctx, a.human, id); cs.Reason != "expired_card" {
		t.Fatalf("reason %q", cs.Reason)
	}
	l, err := h.svc.Onboarding.CreateBillingSetupLink(h.ctx, a.agent, "expired_card")
	h.must(err)
	if cs, _ := h.svc.Onboarding.CardSetupFor(h.ctx, a.human, l.ID); cs.Reason != "expired_card" {
		t.Fatalf("link with reason: %q", cs.Reason)
	}
	if money.MicroUSD(-12_345_000).String() != "-$12.35" {
		t.Fatal(money.MicroUSD(-12_345_000).String())
	}
}
