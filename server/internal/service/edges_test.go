package service

import (
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/money"
)

// A quote's hold is spent only once and only while it holds: an expired
// hold, a denied quote, another project's quote and a quote a human
// denied are each refused, typed, charging nothing.
func TestConsumeRefusals(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(20, policy(func(p *ProjectPolicy) { p.ApprovalRules.ApprovalAbove = ptr(money.FromUSD(10.0)) }))
	bnd := h.site(tn, map[string]string{"index.html": "x"})
	launch := func(q string) error {
		_, err := h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, LaunchRequest{Name: "site", Target: "edge", BundleID: bnd, QuoteID: q})
		return err
	}
	expiring := h.quote(tn, serviceItem("static_site", "edge", "site"))
	h.clock.Advance(HoldDuration)
	if e := wantCode(t, launch(expiring.ID), "budget:hold_expired"); !hasAction(e.Actions, "create_quote") {
		t.Fatalf("actions %v", names(e.Actions))
	}
	denied := h.quote(tn, domainItem(freeDomain(t, "pricey", "ai")), domainItem(freeDomain(t, "pricier", "io")))
	if denied.Decision != QuoteDeny {
		t.Fatalf("decision %s", denied.Decision)
	}
	wantCode(t, launch(denied.ID), "conflict:state")
	other := h.tenant(20, DefaultPolicy())
	foreign := h.quote(other, serviceItem("static_site", "edge", "site"))
	wantCode(t, launch(foreign.ID), "not_found:resource")
	gated := h.quote(tn, domainItem(freeDomain(t, "gatedq", "app")))
	gates, _ := h.svc.Approvals.Pending(h.ctx, tn.org)
	h.must(h.svc.Approvals.Decide(h.ctx, tn.human, gates[0].ID, false))
	wantCode(t, launch(gated.ID), "approval:denied")
	if p, _ := h.st.Projects().Get(h.ctx, tn.org, tn.project); p.SpentMicro != 0 || p.HeldMicro != 0 {
		t.Fatalf("spent %d held %d", p.SpentMicro, p.HeldMicro)
	}
}

// A human who approves a quote the budget can no longer cover approves
// nothing: the decision stands, the quote is not held, and a launch that
// waited on it ends charged nothing.
func TestApprovalTheBudgetCannotHold(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(20, policy(func(p *ProjectPolicy) { p.ApprovalRules.ApprovalAbove = ptr(money.FromUSD(10.0)) }))
	q := h.quote(tn, serviceItem("dynamic_service", "process", "api"), emailItem("a.dev"), emailItem("b.dev"), emailItem("c.dev"))
	if q.Decision != QuoteRequiresApproval {
		t.Fatalf("decision %s", q.Decision)
	}
	bnd := h.site(tn, map[string]string{"Procfile": "web: app"})
	_, err := h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, LaunchRequest{Name: "api", Target: "process", BundleID: bnd, QuoteID: q.ID})
	wantCode(t, err, "conflict:quote_mismatch") // mail is never a launch's
	long := serviceItem("dynamic_service", "process", "api")
	long.Months = 2
	q = h.quote(tn, long)
	v, err := h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, LaunchRequest{Name: "api", Target: "process", BundleID: bnd, QuoteID: q.ID})
	h.must(err)
	if v.State != "input_required" {
		t.Fatalf("launch %s", v.State)
	}
	// Meanwhile the budget is spent elsewhere.
	h.must(h.st.Projects().MoveMoney(h.ctx, tn.project, 0, 15_000_000))
	gates, _ := h.svc.Approvals.Pending(h.ctx, tn.org)
	for _, g := range gates {
		if gv, _ := h.svc.Approvals.GateFor(h.ctx, tn.human, g.ID); gv.QuoteID == q.ID {
			h.must(h.svc.Approvals.Decide(h.ctx, tn.human, g.ID, true))
		}
	}
	h.drain()
	got := h.task(tn.org, v.ID)
	if got.State != "failed" || got.Result["blockedBy"] != "budget:insufficient" {
		t.Fatalf("launch %s %v", got.State, got.Result)
	}
	h.books(tn.org, tn.project)
}

// Mail is refused politely for what cannot take it.
func TestMailRouting(t *testing.T) {
	h := newHarness(t)
	a := h.tenant(100, DefaultPolicy(), buyer...)
	dom := h.mailDomain(a, "routes")
	for _, rcpt := range []string{"not an address", "nobody@" + dom, "x@elsewhere.dev"} {
		if ok, err := h.svc.Mail.Accepts(h.ctx, rcpt); ok || err != nil {
			t.Fatalf("accepts %q: %v %v", rcpt, ok, err)
		}
		if ok, err := h.svc.Mail.Fits(h.ctx, rcpt, 1); ok || err != nil {
			t.Fatalf("fits %q: %v %v", rcpt, ok, err)
		}
	}
	if _, err := h.svc.Mail.Deliver(h.ctx, Delivery{Rcpt: "nobody@" + dom}); err == nil {
		t.Fatal("delivered to nobody")
	}
	if _, err := h.svc.Mail.Deliver(h.ctx, Delivery{Rcpt: "bad"}); err == nil {
		t.Fatal("delivered to a bad address")
	}
	ad, err := h.svc.Mail.CreateAddress(h.ctx, a.agent, "in@"+dom, false)
	h.must(err)
	if ok, _ := h.svc.Mail.Fits(h.ctx, "in@"+dom, 10); !ok {
		t.Fatal("a small message does not fit an empty inbox")
	}
	// A waiter is woken by the delivery it waits for.
	go func() {
		time.Sleep(20 * time.Millisecond)
		h.svc.Mail.Deliver(h.ctx, Delivery{Rcpt: "in@" + dom, Subject: "late", Raw: []byte("x")})
	}()
	m, err := h.svc.Mail.WaitForMessage(h.ctx, a.org, ad.InboxID, MessageWait{Timeout: ptr(10 * time.Second)})
	h.must(err)
	if m.Subject != "late" {
		t.Fatalf("message %+v", m)
	}
}

// Logs filter by version and time.
func TestLogFilters(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(100, DefaultPolicy())
	id := h.process(tn, "api", "process", "dynamic_service", LaunchRequest{}).ServiceID
	h.svc.Runs.Log(id, 1, "stdout", "one", epoch)
	h.svc.Runs.Log(id, 2, "stdout", "two", epoch.Add(time.Hour))
	h.svc.Runs.FlushNow(h.ctx)
	for _, c := range []struct {
		q    LogQuery
		want string
	}{{LogQuery{Version: 2}, "two"}, {LogQuery{Since: epoch.Add(time.Minute)}, "two"}, {LogQuery{Version: 1, Tail: 1}, "one"}} {
		l, err := h.svc.Runs.Logs(h.ctx, tn.org, id, c.q)
		h.must(err)
		if len(l.Lines) != 1 || l.Lines[0].Text != c.want {
			t.Fatalf("%+v: %+v", c.q, l.Lines)
		}
	}
}
