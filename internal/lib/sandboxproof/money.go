package sandboxproof

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Amounts are integer micro-USD, as everywhere in Pier. The format carries
// them as JSON numbers of dollars with at most two fractional digits, which
// Go and JavaScript both print the same way.
const (
	microPerCent = 10_000
	// MandateAmountMicroUSD is the sandbox's fixed fake-money mandate: 100 USD.
	MandateAmountMicroUSD int64 = 100_000_000
	// AllowedAmountMicroUSD is what the reference server charges for an "allowed" attempt.
	AllowedAmountMicroUSD int64 = 5_000_000
	// ApprovalAmountMicroUSD is what the reference server asks approval for.
	ApprovalAmountMicroUSD int64 = 20_000_000
)

// USDNumber renders an amount as the format's JSON number.
func USDNumber(micro int64) (json.Number, error) {
	if micro <= 0 || micro > MandateAmountMicroUSD || micro%microPerCent != 0 {
		return "", fmt.Errorf("%w: amount %d micro-USD is not whole cents in (0, 100] USD", ErrMalformed, micro)
	}
	cents := micro / microPerCent
	s := strconv.FormatInt(cents/100, 10)
	if frac := cents % 100; frac != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%02d", frac), "0")
	}
	return json.Number(s), nil
}
