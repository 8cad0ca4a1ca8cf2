package service

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/registrar"
)

// Concurrent quotes never hold more than the budget: of twenty 7 USD
// holds on a 50 USD budget, exactly seven are allowed.
func TestBudgetNeverOverspent(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(50, DefaultPolicy())
	var wg sync.WaitGroup
	var mu sync.Mutex
	decisions := map[QuoteDecision]int{}
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q, err := h.svc.Quotes.Create(h.ctx, tn.agent, QuoteRequest{ProjectID: tn.project,
				Items: []QuoteItem{serviceItem("dynamic_service", "process", "")}})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				decisions["error:"+QuoteDecision(err.Error())]++
				return
			}
			decisions[q.Decision]++
		}()
	}
	wg.Wait()
	if decisions[QuoteAllow] != 7 || decisions[QuoteDeny] != 13 {
		t.Fatalf("decisions %v", decisions)
	}
	h.books(tn.org, tn.project)
	if left := h.remaining(tn.org, tn.project); left != 1_000_000 {
		t.Fatalf("remaining %d, want 1 USD", left)
	}
}

// setPolicy changes a project's policy as a person would.
func (h *harness) setPolicy(tn tenant, pol ProjectPolicy) {
	h.t.Helper()
	b, _ := json.Marshal(pol)
	_, err := h.st.DB().ExecContext(h.ctx, `UPDATE projects SET policy = ? WHERE id = ?`, string(b), tn.project)
	h.must(err)
}

// Consuming a quote rechecks it under the project's lock: a policy or
// price that moved since voids it, and the launch charges nothing.
func TestConsumeRechecks(t *testing.T) {
	prices := registrar.PriceList{}
	h := newHarness(t, withPrices(prices))
	cases := []struct {
		name   string
		change func(tenant)
		code   models.BlockedBy
	}{
		{"policy now denies", func(tn tenant) {
			h.setPolicy(tn, policy(func(p *ProjectPolicy) { p.TLDDenylist = []string{"dev"} }))
		}, "policy:tld_denied"},
		{"approval now required", func(tn tenant) {
			h.setPolicy(tn, policy(func(p *ProjectPolicy) { p.ApprovalRules.ApprovalAbove = ptr(money.FromUSD(1.0)) }))
		}, "policy:approval_required"},
		{"price moved", func(tenant) { prices["dev"] = registrar.USD(99, 0) }, "plan:price_changed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			delete(prices, "dev")
			tn := h.tenant(200, DefaultPolicy(), buyer...)
			dom := freeDomain(t, "recheck", "dev")
			q := h.quote(tn, domainItem(dom))
			c.change(tn)
			bnd := h.site(tn, map[string]string{"index.html": "x"})
			_, err := h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, LaunchRequest{Name: "site", Target: "edge", BundleID: bnd, Domain: dom, QuoteID: q.ID})
			wantCode(t, err, c.code)
			if p, _ := h.st.Projects().Get(h.ctx, tn.org, tn.project); p.SpentMicro != 0 {
				t.Fatalf("spent %d on a refused launch", p.SpentMicro)
			}
			h.books(tn.org, tn.project)
		})
	}
	// A price that moves between the charge and the purchase fails the
	// launch, refunded in full.
	delete(prices, "dev")
	tn := h.tenant(200, DefaultPolicy(), buyer...)
	dom := freeDomain(t, "moved", "dev")
	q := h.quote(tn, domainItem(dom))
	bnd := h.site(tn, map[string]string{"index.html": "x"})
	v, err := h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, LaunchRequest{Name: "site", Target: "edge", BundleID: bnd, Domain: dom, QuoteID: q.ID})
	h.must(err)
	prices["dev"] = registrar.USD(1, 0)
	h.drain()
	if got := h.task(tn.org, v.ID); got.State != "failed" || got.Result["blockedBy"] != "plan:price_changed" || h.remaining(tn.org, tn.project) != 200_000_000 {
		t.Fatalf("launch %s %v", got.State, got.Result)
	}
}

// A quote that does not price the launch is refused with the quote that
// would, and its hold is left for the agent to release.
func TestQuoteMismatch(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(500, DefaultPolicy(), buyer...)
	dom := freeDomain(t, "match", "dev")
	bnd := h.site(tn, map[string]string{"index.html": "x", "Procfile": "web: app"})
	pg := []string{"managed_postgres"}
	cases := []struct {
		name  string
		items []QuoteItem
		req   LaunchRequest
		first string
	}{
		{"mail in a launch", []QuoteItem{emailItem(dom)}, LaunchRequest{Name: "a", Target: "edge"}, "launch_service"},
		{"another domain", []QuoteItem{domainItem(dom)}, LaunchRequest{Name: "a", Target: "edge"}, "launch_service"},
		{"another target", []QuoteItem{serviceItem("worker", "worker", "a")}, LaunchRequest{Name: "a", Target: "process"}, "create_quote"},
		{"another name", []QuoteItem{serviceItem("dynamic_service", "process", "b")}, LaunchRequest{Name: "a", Target: "process"}, "create_quote"},
		{"database unpriced", []QuoteItem{serviceItem("dynamic_service", "process", "a")}, LaunchRequest{Name: "a", Target: "process", Addons: pg}, "create_quote"},
		{"database not asked", []QuoteItem{serviceItem("database_backed_app", "process", "a")}, LaunchRequest{Name: "a", Target: "process"}, "create_quote"},
		{"domain not priced", []QuoteItem{serviceItem("static_site", "edge", "a")}, LaunchRequest{Name: "a", Target: "edge", Domain: dom}, "create_quote"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := h.quote(tn, c.items...)
			c.req.BundleID, c.req.QuoteID = bnd, q.ID
			_, err := h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, c.req)
			e := wantCode(t, err, "conflict:quote_mismatch")
			if n := names(e.Actions); n[0] != c.first || n[len(n)-1] != "release_quote" {
				t.Fatalf("actions %v", n)
			}
			h.must(lastErr(h.svc.Quotes.Release(h.ctx, tn.agent, q.ID)))
		})
	}
	h.books(tn.org, tn.project)
}

func second3[A, B any](_ A, _ B, err error) error { return err }

// lastErr is the error of a two-valued call.
func lastErr[A any](_ A, err error) error { return err }

// Search answers the catalog with what is taken here marked so, filtered
// by lists and ceilings.
func TestSearchDomains(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(100, DefaultPolicy(), buyer...)
	dom := freeDomain(t, "searched", "dev")
	h.buy(tn, "site", dom)
	label := dom[:len(dom)-4]
	ceiling := func(usd float64) *money.MicroUSD { m := money.FromUSD(usd); return &m }
	cases := []struct {
		name  string
		q     DomainSearch
		check func(*DomainSearchResult) bool
	}{
		{"taken here", DomainSearch{Query: dom}, func(r *DomainSearchResult) bool {
			return r.Candidates[0].Domain == dom && !r.Candidates[0].Available && r.Limit == 25
		}},
		{"allow list", DomainSearch{Query: label, Allow: []string{"app", ".COM", "app", "nope"}}, func(r *DomainSearchResult) bool {
			return len(r.Candidates) == 2 && r.Candidates[0].TLD == "app" && len(r.Ignored) == 1
		}},
		{"deny list", DomainSearch{Query: label, Deny: []string{"com"}, Limit: 3}, func(r *DomainSearchResult) bool {
			return len(r.Candidates) == 3 && r.Candidates[0].TLD != "com"
		}},
		{"ceilings", DomainSearch{Query: label, Full: true, MaxFirstYear: ceiling(12), MaxRenewal: ceiling(13)}, func(r *DomainSearchResult) bool {
			return r.Excluded.OverFirstYearCeiling > 0 && r.Excluded.OverRenewalCeiling > 0 && r.Excluded.LackingPrice > 0 && r.Full
		}},
	}
	for _, c := range cases {
		r, err := h.svc.Domains.Search(h.ctx, c.q)
		h.must(err)
		if !c.check(r) {
			t.Fatalf("%s: %+v", c.name, r)
		}
	}
	wantCode(t, second2(h.svc.Domains.Search(h.ctx, DomainSearch{Query: "-bad-"})), "input:invalid")
	wantCode(t, second2(h.svc.Domains.Search(h.ctx, DomainSearch{Query: "a.b.c"})), "input:invalid")
}
