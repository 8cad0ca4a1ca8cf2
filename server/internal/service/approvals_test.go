package service

import "testing"

// What an approval page says of each kind of quote line.
func TestItemWords(t *testing.T) {
	for _, c := range []struct {
		it   pricedItem
		want string
	}{
		{pricedItem{Kind: "domain", Domain: "acme.dev", Years: 1, AmountMicro: 12_000_000}, "the domain acme.dev for 1 year(s): $12.00"},
		{pricedItem{Kind: "email", Domain: "acme.dev", Months: 1, AmountMicro: 1_000_000}, "email on acme.dev for 1 month(s): $1.00"},
		{pricedItem{Kind: "service", Name: "app", Target: "process", Workload: "dynamic_service", Months: 2, AmountMicro: 10_000_000}, "app on process (dynamic_service) for 2 month(s): $10.00"},
	} {
		if got := itemWords(c.it); got != c.want {
			t.Errorf("itemWords(%+v) = %q, want %q", c.it, got, c.want)
		}
	}
}
