// Package money is Pier's one money type: whole micro-USD in an int64.
// Money is never a float inside the server; the contract's decimal USD
// numbers are converted at the edges, rounding to the nearest micro-USD.
package money

import (
	"fmt"
	"math"
	"strconv"
)

// MicroUSD is an amount in millionths of a US dollar.
type MicroUSD int64

// USD is dollars and cents, for writing catalogs.
func USD(dollars, cents int64) MicroUSD { return MicroUSD(dollars*1_000_000 + cents*10_000) }

// FromUSD converts a decimal USD amount from the contract.
func FromUSD(v float64) MicroUSD { return MicroUSD(math.Round(v * 1e6)) }

// USD is the amount in decimal dollars, for the contract's numbers.
func (m MicroUSD) USD() float64 { return float64(m) / 1e6 }

// String formats the amount as dollars and cents, rounding to the nearest
// cent: "$12.50".
func (m MicroUSD) String() string {
	sign := ""
	if m < 0 {
		sign, m = "-", -m
	}
	cents := (int64(m) + 5_000) / 10_000
	return fmt.Sprintf("%s$%d.%02d", sign, cents/100, cents%100)
}

// Decimal formats the amount as the API's messages and task steps write
// it before " USD": two decimals, "12.50". It rounds as the float64 of
// USD() does, which those texts have always used, so that they stay the
// same bytes (String's rounding differs only on an exact half cent).
func (m MicroUSD) Decimal() string { return strconv.FormatFloat(m.USD(), 'f', 2, 64) }
