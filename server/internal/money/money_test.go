package money

import (
	"fmt"
	"testing"
)

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

func TestFormats(t *testing.T) {
	for _, c := range []struct {
		m        MicroUSD
		str, dec string
	}{
		{12_500_000, "$12.50", "12.50"},
		{0, "$0.00", "0.00"},
		{-50_000, "-$0.05", "-0.05"},
		{1_234_567, "$1.23", "1.23"},
		{5_000, "$0.01", "0.01"},
		{15_000, "$0.02", "0.01"}, // an exact half cent: String rounds up, Decimal as %.2f did
		{99_995_000, "$100.00", "100.00"},
	} {
		if got := c.m.String(); got != c.str {
			t.Errorf("MicroUSD(%d).String() = %q, want %q", int64(c.m), got, c.str)
		}
		if got := c.m.Decimal(); got != c.dec || got != fmt.Sprintf("%.2f", float64(c.m)/1e6) {
			t.Errorf("MicroUSD(%d).Decimal() = %q, want %q, as %%.2f", int64(c.m), got, c.dec)
		}
	}
}
