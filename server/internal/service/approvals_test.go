package service

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

// What an approval page says of each kind of quote line.
func TestItemWords(t *testing.T) {
	for _, c := range []struct {
		it   pricedItem
		want string
	}{
		{pricedItem{Kind: "domain", placement: placement{Domain: "acme.dev", Years: 1}, AmountMicro: 12_000_000}, "the domain acme.dev for 1 year(s): $12.00"},
		{pricedItem{Kind: "email", placement: placement{Domain: "acme.dev"}, Months: 1, AmountMicro: 1_000_000}, "email on acme.dev for 1 month(s): $1.00"},
		{pricedItem{Kind: "service", Name: "app", placement: placement{Target: "process"}, Workload: "dynamic_service", Months: 2, AmountMicro: 10_000_000}, "app on process (dynamic_service) for 2 month(s): $10.00"},
	} {
		if got := itemWords(c.it); got != c.want {
			t.Errorf("itemWords(%+v) = %q, want %q", c.it, got, c.want)
		}
	}
}

// Approvals publishes a decided quote gate to its subscribers, inside the
// decision's transaction: the tasks they answer are queued once it
// commits, and a subscriber's error undoes the decision.
func TestDecisionHandlers(t *testing.T) {
	h := newHarness(t)
	if n := len(h.svc.Approvals.onDecision); n != 1 {
		t.Fatalf("New subscribed %d handlers to gate decisions, want Launches' alone", n)
	}
	tn := h.tenant(100, policy(func(p *ProjectPolicy) { p.ApprovalRules.ApprovalAbove = ptr(money.FromUSD(1.0)) }))
	h.quote(tn, serviceItem("dynamic_service", "process", "api"))
	gates, err := h.svc.Approvals.Pending(h.ctx, tn.org)
	h.must(err)
	if len(gates) != 1 || gates[0].Kind != "quote_approval" {
		t.Fatalf("pending gates %+v, want one quote_approval", gates)
	}
	refused := errors.New("the subscriber refuses")
	var held []bool
	h.svc.Approvals.onDecision = []DecisionHandler{func(_ context.Context, _ *store.Tx, _ Human, g store.Gate, _ map[string]any, ok bool, _ map[string]any, _ time.Time) ([]string, error) {
		held = append(held, ok)
		if len(held) == 1 {
			return nil, refused
		}
		return []string{"tsk_waiting"}, nil
	}}
	if err := h.svc.Approvals.Decide(h.ctx, tn.human, gates[0].ID, true); !errors.Is(err, refused) {
		t.Fatalf("decision with a refusing subscriber: %v", err)
	}
	if still, _ := h.svc.Approvals.Pending(h.ctx, tn.org); len(still) != 1 {
		t.Fatalf("the refused decision was kept: pending %+v", still)
	}
	h.platform.take()
	h.must(h.svc.Approvals.Decide(h.ctx, tn.human, gates[0].ID, true))
	if !slices.Equal(held, []bool{true, true}) {
		t.Errorf("subscriber saw held=%v, want [true true]", held)
	}
	if q := h.platform.take(); !slices.Contains(q, "tsk_waiting") {
		t.Errorf("queued %v, want the subscriber's tsk_waiting", q)
	}
}
