package service

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/money"
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
		pol      ProjectPolicy
		item     QuoteItem
		decision QuoteDecision
		reason   apierr.Code
		held     bool
	}{
		{"allow", 100, DefaultPolicy(), serviceItem("dynamic_service", "process", "api"), QuoteAllow, "", true},
		{"over budget", 1, DefaultPolicy(), domainItem(dom), QuoteDeny, "budget:insufficient", false},
		{"tld denied", 100, policy(func(p *ProjectPolicy) { p.TLDDenylist = []string{"dev"} }), domainItem(dom), QuoteDeny, "policy:tld_denied", false},
		{"not allowed", 100, policy(func(p *ProjectPolicy) { p.TLDAllowlist = []string{"com"} }), domainItem(dom), QuoteDeny, "policy:tld_denied", false},
		{"first-year ceiling", 100, policy(func(p *ProjectPolicy) { p.MaxFirstYearPrice = ptr(money.FromUSD(5.0)) }), domainItem(dom), QuoteDeny, "policy:price_ceiling", false},
		{"renewal ceiling", 100, policy(func(p *ProjectPolicy) { p.MaxRenewalPrice = ptr(money.FromUSD(5.0)) }), domainItem(dom), QuoteDeny, "policy:price_ceiling", false},
		{"approval", 100, policy(func(p *ProjectPolicy) { p.ApprovalRules.ApprovalAbove = ptr(money.FromUSD(1.0)) }), domainItem(dom), QuoteRequiresApproval, "policy:approval_required", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tn := h.tenant(c.budget, c.pol)
			q, err := h.svc.Quotes.Create(h.ctx, tn.agent, QuoteRequest{ProjectID: tn.project, Items: []QuoteItem{c.item}})
			h.must(err)
			if q.Decision != c.decision || (c.reason == "") != (len(q.Reasons) == 0) || c.reason != "" && q.Reasons[0] != c.reason {
				t.Fatalf("decision %s %v, want %s %s", q.Decision, q.Reasons, c.decision, c.reason)
			}
			if gated := q.GateTaskID != "" && q.ApprovalURL != ""; gated != (c.decision == QuoteRequiresApproval) {
				t.Fatalf("gate %q %q for a %s quote", q.GateTaskID, q.ApprovalURL, q.Decision)
			}
			left := h.remaining(tn.org, tn.project)
			if held := left < c.budget*1_000_000; held != c.held || held != (q.State == QuoteHeld) || held != (q.HoldExpiresAt != nil) {
				t.Fatalf("held %v (left %d), quote %+v", held, left, q)
			}
			if int64(q.BudgetRemaining) != left || len(q.Lines) != 1 {
				t.Fatalf("remaining %d, left %d, lines %v", q.BudgetRemaining, left, q.Lines)
			}
			h.books(tn.org, tn.project)
		})
	}
}

// What cannot be priced is refused before anything is decided.
func TestQuoteRefusals(t *testing.T) {
	h := newHarness(t, withoutDBs)
	tn := h.tenant(100, DefaultPolicy())
	badKind := QuoteItem{Kind: "bicycle"}
	noWorkload := QuoteItem{Kind: ItemService}
	cases := []struct {
		name string
		item QuoteItem
		code apierr.Code
	}{
		{"domain without name", QuoteItem{Kind: ItemDomain}, "input:invalid"},
		{"unsold tld", domainItem("acme.nope"), "plan:domain_unavailable"},
		{"second-level", domainItem("acme.co.uk"), "plan:domain_unavailable"},
		{"registered", domainItem(takenDomain(t, "dev")), "plan:domain_unavailable"},
		{"premium", domainItem(premiumDomain(t)), "price:unavailable"},
		{"no price", domainItem(freeDomain(t, "bank", "bank")), "price:unavailable"},
		{"service without workload", noWorkload, "input:invalid"},
		{"unknown workload", serviceItem("quantum", "", ""), "input:invalid"},
		{"incapable target", serviceItem("dynamic_service", "edge", ""), "plan:target_incapable"},
		{"email without domain", QuoteItem{Kind: ItemEmail}, "input:invalid"},
		{"unknown kind", badKind, "input:invalid"},
		{"no postgres here", serviceItem("database_backed_app", "process", ""), "plan:addon_unavailable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := h.svc.Quotes.Create(h.ctx, tn.agent, QuoteRequest{ProjectID: tn.project, Items: []QuoteItem{c.item}})
			wantCode(t, err, c.code)
			_, err = h.svc.Quotes.Preview(h.ctx, tn.agent, tn.project, []QuoteItem{c.item})
			wantCode(t, err, c.code)
		})
	}
	_, err := h.svc.Quotes.Create(h.ctx, tn.agent, QuoteRequest{ProjectID: "prj_nope", Items: []QuoteItem{emailItem("a.dev")}})
	wantCode(t, err, "not_found:resource")
	h.books(tn.org, tn.project)
}

// A name under a registrable domain (www.acme.dev) is not for sale: the
// refusal searches for the domain it lies under and lists the caller's
// domains, where it would be attached; a second-level public suffix
// (acme.co.uk) is refused as an unsold TLD.
func TestQuoteNameUnderADomain(t *testing.T) {
	h := newHarness(t, withoutDBs)
	tn := h.tenant(100, DefaultPolicy())
	_, err := h.svc.Quotes.Create(h.ctx, tn.agent, QuoteRequest{ProjectID: tn.project, Items: []QuoteItem{domainItem("www.acme.dev")}})
	e := wantCode(t, err, "plan:domain_unavailable")
	if !strings.Contains(e.Message, "acme.dev") || !hasAction(e.Actions, "list_domains") {
		t.Errorf("refusal %q, actions %+v", e.Message, e.Actions)
	}
	args := toolArgs(t, e.Actions, "search_domains")
	if args["q"] != "acme" {
		t.Errorf("search_domains args %v, want q acme", args)
	}
	_, err = h.svc.Quotes.Create(h.ctx, tn.agent, QuoteRequest{ProjectID: tn.project, Items: []QuoteItem{domainItem("shop.acme.co.uk")}})
	if e := wantCode(t, err, "plan:domain_unavailable"); !strings.Contains(e.Message, "does not sell") {
		t.Errorf("a name under a second-level suffix: %q", e.Message)
	}
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
	_, err := h.svc.Quotes.Get(h.ctx, b.org, q.ID)
	wantCode(t, err, "not_found:resource")
	_, err = h.svc.Quotes.Release(h.ctx, b.agent, q.ID)
	wantCode(t, err, "not_found:resource")
	if l, _ := h.svc.Quotes.List(h.ctx, b.org, store.Filter{}); len(l.Items) != 0 {
		t.Fatalf("org B lists %d quotes", len(l.Items))
	}
	info, err := h.svc.Quotes.Get(h.ctx, a.org, q.ID)
	h.must(err)
	if info.State != QuoteHeld || info.HoldExpiresAt == nil || len(info.Items) != 1 || info.Items[0].Workload != "dynamic_service" {
		t.Fatalf("held quote %+v", info)
	}
	r, err := h.svc.Quotes.Release(h.ctx, a.agent, q.ID)
	h.must(err)
	if r.State != QuoteReleased || r.BudgetRemaining != 50_000_000 || h.remaining(a.org, a.project) != 50_000_000 {
		t.Fatalf("release %+v", r)
	}
	_, err = h.svc.Quotes.Release(h.ctx, a.agent, q.ID)
	wantCode(t, err, "conflict:state")

	// A second hold expires when its time is up, at the next write.
	q2 := h.quote(a, serviceItem("worker", "worker", "jobs"))
	h.clock.Advance(HoldDuration + time.Second)
	if v, _ := h.svc.Projects.Get(h.ctx, a.org, a.project); v.Remaining != 50_000_000 || len(v.Holds) != 0 {
		t.Fatalf("an expired hold still counts: %+v", v)
	}
	_, err = h.svc.Quotes.Release(h.ctx, a.agent, q2.ID)
	wantCode(t, err, "conflict:state")
	h.quote(a, serviceItem("static_site", "edge", "")) // a write settles the books
	if got, _ := h.svc.Quotes.Get(h.ctx, a.org, q2.ID); got.State != QuoteExpired || got.HoldExpiresAt != nil {
		t.Fatalf("state %s, want expired", got.State)
	}
	l, err := h.svc.Quotes.List(h.ctx, a.org, store.Filter{Limit: 1})
	h.must(err)
	if len(l.Items) != 1 || l.NextCursor == nil || l.Args["limit"] != 1 {
		t.Fatalf("page %+v", l)
	}
	h.books(a.org, a.project)
}

// A quote answers the items it priced, with their years and months, and
// a key with buy_domain has no step gated.
func TestQuoteItems(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(1000, DefaultPolicy(), "read", "quote", "launch", "buy_domain")
	dom := freeDomain(t, "nexts", "dev")
	items := []QuoteItem{domainItem(dom), serviceItem("dynamic_service", "", "api"), emailItem(dom)}
	q, err := h.svc.Quotes.Create(h.ctx, tn.agent, QuoteRequest{ProjectID: tn.project, Items: items})
	h.must(err)
	want := []QuoteItem{{Kind: ItemDomain, Domain: dom, Years: 1}, {Kind: ItemService, Workload: "dynamic_service", Target: "process", Months: 1, Name: "api"},
		{Kind: ItemEmail, Domain: dom, Months: 1}}
	if !slices.Equal(q.Items, want) || q.GatedSteps == nil || len(q.GatedSteps) != 0 {
		t.Fatalf("items %+v, gated %v", q.Items, q.GatedSteps)
	}
	args := QuoteArgs(tn.project, q.Items)
	if l := args["items"].([]any); len(l) != 3 || l[0].(map[string]any)["kind"] != "domain" || l[1].(map[string]any)["name"] != "api" {
		t.Fatalf("args %v", args)
	}
}

// Estimate picks the cheapest capable target, or honours an explicit one,
// and says why; unknown and incapable targets are typed refusals.
func TestEstimate(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		workload string
		target   string
		selected string
		code     apierr.Code
	}{
		{"static_site", "", "edge", ""},
		{"dynamic_service", "", "process", ""},
		{"worker", "", "worker", ""},
		{"database_backed_app", "", "process", ""},
		{"mail_enabled_app", "", "process", ""},
		{"worker", "process", "process", ""},
		{"static_site", "moon", "", "plan:unknown_target"},
		{"static_site", "mail", "", "plan:target_incapable"},
		{"dynamic_service", "edge", "", "plan:target_incapable"},
		{"teleport", "", "", "input:invalid"},
	}
	for _, c := range cases {
		req := EstimateRequest{Workload: c.workload, Target: c.target, MonthlyRequests: ptr(1_000_000), MonthlyEgressGB: ptr(2.5)}
		res, err := h.svc.Quotes.Estimate(h.ctx, req)
		if c.code != "" {
			wantCode(t, err, c.code)
			continue
		}
		h.must(err)
		if res.Selected != c.selected || len(res.Considered) != 3 || res.Assumptions[0].Source != FromRequest {
			t.Fatalf("%s on %q: %+v", c.workload, c.target, res)
		}
		if want := map[bool]TargetReason{true: TargetExplicit, false: TargetCheapestCapable}[c.target != ""]; res.SelectionReason != want || res.Evidence[0].Target != c.selected {
			t.Fatalf("reason %s, evidence %+v", res.SelectionReason, res.Evidence)
		}
	}
}

// Preview decides as Create would and holds nothing.
func TestQuotePreview(t *testing.T) {
	h := newHarness(t)
	dom := freeDomain(t, "peek", "dev")
	cases := []struct {
		pol      ProjectPolicy
		decision QuoteDecision
	}{
		{DefaultPolicy(), QuoteAllow},
		{policy(func(p *ProjectPolicy) { p.TLDDenylist = []string{"dev"} }), QuoteDeny},
		{policy(func(p *ProjectPolicy) { p.ApprovalRules.ApprovalAbove = ptr(money.FromUSD(1.0)) }), QuoteRequiresApproval},
	}
	for _, c := range cases {
		tn := h.tenant(100, c.pol)
		pv, err := h.svc.Quotes.Preview(h.ctx, tn.agent, tn.project, []QuoteItem{domainItem(dom)})
		h.must(err)
		if pv.Decision != c.decision || pv.AmountMicro != 12_000_000 || !slices.Equal(pv.Domains, []string{dom}) {
			t.Fatalf("preview %+v, want %s", pv, c.decision)
		}
		if h.remaining(tn.org, tn.project) != 100_000_000 {
			t.Fatal("a preview held budget")
		}
	}
	tn := h.tenant(100, DefaultPolicy())
	_, err := h.svc.Quotes.Preview(h.ctx, tn.agent, "prj_missing", []QuoteItem{domainItem(dom)})
	wantCode(t, err, "not_found:resource")
}

// An operator's price list moves the sandbox registrar's first-year price.
func TestQuoteUsesOperatorPrices(t *testing.T) {
	h := newHarness(t, withPrices(registrar.PriceList{"dev": registrar.USD(3, 0)}))
	tn := h.tenant(100, DefaultPolicy())
	q := h.quote(tn, domainItem(freeDomain(t, "cheap", "dev")))
	if q.Amount != 3_000_000 {
		t.Fatalf("amount %v, want 3 USD", q.Amount)
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

// toolArgs is the arguments of the tool action in acts that calls tool.
func toolArgs(t *testing.T, acts []models.Action, tool string) map[string]any {
	t.Helper()
	for _, a := range acts {
		ta, err := a.AsToolAction()
		if err != nil || ta.Kind != models.Tool || ta.Tool != tool {
			continue
		}
		if ta.Arguments == nil {
			return map[string]any{}
		}
		return *ta.Arguments
	}
	t.Fatalf("no %s action in %v", tool, names(acts))
	return nil
}
