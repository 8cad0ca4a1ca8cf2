package service

import (
	"testing"

	"github.com/pierhq/pier/ledger"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

// child creates a child project of tn's with budget USD and returns the
// tenant working in it.
func (h *harness) child(tn tenant, name string, budget float64) (tenant, *ProjectCreation) {
	h.t.Helper()
	c, err := h.svc.Projects.CreateChild(h.ctx, tn.agent, NewChild{Name: name, ParentID: tn.project, Budget: money.FromUSD(budget)})
	h.must(err)
	ct := tn
	ct.project = c.Project.ID
	return ct, c
}

func TestChildProjectCarvesAndGivesBack(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(100, DefaultPolicy())
	ct, c := h.child(tn, "conformance-1", 30)
	if c.Project.Limit != 30_000_000 || c.ParentRemaining != 70_000_000 || c.Mutated.BudgetRemaining != 30_000_000 || c.Mutated.Undo.Call == nil || c.Mutated.Undo.Call.Tool != "delete_project" {
		t.Fatalf("creation %+v", c)
	}
	if c.Project.ParentID != tn.project || c.Project.Policy.ApprovalRules != DefaultPolicy().ApprovalRules {
		t.Fatalf("the child does not name its parent or inherit its policy: %+v", c.Project)
	}
	if got := h.remaining(tn.org, tn.project); got != 70_000_000 {
		t.Fatalf("parent has %d left, want 70 USD", got)
	}
	_, err := h.svc.Projects.CreateChild(h.ctx, tn.agent, NewChild{Name: "greedy", ParentID: tn.project, Budget: money.FromUSD(71)})
	if e := wantCode(t, err, "budget:insufficient"); !hasAction(e.Actions, "create_project") {
		t.Fatalf("the refusal offers %v", names(e.Actions))
	}
	// Work in the child: a live site, a held quote and a budget raise
	// waiting for a human.
	h.edge(ct, "probe", LaunchRequest{})
	if q := h.quote(ct, serviceItem("dynamic_service", "process", "held")); q.Decision != QuoteAllow {
		t.Fatalf("quote in the child: %s %v", q.Decision, q.Reasons)
	}
	raise, err := h.svc.Approvals.RequestBudgetRaise(h.ctx, ct.agent, ct.project, money.FromUSD(1), "probe")
	h.must(err)

	d, replayed, err := h.svc.Projects.Delete(h.ctx, ct.agent, ct.project)
	h.must(err)
	if replayed || d.State != ProjectDeleting || len(d.TeardownTasks) != 1 || len(d.CanceledTasks) != 1 || d.CanceledTasks[0] != raise.ID || len(d.Pending) != 1 {
		t.Fatalf("first delete %+v", d)
	}
	if got := h.task(ct.org, raise.ID); got.State != "canceled" {
		t.Fatalf("the budget raise is %s, want canceled", got.State)
	}
	if pending, _ := h.st.Gates().PendingInProject(h.ctx, ct.org, ct.project); len(pending) != 0 {
		t.Fatalf("approvals still wait on a human: %+v", pending)
	}
	h.drain()
	d, replayed, err = h.svc.Projects.Delete(h.ctx, ct.agent, ct.project)
	h.must(err)
	if replayed || d.State != ProjectDeleted || d.DeletedAt == nil || d.Mutated.Undo.Call != nil || d.ParentID != tn.project || len(d.Pending) != 0 {
		t.Fatalf("second delete %+v", d)
	}
	child, err := h.st.Projects().Get(h.ctx, ct.org, ct.project)
	h.must(err)
	parent, err := h.st.Projects().Get(h.ctx, tn.org, tn.project)
	h.must(err)
	if child.LimitMicro+parent.LimitMicro != 100_000_000 || child.HeldMicro != 0 || child.LimitMicro != child.SpentMicro {
		t.Fatalf("money was made or lost: parent %+v, child %+v", parent, child)
	}
	if d.Returned != 30_000_000-child.SpentMicro || d.Mutated.BudgetRemaining != remaining(parent) {
		t.Fatalf("returned %v, remaining %v; parent %+v child %+v", d.Returned, d.Mutated.BudgetRemaining, parent, child)
	}
	h.books(tn.org, tn.project)

	again, replayed, err := h.svc.Projects.Delete(h.ctx, ct.agent, ct.project)
	h.must(err)
	if !replayed || again.Mutated.Receipt.ID != d.Mutated.Receipt.ID || again.Returned != d.Returned || again.State != ProjectDeleted ||
		again.Mutated.BudgetRemaining != d.Mutated.BudgetRemaining || len(again.Mutated.Receipt.Kept) != 1 || !again.Mutated.Undo.Irreversible {
		t.Fatalf("a second delete did not replay: %+v", again)
	}
	h.wantGone(tn, ct, d)
}

// wantGone checks a deleted child: gone from the list and from reads,
// refused for new quotes, its history kept.
func (h *harness) wantGone(tn, ct tenant, d *ProjectDeletion) {
	t := h.t
	t.Helper()
	// Gone from the list and from reads; history stays.
	l, err := h.svc.Projects.List(h.ctx, tn.org, store.Filter{Limit: 10})
	h.must(err)
	if len(l.Items) != 1 || l.Items[0].ID != tn.project {
		t.Fatalf("list after deletion: %+v", l.Items)
	}
	_, err = h.svc.Projects.Get(h.ctx, tn.org, ct.project)
	wantCode(t, err, "not_found:resource")
	_, err = h.svc.Quotes.Create(h.ctx, ct.agent, QuoteRequest{ProjectID: ct.project, Items: []QuoteItem{serviceItem("static_site", "edge", "late")}})
	wantCode(t, err, "not_found:resource")
	if got := h.task(ct.org, d.TeardownTasks[0]); got.State != "succeeded" {
		t.Fatalf("the teardown task reads %s", got.State)
	}
	entries, err := h.st.Ledger().Entries(h.ctx, tn.org, 0, 1000)
	h.must(err)
	if !ledgerHas(entries, "create_project") || !ledgerHas(entries, "delete_project") || !ledgerHas(entries, "cancel_gate") {
		t.Fatal("the ledger lacks the project's creation, deletion or canceled gate")
	}
}

func ledgerHas(entries []ledger.Entry, action string) bool {
	for _, e := range entries {
		if e.Action == action {
			return true
		}
	}
	return false
}

func TestDeleteProjectRefuses(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(100, DefaultPolicy(), "read", "quote", "launch", "buy_domain")
	other := h.tenant(100, DefaultPolicy())
	_, err := h.svc.Projects.CreateChild(h.ctx, other.agent, NewChild{Name: "x", ParentID: tn.project, Budget: money.FromUSD(1)})
	wantCode(t, err, "not_found:resource")
	_, _, err = h.svc.Projects.Delete(h.ctx, tn.agent, tn.project)
	wantCode(t, err, "conflict:state")

	ct, _ := h.child(tn, "with-domain", 60)
	_, _, err = h.svc.Projects.Delete(h.ctx, other.agent, ct.project)
	wantCode(t, err, "not_found:resource")
	grand, _ := h.child(ct, "grandchild", 1)
	_, _, err = h.svc.Projects.Delete(h.ctx, tn.agent, ct.project)
	if e := wantCode(t, err, "conflict:state"); !contains(e.Message, grand.project) {
		t.Fatalf("the refusal does not name the child: %s", e.Message)
	}
	_, _, err = h.svc.Projects.Delete(h.ctx, tn.agent, grand.project)
	h.must(err)

	dom := freeDomain(t, "childdel", "dev")
	if got := h.buy(ct, "shop", dom); got.State != "succeeded" {
		t.Fatalf("launch on %s: %s", dom, got.State)
	}
	_, _, err = h.svc.Projects.Delete(h.ctx, tn.agent, ct.project)
	if e := wantCode(t, err, "conflict:domain_attached"); !contains(e.Message, dom) || !hasAction(e.Actions, "detach_domain") {
		t.Fatalf("refusal %s, actions %v", e.Message, names(e.Actions))
	}
	_, err = h.svc.Domains.Detach(h.ctx, tn.agent, dom)
	h.must(err)
	d, _, err := h.svc.Projects.Delete(h.ctx, tn.agent, ct.project)
	if err != nil || d.State != ProjectDeleting {
		t.Fatalf("delete after detaching: %+v, %v", d, err)
	}
	h.drain()
	if d, _, err = h.svc.Projects.Delete(h.ctx, tn.agent, ct.project); err != nil || d.State != ProjectDeleted {
		t.Fatalf("delete after detaching: %+v, %v", d, err)
	}
	h.books(tn.org, tn.project)
}
