// Package pricing is the priced target catalog that estimates select from:
// compute targets (edge, process, worker) and add-ons (managed Postgres,
// mail), each with capabilities and integer micro-USD prices.
package pricing

import "github.com/pierhq/pier/server/internal/money"

// MicroUSD is Pier's money type.
type MicroUSD = money.MicroUSD

// CatalogVersion names the price list; estimates echo it.
const CatalogVersion = "2026-11-01"

// Target is a priced, deployable unit.
type Target struct {
	Name         string
	Kind         string // "compute" or "addon"
	Capabilities []string
	Base         MicroUSD // a month
	// Requests and egress included in Base, and the price beyond them.
	IncludedRequests int64
	PerMillionReqs   MicroUSD
	IncludedEgressGB int64
	PerGBEgress      MicroUSD
}

// Has reports whether the target has capability c.
func (t Target) Has(c string) bool {
	for _, x := range t.Capabilities {
		if x == c {
			return true
		}
	}
	return false
}

func usd(dollars, cents int64) MicroUSD { return money.USD(dollars, cents) }

// Targets is the catalog, cheapest first within each kind.
var Targets = []Target{
	{Name: "edge", Kind: "compute", Capabilities: []string{"static"}, Base: 0,
		IncludedRequests: 1_000_000, PerMillionReqs: usd(0, 20), IncludedEgressGB: 100, PerGBEgress: usd(0, 5)},
	{Name: "worker", Kind: "compute", Capabilities: []string{"background"}, Base: usd(5, 0),
		IncludedRequests: 0, PerMillionReqs: 0, IncludedEgressGB: 10, PerGBEgress: usd(0, 8)},
	{Name: "process", Kind: "compute", Capabilities: []string{"static", "http", "background"}, Base: usd(7, 0),
		IncludedRequests: 10_000_000, PerMillionReqs: usd(0, 40), IncludedEgressGB: 100, PerGBEgress: usd(0, 8)},
	{Name: "managed_postgres", Kind: "addon", Capabilities: []string{"postgres"}, Base: usd(15, 0)},
	{Name: "mail", Kind: "addon", Capabilities: []string{"mail"}, Base: usd(3, 0)},
}

// Workload needs: what the compute target must do, and which add-ons come along.
type Need struct {
	Compute string
	Addons  []string
}

// Needs maps each workload to its needs.
var Needs = map[string]Need{
	"static_site":         {Compute: "static"},
	"dynamic_service":     {Compute: "http"},
	"worker":              {Compute: "background"},
	"database_backed_app": {Compute: "http", Addons: []string{"postgres"}},
	"mail_enabled_app":    {Compute: "http", Addons: []string{"mail"}},
}

// Lookup finds a target by name.
func Lookup(name string) (Target, bool) {
	for _, t := range Targets {
		if t.Name == name {
			return t, true
		}
	}
	return Target{}, false
}

// AddonFor returns the add-on that provides capability c.
func AddonFor(c string) (Target, bool) {
	for _, t := range Targets {
		if t.Kind == "addon" && t.Has(c) {
			return t, true
		}
	}
	return Target{}, false
}

// Usage is the expected monthly usage. EgressMicroGB is in millionths of a
// GB so that a fractional input never turns into float arithmetic.
type Usage struct {
	Requests      int64
	EgressMicroGB int64
}

// Line is one priced component.
type Line struct {
	Item   string
	Amount MicroUSD
}

// Monthly prices target t for usage u, line by line.
func Monthly(t Target, u Usage) []Line {
	lines := []Line{{Item: t.Name + ":base", Amount: t.Base}}
	if over := u.Requests - t.IncludedRequests; over > 0 && t.PerMillionReqs > 0 {
		lines = append(lines, Line{Item: t.Name + ":requests", Amount: ceilDiv(MicroUSD(over)*t.PerMillionReqs, 1_000_000)})
	}
	if over := u.EgressMicroGB - t.IncludedEgressGB*1_000_000; over > 0 && t.PerGBEgress > 0 {
		lines = append(lines, Line{Item: t.Name + ":egress", Amount: ceilDiv(MicroUSD(over)*t.PerGBEgress, 1_000_000)})
	}
	return lines
}

// Total sums lines.
func Total(lines []Line) MicroUSD {
	var s MicroUSD
	for _, l := range lines {
		s += l.Amount
	}
	return s
}

// ceilDiv rounds up, so an estimate never understates.
func ceilDiv(a, b MicroUSD) MicroUSD { return (a + b - 1) / b }
