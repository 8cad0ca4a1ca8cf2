package pricing

import "testing"

func TestMonthly(t *testing.T) {
	edge, _ := Lookup("edge")
	cases := []struct {
		u    Usage
		want MicroUSD
	}{
		{Usage{Requests: 1_000_000, EgressMicroGB: 100_000_000}, 0},
		{Usage{Requests: 1_000_001}, 1},          // rounds up: never understate
		{Usage{Requests: 3_500_000}, usd(0, 50)}, // 2.5M over at 0.20/M
		{Usage{EgressMicroGB: 100_100_000}, 5_000},
		{Usage{Requests: 100_000_000_000, EgressMicroGB: 1_000_000_000_000}, 19999_800_000 + 49_995_000_000},
	}
	for _, c := range cases {
		if got := Total(Monthly(edge, c.u)); got != c.want {
			t.Errorf("%+v: got %d want %d", c.u, got, c.want)
		}
	}
}

func TestNeedsAreSatisfiable(t *testing.T) {
	for w, n := range Needs {
		ok := false
		for _, t := range Targets {
			if t.Kind == "compute" && t.Has(n.Compute) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("%s: no compute target has %s", w, n.Compute)
		}
		for _, a := range n.Addons {
			if _, found := AddonFor(a); !found {
				t.Errorf("%s: no add-on provides %s", w, a)
			}
		}
	}
}
