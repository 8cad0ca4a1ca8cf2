package service

import (
	"encoding/json"

	"github.com/pierhq/pier/server/internal/money"
)

// BudgetPeriod is how a project spends its budget limit: per calendar
// month (UTC), starting again from zero each month, or once over its life.
type BudgetPeriod string

const (
	BudgetMonthly  BudgetPeriod = "monthly"
	BudgetLifetime BudgetPeriod = "lifetime"
)

// Valid reports whether p is a budget period.
func (p BudgetPeriod) Valid() bool { return p == BudgetMonthly || p == BudgetLifetime }

// OnExhausted is what happens when a period's budget is all spent:
// new spending stops, and with PauseServices running services pause too.
type OnExhausted string

const (
	StopSpending  OnExhausted = "stop_spending"
	PauseServices OnExhausted = "pause_services"
)

// Valid reports whether o is a choice of what happens on exhaustion.
func (o OnExhausted) Valid() bool { return o == StopSpending || o == PauseServices }

// Egress says whether a project's process and worker services may reach
// the public network.
type Egress string

const (
	EgressAllowed Egress = "allowed"
	EgressDenied  Egress = "denied"
)

// DomainPurchaseRule says who decides a domain purchase: a human unless
// the key holds buy_domain (HumanGate), or the same rule stated for keys
// (ByScope).
type DomainPurchaseRule string

const (
	HumanGate DomainPurchaseRule = "human_gate"
	ByScope   DomainPurchaseRule = "scope"
)

// ApprovalRules say what waits for a human: quotes above ApprovalAbove
// (nil: none), and domain purchases as DomainPurchases says.
type ApprovalRules struct {
	ApprovalAbove   *money.MicroUSD
	DomainPurchases DomainPurchaseRule
}

// ProjectPolicy is what a project allows: the TLDs it may buy (an empty
// allowlist allows every TLD of the catalog), price ceilings, approval
// rules, how its budget runs over time and whether its services reach the
// network. An empty BudgetPeriod, OnExhausted or Egress was never set: it
// means monthly, stop_spending and allowed.
type ProjectPolicy struct {
	TLDAllowlist, TLDDenylist []string
	MaxFirstYearPrice         *money.MicroUSD
	MaxRenewalPrice           *money.MicroUSD
	ApprovalRules             ApprovalRules
	BudgetPeriod              BudgetPeriod
	OnExhausted               OnExhausted
	Egress                    Egress
}

// policyJSON is the shape a policy is kept in (and the ledger records):
// the contract's, with amounts in USD.
type policyJSON struct {
	ApprovalRules struct {
		ApprovalAboveUsd *float64           `json:"approvalAboveUsd"`
		DomainPurchases  DomainPurchaseRule `json:"domainPurchases"`
	} `json:"approvalRules"`
	BudgetPeriod         BudgetPeriod `json:"budgetPeriod,omitempty"`
	MaxFirstYearPriceUsd *float64     `json:"maxFirstYearPriceUsd,omitempty"`
	MaxRenewalPriceUsd   *float64     `json:"maxRenewalPriceUsd,omitempty"`
	OnBudgetExhausted    OnExhausted  `json:"onBudgetExhausted,omitempty"`
	ServiceEgress        Egress       `json:"serviceEgress,omitempty"`
	TldAllowlist         []string     `json:"tldAllowlist"`
	TldDenylist          []string     `json:"tldDenylist"`
}

func (p ProjectPolicy) MarshalJSON() ([]byte, error) {
	var out policyJSON
	out.ApprovalRules.ApprovalAboveUsd = usdOrNil(p.ApprovalRules.ApprovalAbove)
	out.ApprovalRules.DomainPurchases = p.ApprovalRules.DomainPurchases
	out.BudgetPeriod, out.OnBudgetExhausted, out.ServiceEgress = p.BudgetPeriod, p.OnExhausted, p.Egress
	out.MaxFirstYearPriceUsd, out.MaxRenewalPriceUsd = usdOrNil(p.MaxFirstYearPrice), usdOrNil(p.MaxRenewalPrice)
	out.TldAllowlist, out.TldDenylist = p.TLDAllowlist, p.TLDDenylist
	return json.Marshal(out)
}

func (p *ProjectPolicy) UnmarshalJSON(b []byte) error {
	var in policyJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*p = ProjectPolicy{TLDAllowlist: in.TldAllowlist, TLDDenylist: in.TldDenylist,
		MaxFirstYearPrice: microOrNil(in.MaxFirstYearPriceUsd), MaxRenewalPrice: microOrNil(in.MaxRenewalPriceUsd),
		ApprovalRules: ApprovalRules{ApprovalAbove: microOrNil(in.ApprovalRules.ApprovalAboveUsd), DomainPurchases: in.ApprovalRules.DomainPurchases},
		BudgetPeriod:  in.BudgetPeriod, OnExhausted: in.OnBudgetExhausted, Egress: in.ServiceEgress}
	return nil
}

// usdOrNil is an optional amount in USD.
func usdOrNil(m *money.MicroUSD) *float64 {
	if m == nil {
		return nil
	}
	return ptr(m.USD())
}

// microOrNil is an optional amount in micro-USD.
func microOrNil(v *float64) *money.MicroUSD {
	if v == nil {
		return nil
	}
	return ptr(money.FromUSD(*v))
}
