package service

import (
	"slices"
	"testing"
	"time"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/registrar"
	"github.com/pierhq/pier/server/internal/store"
)

// A quote is ALLOW and held, DENY for the budget or the policy, or
// REQUIRES_APPROVAL with a gate; only ALLOW takes from the budget.
func TestQuoteDecisions(t *testing.T) {
	h := newHarness(t)
	dom := freeDomain(t, "decide", "dev")
	cases := []struct {
		name     string
		budget   int64
		pol      models.ProjectPolicy
		item     models.QuoteItem
		decision models.QuoteDecision
		reason   models.BlockedBy
		next     string
		held     bool
	}{
		{"allow", 100, DefaultPolicy(), serviceItem("dynamic_service", "process", "api"), models.ALLOW, "", "launch_service", true},
		{"over budget", 1, DefaultPolicy(), domainItem(dom), models.DENY, "budget:insufficient", "request_budget_raise", false},
		{"tld denied", 100, policy(func(p *models.ProjectPolicy) { p.TldDenylist = []string{"dev"} }), domainItem(dom), models.DENY, "policy:tld_denied", "manual:change_policy", false},
		{"not allowed", 100, policy(func(p *models.ProjectPolicy) { p.TldAllowlist = []string{"com"} }), domainItem(dom), models.DENY, "policy:tld_denied", "manual:change_policy", false},
		{"first-year ceiling", 100, policy(func(p *models.ProjectPolicy) { p.MaxFirstYearPriceUsd = ptr(5.0) }), domainItem(dom), models.DENY, "policy:price_ceiling", "manual:change_policy", false},
		{"renewal ceiling", 100, policy(func(p *models.ProjectPolicy) { p.MaxRenewalPriceUsd = ptr(5.0) }), domainItem(dom), models.DENY, "policy:price_ceiling", "manual:change_policy", false},
		{"approval", 100, policy(func(p *models.ProjectPolicy) { p.ApprovalRules.ApprovalAboveUsd = ptr(1.0) }), domainItem(dom), models.REQUIRESAPPROVAL, "policy:approval_required", "url:approve", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tn := h.tenant(c.budget, c.pol)
			q, next, err := h.svc.Quotes.Create(h.ctx, tn.agent, models.QuoteRequest{ProjectId: tn.project, Items: []models.QuoteItem{c.item}})
			h.must(err)
			if q.Decision != c.decision || (c.reason == "") != (len(q.Reasons) == 0) || c.reason != "" && q.Reasons[0] != c.reason {
				t.Fatalf("decision %s %v, want %s %s", q.Decision, q.Reasons, c.decision, c.reason)
			}
			if names(next)[0] != c.next {
				t.Fatalf("next %v, want %s first", names(next), c.next)
			}
			left := h.remaining(tn.org, tn.project)
			if held := left < c.budget*1_000_000; held != c.held || c.held && q.Undo.Irreversible {
				t.Fatalf("held %v (left %d), undo %+v", held, left, q.Undo)
			}
			h.books(tn.org, tn.project)
		})
	}
}

// What cannot be priced is refused before anything is decided.
func TestQuoteRefusals(t *testing.T) {
	h := newHarness(t, withoutDBs)
	tn := h.tenant(100, DefaultPolicy())
	badKind := models.QuoteItem{Kind: "bicycle"}
	noWorkload := models.QuoteItem{Kind: models.Service}
	cases := []struct {
		name string
		item models.QuoteItem
		code models.BlockedBy
	}{
		{"domain without name", models.QuoteItem{Kind: models.Domain}, "input:invalid"},
		{"unsold tld", domainItem("acme.nope"), "plan:domain_unavailable"},
		{"second-level", domainItem("acme.co.uk"), "plan:domain_unavailable"},
		{"registered", domainItem(takenDomain(t, "dev")), "plan:domain_unavailable"},
		{"premium", domainItem(premiumDomain(t)), "price:unavailable"},
		{"no price", domainItem(freeDomain(t, "bank", "bank")), "price:unavailable"},
		{"service without workload", noWorkload, "input:invalid"},
		{"unknown workload", serviceItem("quantum", "", ""), "input:invalid"},
		{"incapable target", serviceItem("dynamic_service", "edge", ""), "plan:target_incapable"},
		{"email without domain", models.QuoteItem{Kind: models.Email}, "input:invalid"},
		{"unknown kind", badKind, "input:invalid"},
		{"no postgres here", serviceItem("database_backed_app", "process", ""), "plan:addon_unavailable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := h.svc.Quotes.Create(h.ctx, tn.agent, models.QuoteRequest{ProjectId: tn.project, Items: []models.QuoteItem{c.item}})
			wantCode(t, err, c.code)
			_, err = h.svc.Quotes.Preview(h.ctx, tn.agent, tn.project, []models.QuoteItem{c.item})
			wantCode(t, err, c.code)
		})
	}
	_, _, err := h.svc.Quotes.Create(h.ctx, tn.agent, models.QuoteRequest{ProjectId: "prj_nope", Items: []models.QuoteItem{emailItem("a.dev")}})
	wantCode(t, err, "not_found:resource")
	h.books(tn.org, tn.project)
}

// A held quote is released once, gives its budget back, and expires on its
// own after HoldDuration; another organisation sees none of it.
func TestQuoteHoldLifecycle(t *testing.T) {
	h := newHarness(t)
	a, b := h.tenant(50, DefaultPolicy()), h.tenant(50, DefaultPolicy())
	q := h.quote(a, serviceItem("dynamic_service", "process", "api"))
	if h.remaining(a.org, a.project) >= 50_000_000 {
		t.Fatal("nothing held")
	}
	// Org B can neither read nor release A's quote.
	_, _, err := h.svc.Quotes.Get(h.ctx, b.org, q.QuoteId)
	wantCode(t, err, "not_found:resource")
	_, _, err = h.svc.Quotes.Release(h.ctx, b.agent, q.QuoteId)
	wantCode(t, err, "not_found:resource")
	if l, _, _ := h.svc.Quotes.List(h.ctx, b.org, store.Filter{}); len(l.Quotes) != 0 {
		t.Fatalf("org B lists %d quotes", len(l.Quotes))
	}
	info, next, err := h.svc.Quotes.Get(h.ctx, a.org, q.QuoteId)
	h.must(err)
	if info.State != "held" || info.HoldExpiresAt == nil || !hasAction(next, "release_quote") || len(info.Items) != 1 {
		t.Fatalf("held quote %+v %v", info, names(next))
	}
	r, _, err := h.svc.Quotes.Release(h.ctx, a.agent, q.QuoteId)
	h.must(err)
	if *r.State != "released" || r.BudgetRemainingUsd != 50 || h.remaining(a.org, a.project) != 50_000_000 {
		t.Fatalf("release %+v", r)
	}
	_, _, err = h.svc.Quotes.Release(h.ctx, a.agent, q.QuoteId)
	wantCode(t, err, "conflict:state")

	// A second hold expires when its time is up, at the next write.
	q2 := h.quote(a, serviceItem("worker", "worker", "jobs"))
	h.clock.Advance(HoldDuration + time.Second)
	if v, _, _ := h.svc.Projects.Get(h.ctx, a.org, a.project); v.RemainingUsd != 50 || len(v.ActiveHolds) != 0 {
		t.Fatalf("an expired hold still counts: %+v", v)
	}
	_, _, err = h.svc.Quotes.Release(h.ctx, a.agent, q2.QuoteId)
	wantCode(t, err, "conflict:state")
	h.quote(a, serviceItem("static_site", "edge", "")) // a write settles the books
	if got, _, _ := h.svc.Quotes.Get(h.ctx, a.org, q2.QuoteId); got.State != "expired" {
		t.Fatalf("state %s, want expired", got.State)
	}
	l, next, err := h.svc.Quotes.List(h.ctx, a.org, store.Filter{Limit: 1})
	h.must(err)
	if len(l.Quotes) != 1 || l.NextCursor == nil || !hasAction(next, "list_quotes") {
		t.Fatalf("page %+v %v", l, names(next))
	}
	h.books(a.org, a.project)
}

// A held quote offers the call that consumes it: a launch, setup_email,
// or separate quotes when no single call consumes it all.
func TestQuoteNextActions(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(1000, DefaultPolicy(), "read", "quote", "launch", "buy_domain")
	dom := freeDomain(t, "nexts", "dev")
	cases := []struct {
		name  string
		items []models.QuoteItem
		first string
		count int
	}{
		{"edge domain", []models.QuoteItem{domainItem(dom)}, "launch_service", 2},
		{"process", []models.QuoteItem{serviceItem("dynamic_service", "process", "api")}, "launch_service", 2},
		{"mail", []models.QuoteItem{emailItem(dom)}, "setup_email", 2},
		{"mixed", []models.QuoteItem{domainItem(dom), emailItem(dom), emailItem("other.dev")}, "create_quote", 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, next, err := h.svc.Quotes.Create(h.ctx, tn.agent, models.QuoteRequest{ProjectId: tn.project, Items: c.items})
			h.must(err)
			if n := names(next); n[0] != c.first || len(n) != c.count || n[len(n)-1] != "release_quote" {
				t.Fatalf("next %v", n)
			}
			if len(*q.GatedSteps) != 0 {
				t.Fatalf("buy_domain key gated on %v", *q.GatedSteps)
			}
			h.svc.Quotes.Release(h.ctx, tn.agent, q.QuoteId)
		})
	}
}

// Estimate picks the cheapest capable target, or honours an explicit one,
// and says why; unknown and incapable targets are typed refusals.
func TestEstimate(t *testing.T) {
	h := newHarness(t)
	tg := func(s string) *models.TargetName { v := models.TargetName(s); return &v }
	cases := []struct {
		workload string
		target   *models.TargetName
		selected string
		code     models.BlockedBy
	}{
		{"static_site", nil, "edge", ""},
		{"dynamic_service", nil, "process", ""},
		{"worker", nil, "worker", ""},
		{"database_backed_app", nil, "process", ""},
		{"mail_enabled_app", nil, "process", ""},
		{"worker", tg("process"), "process", ""},
		{"static_site", tg("moon"), "", "plan:unknown_target"},
		{"static_site", tg("mail"), "", "plan:target_incapable"},
		{"dynamic_service", tg("edge"), "", "plan:target_incapable"},
		{"teleport", nil, "", "input:invalid"},
	}
	for _, c := range cases {
		req := models.EstimateRequest{Workload: models.Workload(c.workload), Target: c.target, MonthlyRequests: ptr(1_000_000), MonthlyEgressGb: ptr(2.5)}
		res, next, err := h.svc.Quotes.Estimate(h.ctx, req)
		if c.code != "" {
			wantCode(t, err, c.code)
			continue
		}
		h.must(err)
		if res.SelectedTarget != c.selected || len(res.Considered) != 3 || !hasAction(next, "create_quote") {
			t.Fatalf("%s on %v: %+v", c.workload, c.target, res)
		}
		if c.target != nil && res.SelectionReason != models.EstimateResultSelectionReasonExplicitTarget {
			t.Fatalf("reason %s", res.SelectionReason)
		}
	}
}

// Preview decides as Create would and holds nothing.
func TestQuotePreview(t *testing.T) {
	h := newHarness(t)
	dom := freeDomain(t, "peek", "dev")
	cases := []struct {
		pol      models.ProjectPolicy
		decision string
	}{
		{DefaultPolicy(), "ALLOW"},
		{policy(func(p *models.ProjectPolicy) { p.TldDenylist = []string{"dev"} }), "DENY"},
		{policy(func(p *models.ProjectPolicy) { p.ApprovalRules.ApprovalAboveUsd = ptr(1.0) }), "REQUIRES_APPROVAL"},
	}
	for _, c := range cases {
		tn := h.tenant(100, c.pol)
		pv, err := h.svc.Quotes.Preview(h.ctx, tn.agent, tn.project, []models.QuoteItem{domainItem(dom)})
		h.must(err)
		if pv.Decision != c.decision || pv.AmountMicro != 12_000_000 || !slices.Equal(pv.Domains, []string{dom}) {
			t.Fatalf("preview %+v, want %s", pv, c.decision)
		}
		if h.remaining(tn.org, tn.project) != 100_000_000 {
			t.Fatal("a preview held budget")
		}
	}
	tn := h.tenant(100, DefaultPolicy())
	_, err := h.svc.Quotes.Preview(h.ctx, tn.agent, "prj_missing", []models.QuoteItem{domainItem(dom)})
	wantCode(t, err, "not_found:resource")
}

// An operator's price list moves the sandbox registrar's first-year price.
func TestQuoteUsesOperatorPrices(t *testing.T) {
	h := newHarness(t, withPrices(registrar.PriceList{"dev": registrar.USD(3, 0)}))
	tn := h.tenant(100, DefaultPolicy())
	q := h.quote(tn, domainItem(freeDomain(t, "cheap", "dev")))
	if q.AmountUsd != 3 {
		t.Fatalf("amount %v, want 3", q.AmountUsd)
	}
}

// premiumDomain is an available two-letter name: premium, with no price.
func premiumDomain(t *testing.T) string {
	tl, _ := registrar.Lookup("dev")
	for _, a := range "abcdefghijklmnopqrstuvwxyz" {
		for _, b := range "abcdefghijklmnopqrstuvwxyz" {
			if q := registrar.Check(string(a)+string(b), tl); q.Available {
				return q.Domain
			}
		}
	}
	t.Fatal("no two-letter name free")
	return ""
}
