package service

import (
	"encoding/json"
	"fmt"
	"testing"
)

// A policy keeps the contract's JSON: what it reads it writes back the
// same, byte for byte, and what was never set stays absent.
func TestPolicyKeepsItsJSON(t *testing.T) {
	for _, kept := range []string{
		`{"approvalRules":{"approvalAboveUsd":null,"domainPurchases":"human_gate"},"tldAllowlist":[],"tldDenylist":[]}`,
		`{"approvalRules":{"approvalAboveUsd":null,"domainPurchases":""},"tldAllowlist":null,"tldDenylist":null}`,
		`{"approvalRules":{"approvalAboveUsd":12.5,"domainPurchases":"scope"},"budgetPeriod":"lifetime","maxFirstYearPriceUsd":20,` +
			`"maxRenewalPriceUsd":0.75,"onBudgetExhausted":"pause_services","serviceEgress":"denied","tldAllowlist":["dev","com"],"tldDenylist":["io"]}`,
	} {
		var p ProjectPolicy
		if err := json.Unmarshal([]byte(kept), &p); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(p)
		if err != nil || string(b) != kept {
			t.Errorf("read %s, wrote %s (%v)", kept, b, err)
		}
	}
	p, err := decodePolicy(`{"approvalRules":{"approvalAboveUsd":12.5,"domainPurchases":"scope"},"budgetPeriod":"lifetime","maxRenewalPriceUsd":0.75,"onBudgetExhausted":"pause_services","serviceEgress":"denied"}`)
	if err != nil || *p.ApprovalRules.ApprovalAbove != 12_500_000 || *p.MaxRenewalPrice != 750_000 || p.MaxFirstYearPrice != nil ||
		budgetMonthly(p) || p.OnExhausted != PauseServices || p.Egress != EgressDenied || p.TLDAllowlist == nil || p.TLDDenylist == nil {
		t.Fatalf("decoded %+v, %v", p, err)
	}
	if d := DefaultPolicy(); !budgetMonthly(d) || d.ApprovalRules.DomainPurchases != HumanGate || egressDenied(`{}`) {
		t.Fatalf("default %+v", d)
	}
}

// A policy decoded again comes from memory as a copy of its own: what one
// caller changes, the next does not see.
func TestDecodedPoliciesAreCopies(t *testing.T) {
	text := `{"tldAllowlist":["dev","io"],"tldDenylist":[],"maxFirstYearPriceUsd":40,"approvalRules":{"approvalAboveUsd":25,"domainPurchases":"human_gate"}}`
	first, err := decodePolicy(text)
	if err != nil {
		t.Fatal(err)
	}
	first.TLDAllowlist[0] = "com"
	*first.MaxFirstYearPrice = 1
	*first.ApprovalRules.ApprovalAbove = 1
	again, err := decodePolicy(text)
	if err != nil {
		t.Fatal(err)
	}
	if again.TLDAllowlist[0] != "dev" || *again.MaxFirstYearPrice != 40_000_000 || *again.ApprovalRules.ApprovalAbove != 25_000_000 ||
		again.TLDDenylist == nil || len(again.TLDDenylist) != 0 {
		t.Fatalf("decoded again: %+v", again)
	}
	if _, err := decodePolicy(`{"tldAllowlist":`); err == nil {
		t.Fatal("a broken policy decoded")
	}
}

// Decoded policies are held within the cache's bounds however many
// projects' policies pass through.
func TestDecodedPoliciesAreBounded(t *testing.T) {
	for i := range 3000 {
		if _, err := decodePolicy(fmt.Sprintf(`{"tldAllowlist":["t%d"]}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	if n, cost := policies.Len(), policies.Cost(); n > 1024 || cost > 4<<20 {
		t.Fatalf("%d policies held, costing %d", n, cost)
	}
}
