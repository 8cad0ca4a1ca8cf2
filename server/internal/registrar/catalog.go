// Package registrar is the built-in sandbox registrar: two TLD catalogs
// (common-launch and full) with first-year and renewal prices in micro-USD,
// and deterministic availability, so that searches and tests repeat exactly.
// It sells with fake money only. It knows nothing of HTTP.
package registrar

import (
	"crypto/sha256"
	"strings"

	"github.com/pierhq/pier/server/internal/money"
)

// MicroUSD is Pier's money type. Money is never a float.
type MicroUSD = money.MicroUSD

// USD converts whole dollars and cents, for writing the catalog.
func USD(dollars, cents int64) MicroUSD { return money.USD(dollars, cents) }

// TLD is one catalog entry. A nil price means the registry publishes none
// (price on application); filters that need that price exclude the TLD.
type TLD struct {
	Name               string
	FirstYear          *MicroUSD
	Renewal            *MicroUSD // for one renewal period
	RenewalPeriodYears int
	Common             bool // part of the common-launch catalog
}

// AnnualizedRenewal is the renewal price per year.
func (t TLD) AnnualizedRenewal() *MicroUSD {
	if t.Renewal == nil {
		return nil
	}
	v := *t.Renewal / MicroUSD(t.RenewalPeriodYears)
	return &v
}

func price(dollars, cents int64) *MicroUSD {
	v := USD(dollars, cents)
	return &v
}

// catalog is ordered: the common-launch TLDs first, in the order a launch
// usually wants them, then the exotic ones.
var catalog = []TLD{
	{Name: "com", FirstYear: price(11, 25), Renewal: price(11, 25), RenewalPeriodYears: 1, Common: true},
	{Name: "dev", FirstYear: price(12, 0), Renewal: price(12, 0), RenewalPeriodYears: 1, Common: true},
	{Name: "app", FirstYear: price(14, 0), Renewal: price(14, 0), RenewalPeriodYears: 1, Common: true},
	{Name: "io", FirstYear: price(39, 0), Renewal: price(49, 0), RenewalPeriodYears: 1, Common: true},
	{Name: "ai", FirstYear: price(79, 0), Renewal: price(158, 0), RenewalPeriodYears: 2, Common: true},
	{Name: "co", FirstYear: price(11, 99), Renewal: price(27, 99), RenewalPeriodYears: 1, Common: true},
	{Name: "net", FirstYear: price(13, 50), Renewal: price(13, 50), RenewalPeriodYears: 1, Common: true},
	{Name: "org", FirstYear: price(10, 99), Renewal: price(12, 99), RenewalPeriodYears: 1, Common: true},
	{Name: "sh", FirstYear: price(39, 0), Renewal: price(39, 0), RenewalPeriodYears: 1, Common: true},
	{Name: "xyz", FirstYear: price(1, 99), Renewal: price(13, 99), RenewalPeriodYears: 1, Common: true},
	{Name: "site", FirstYear: price(2, 99), Renewal: price(29, 99), RenewalPeriodYears: 1},
	{Name: "tech", FirstYear: price(7, 99), Renewal: price(49, 99), RenewalPeriodYears: 1},
	{Name: "studio", FirstYear: price(9, 99), Renewal: price(25, 99), RenewalPeriodYears: 1},
	{Name: "ninja", FirstYear: price(5, 99), Renewal: price(19, 99), RenewalPeriodYears: 1},
	{Name: "pizza", FirstYear: price(14, 99), Renewal: price(54, 99), RenewalPeriodYears: 1},
	{Name: "horse", FirstYear: price(8, 99), Renewal: price(31, 99), RenewalPeriodYears: 1},
	{Name: "museum", FirstYear: nil, Renewal: price(60, 0), RenewalPeriodYears: 1},
	{Name: "aero", FirstYear: price(69, 0), Renewal: nil, RenewalPeriodYears: 1},
	{Name: "bank", FirstYear: nil, Renewal: nil, RenewalPeriodYears: 1},
	{Name: "quest", FirstYear: price(3, 49), Renewal: price(59, 97), RenewalPeriodYears: 3},
}

// Catalog returns the TLDs in catalog order: the common-launch catalog, or
// the full one.
func Catalog(full bool) []TLD {
	var out []TLD
	for _, t := range catalog {
		if full || t.Common {
			out = append(out, t)
		}
	}
	return out
}

// Lookup finds a TLD in the full catalog.
func Lookup(name string) (TLD, bool) {
	for _, t := range catalog {
		if t.Name == name {
			return t, true
		}
	}
	return TLD{}, false
}

// Quote is the sandbox registrar's answer for one name.
type Quote struct {
	Domain    string
	TLD       TLD
	Available bool
	Premium   bool
	FirstYear *MicroUSD
	Renewal   *MicroUSD
}

// reserved names are never available, whatever the hash says.
var reserved = map[string]bool{"example": true, "test": true, "localhost": true, "invalid": true, "pier": true}

// Check quotes label.tld. Availability is a pure function of the name, so a
// search gives the same answer on every run and every replica. Two-letter
// labels are premium with no published price; three-letter ones are premium
// at twenty times the list price.
func Check(label string, t TLD) Quote {
	domain := label + "." + t.Name
	sum := sha256.Sum256([]byte(domain))
	q := Quote{
		Domain:    domain,
		TLD:       t,
		Available: sum[0] >= 0x50 && !reserved[label],
		FirstYear: t.FirstYear,
		Renewal:   t.Renewal,
	}
	switch n := len(strings.ReplaceAll(label, "-", "")); {
	case n <= 2:
		q.Premium = true
		q.FirstYear = nil
	case n == 3 && q.FirstYear != nil:
		q.Premium = true
		p := *q.FirstYear * 20
		q.FirstYear = &p
	}
	return q
}

// PriceList is the sandbox registrar's price list: the catalog, with the
// first-year price of some TLDs set by the operator. Prices move; quotes
// and workflows compare what they were told with what the list says now.
type PriceList map[string]MicroUSD

// Lookup finds a TLD at the list's price.
func (pl PriceList) Lookup(name string) (TLD, bool) {
	t, ok := Lookup(name)
	if p, set := pl[name]; ok && set {
		t.FirstYear = &p
	}
	return t, ok
}

// Catalog is Catalog at the list's prices.
func (pl PriceList) Catalog(full bool) []TLD {
	out := Catalog(full)
	for i, t := range out {
		if p, set := pl[t.Name]; set {
			out[i].FirstYear = &p
		}
	}
	return out
}
