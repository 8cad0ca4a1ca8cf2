package service

import (
	"testing"

	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

var buyer = []string{"read", "quote", "launch", "buy_domain"}

// A key with buy_domain buys the domain in the launch, once: the budget
// pays the quoted price exactly, the zone is served, another organisation
// finds the name taken, and a teardown keeps the registration.
func TestDomainLaunch(t *testing.T) {
	h := newHarness(t)
	a, b := h.tenant(100, DefaultPolicy(), buyer...), h.tenant(100, DefaultPolicy(), buyer...)
	dom := freeDomain(t, "bought", "dev")
	task := h.buy(a, "site", dom)
	if task.State != "succeeded" || task.DomainURL == "" || !task.HTTPS.Domain {
		t.Fatalf("launch %+v", task)
	}
	if left := h.remaining(a.org, a.project); left != 88_000_000 {
		t.Fatalf("remaining %d, want 88 USD", left)
	}
	l, err := h.svc.Domains.List(h.ctx, a.org, store.Filter{})
	h.must(err)
	if len(l.Items) != 1 || !l.Items[0].Zone || l.Items[0].ServiceID == "" {
		t.Fatalf("domains %+v", l.Items)
	}
	for _, c := range []struct {
		tn   tenant
		want DomainState
	}{{a, DomainOwned}, {b, DomainTaken}} {
		if st, _ := h.svc.Domains.State(h.ctx, c.tn.agent, dom); st != c.want {
			t.Fatalf("state %s, want %s", st, c.want)
		}
	}
	if st, _ := h.svc.Domains.State(h.ctx, a.agent, freeDomain(t, "unheld", "dev")); st != DomainFree {
		t.Fatalf("an unheld name is %s", st)
	}
	_, err = h.svc.Domains.Get(h.ctx, b.org, dom)
	wantCode(t, err, "not_found:resource")
	if _, err := h.svc.Domains.Get(h.ctx, a.org, dom+"."); err != nil {
		t.Fatal(err)
	}
	_, err = h.svc.Domains.TransferOutCode(h.ctx, b.human, dom)
	wantCode(t, err, "not_found:resource")
	if code, err := h.svc.Domains.TransferOutCode(h.ctx, a.human, " "+dom+" "); err != nil || code == "" {
		t.Fatalf("auth code %q %v", code, err)
	}
	if dv, _ := h.svc.Domains.DomainsFor(h.ctx, a.human); len(dv) != 1 || !dv[0].Serving {
		t.Fatalf("human's domains %+v", dv)
	}
	// Buying it again is refused: by B as taken, by A as already owned.
	_, err = h.svc.Quotes.Create(h.ctx, b.agent, QuoteRequest{ProjectID: b.project, Items: []QuoteItem{domainItem(dom)}})
	wantCode(t, err, "plan:domain_unavailable")
	_, err = h.svc.Quotes.Create(h.ctx, a.agent, QuoteRequest{ProjectID: a.project, Items: []QuoteItem{domainItem(dom)}})
	if e := wantCode(t, err, "plan:domain_unavailable"); !hasAction(e.Actions, "attach_domain") {
		t.Fatalf("owner's actions %v", names(e.Actions))
	}
	td, _, err := h.svc.Launches.Teardown(h.ctx, a.agent, task.ServiceID)
	h.must(err)
	if td.Receipt.Costs[0].Item != "irreversible:domain_registration:"+dom {
		t.Fatalf("teardown receipt %+v", td.Receipt)
	}
	h.drain()
	if r := h.task(a.org, td.ID).Result; r["notReversed"] == nil {
		t.Fatalf("teardown result %v", r)
	}
	if _, err := h.st.Domains().Zone(h.ctx, dom); err == nil {
		t.Fatal("the zone outlived the teardown")
	}
	// The owner launches on it again without buying.
	again := h.edge(a, "again", LaunchRequest{Domain: dom})
	if again.State != "succeeded" || h.remaining(a.org, a.project) != 88_000_000 {
		t.Fatalf("owned relaunch %+v", again)
	}
	h.books(a.org, a.project)
}

// A consumed quote pays once: launching with it again is refused and
// charges nothing.
func TestQuoteConsumedOnce(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(100, DefaultPolicy())
	q := h.quote(tn, serviceItem("static_site", "edge", ""))
	bnd := h.site(tn, map[string]string{"index.html": "x"})
	_, err := h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, LaunchRequest{Name: "one", Target: "edge", BundleID: bnd, QuoteID: q.ID})
	h.must(err)
	_, err = h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, LaunchRequest{Name: "two", Target: "edge", BundleID: bnd, QuoteID: q.ID})
	wantCode(t, err, "conflict:state")
	_, err = h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, LaunchRequest{Name: "one", Target: "edge", BundleID: bnd, QuoteID: q.ID})
	wantCode(t, err, "conflict:quote_mismatch")
	_, err = h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, LaunchRequest{Name: "three", Target: "edge", BundleID: bnd, QuoteID: "quo_nope"})
	wantCode(t, err, "not_found:resource")
	h.books(tn.org, tn.project)
}

// Without buy_domain the launch waits for a human on the registration;
// approving buys the domain, denying refunds it and the service goes on
// without it.
func TestRegistrationGate(t *testing.T) {
	for _, approve := range []bool{true, false} {
		h := newHarness(t)
		tn := h.tenant(100, DefaultPolicy())
		dom := freeDomain(t, "gated", "dev")
		q := h.quote(tn, domainItem(dom))
		if len(q.GatedSteps) != 1 {
			t.Fatalf("gated steps %v", q.GatedSteps)
		}
		task := h.edge(tn, "site", LaunchRequest{Domain: dom, QuoteID: q.ID})
		if task.State != "input_required" || task.ApprovalURL == "" {
			t.Fatalf("launch %+v", task)
		}
		pending, _ := h.svc.Approvals.Pending(h.ctx, tn.org)
		if len(pending) != 1 || pending[0].Kind != "domain_registration" {
			t.Fatalf("pending %+v", pending)
		}
		gv, err := h.svc.Approvals.GateFor(h.ctx, tn.human, pending[0].ID)
		h.must(err)
		if gv.Domain != dom || gv.Title != "Buy the domain "+dom+" for 1 year" || !gv.HasRenewal || gv.IfDeniedMicro != 100_000_000 {
			t.Fatalf("gate view %+v", gv)
		}
		h.must(h.svc.Approvals.Decide(h.ctx, tn.human, pending[0].ID, approve))
		wantCode(t, h.svc.Approvals.Decide(h.ctx, tn.human, pending[0].ID, approve), "conflict:state")
		h.drain()
		got := h.task(tn.org, task.ID)
		if got.State != "succeeded" || got.HTTPS.Domain != approve {
			t.Fatalf("approve=%v: %+v", approve, got)
		}
		want := int64(88_000_000)
		if !approve {
			want = 100_000_000
		}
		if left := h.remaining(tn.org, tn.project); left != want {
			t.Fatalf("approve=%v: remaining %d, want %d", approve, left, want)
		}
		if st, _ := h.svc.Domains.State(h.ctx, tn.agent, dom); (st == "owned") != approve {
			t.Fatalf("approve=%v: domain %s", approve, st)
		}
		h.books(tn.org, tn.project)
	}
}

// A quote above the approval threshold waits for a human; a launch with
// it waits on the same gate, and goes on, charged, once approved, or ends
// charged nothing once denied.
func TestQuoteApprovalGate(t *testing.T) {
	for _, approve := range []bool{true, false} {
		h := newHarness(t)
		tn := h.tenant(100, policy(func(p *ProjectPolicy) { p.ApprovalRules.ApprovalAbove = ptr(money.FromUSD(1.0)) }))
		q := h.quote(tn, serviceItem("static_site", "edge", "site"), emailItem("x.dev"))
		if q.Decision != QuoteRequiresApproval {
			t.Fatalf("decision %s", q.Decision)
		}
		q = h.quote(tn, serviceItem("dynamic_service", "process", "api"))
		bnd := h.site(tn, map[string]string{"Procfile": "web: python3 app.py\n"})
		v, err := h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, LaunchRequest{Name: "api", Target: "process", BundleID: bnd, QuoteID: q.ID})
		h.must(err)
		if v.State != TaskInputRequired || v.GateID == "" || v.ApprovalURL == "" {
			t.Fatalf("launch %+v", v)
		}
		gates, _ := h.svc.Approvals.Pending(h.ctx, tn.org)
		var gv GateView
		for _, g := range gates {
			if gv, _ = h.svc.Approvals.GateFor(h.ctx, tn.human, g.ID); gv.QuoteID == q.ID {
				break
			}
		}
		if gv.QuoteID != q.ID || len(gv.Items) != 1 || gv.RequestedBy != "the key “agent” ("+tn.agent.KeyID+")" {
			t.Fatalf("gate view %+v", gv)
		}
		h.must(h.svc.Approvals.Decide(h.ctx, tn.human, gv.ID, approve))
		h.drain()
		got := h.task(tn.org, v.ID)
		charged := 100_000_000 - h.remaining(tn.org, tn.project)
		if approve && (got.State != "succeeded" || charged == 0) || !approve && (got.State != "failed" || charged != 0) {
			t.Fatalf("approve=%v: task %s, charged %d", approve, got.State, charged)
		}
		h.books(tn.org, tn.project)
	}
}

// A budget raise is a human's: approved, the limit grows; denied, it
// stays. A person of another organisation cannot decide it.
func TestBudgetRaise(t *testing.T) {
	h := newHarness(t)
	a, b := h.tenant(10, DefaultPolicy()), h.tenant(10, DefaultPolicy())
	_, err := h.svc.Approvals.RequestBudgetRaise(h.ctx, a.agent, a.project, money.FromUSD(0), "")
	wantCode(t, err, "input:invalid")
	_, err = h.svc.Approvals.RequestBudgetRaise(h.ctx, b.agent, a.project, money.FromUSD(5), "")
	wantCode(t, err, "not_found:resource")
	for _, approve := range []bool{true, false} {
		v, err := h.svc.Approvals.RequestBudgetRaise(h.ctx, a.agent, a.project, money.FromUSD(5), "more")
		h.must(err)
		if v.State != TaskInputRequired || v.ApprovalURL == "" || v.GateID == "" {
			t.Fatalf("raise %+v", v)
		}
		gates, _ := h.svc.Approvals.Pending(h.ctx, a.org)
		gid := gates[0].ID
		wantCode(t, h.svc.Approvals.Decide(h.ctx, b.human, gid, true), "not_found:resource")
		_, err = h.svc.Approvals.GateFor(h.ctx, b.human, gid)
		wantCode(t, err, "not_found:resource")
		gv, _ := h.svc.Approvals.GateFor(h.ctx, a.human, gid)
		if gv.IfApprovedMicro != gv.RemainingMicro+5_000_000 || !gv.HasCurrentLimit {
			t.Fatalf("gate view %+v", gv)
		}
		h.must(h.svc.Approvals.Decide(h.ctx, a.human, gid, approve))
		task := h.task(a.org, v.ID)
		if (task.State == "succeeded") != approve {
			t.Fatalf("approve=%v: task %s", approve, task.State)
		}
	}
	if p, _ := h.st.Projects().Get(h.ctx, a.org, a.project); p.LimitMicro != 15_000_000 {
		t.Fatalf("limit %d, want 15 USD", p.LimitMicro)
	}
	wantCode(t, h.svc.Approvals.Decide(h.ctx, a.human, "gat_nope", true), "not_found:resource")
}
