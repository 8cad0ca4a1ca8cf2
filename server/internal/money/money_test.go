package money

import "testing"

func TestConversions(t *testing.T) {
	if USD(12, 5) != 12_050_000 {
		t.Errorf("USD(12, 5) = %d", USD(12, 5))
	}
	for _, c := range []struct {
		in   float64
		want MicroUSD
	}{{0.1 + 0.2, 300_000}, {12.34, 12_340_000}, {0.0000004, 0}, {0.0000005, 1}, {-1.5, -1_500_000}} {
		if got := FromUSD(c.in); got != c.want {
			t.Errorf("FromUSD(%v) = %d, want %d", c.in, got, c.want)
		}
	}
	if MicroUSD(1_250_000).USD() != 1.25 {
		t.Error("USD() of 1.25")
	}
}
