// Package payments is the built-in test payment provider. It takes test card
// numbers only, the way a card processor's test mode does: some succeed,
// some are declined with a fixed reason, and every other number is refused.
// It never keeps a full card number: a card it accepts comes back as brand,
// last four digits and expiry. It knows nothing of HTTP or storage.
package payments

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Card is what a human typed on the card page.
type Card struct {
	Number   string // digits, spaces and dashes allowed
	ExpMonth int
	ExpYear  int // four digits
	CVC      string
}

// Method is an accepted card, safe to store.
type Method struct {
	Brand    string
	Last4    string
	ExpMonth int
	ExpYear  int
}

// Decline is a refused card. Code is stable; Message and Resolution are
// for the person at the card page.
type Decline struct {
	Code       string
	Message    string
	Resolution string
}

func (d *Decline) Error() string { return "card refused: " + d.Code }

// Decline codes.
const (
	IncorrectNumber   = "incorrect_number"
	InvalidExpiry     = "invalid_expiry"
	ExpiredCard       = "expired_card"
	InvalidCVC        = "invalid_cvc"
	CardDeclined      = "card_declined"
	InsufficientFunds = "insufficient_funds"
	LiveCard          = "live_card_in_test_mode"
)

// TestCard is one number the provider knows, and what it does.
type TestCard struct {
	Number  string
	Brand   string
	Outcome string // "" succeeds, else a decline code
}

// TestCards are the numbers the card page documents.
var TestCards = []TestCard{
	{"4242424242424242", "visa", ""},
	{"5555555555554444", "mastercard", ""},
	{"378282246310005", "amex", ""},
	{"4000000000000002", "visa", CardDeclined},
	{"4000000000009995", "visa", InsufficientFunds},
}

const useTestCard = "Use a test card: 4242 4242 4242 4242 with any future expiry and any CVC."

// Normalize strips the spaces and dashes people type.
func Normalize(number string) string {
	return strings.NewReplacer(" ", "", "-", "").Replace(strings.TrimSpace(number))
}

// Luhn reports whether a string of digits passes the Luhn checksum.
func Luhn(digits string) bool {
	if len(digits) < 12 || len(digits) > 19 {
		return false
	}
	sum := 0
	double := false
	for i := len(digits) - 1; i >= 0; i-- {
		c := digits[i]
		if c < '0' || c > '9' {
			return false
		}
		d := int(c - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// Brand names the card network from the number's prefix.
func Brand(digits string) string {
	switch {
	case strings.HasPrefix(digits, "4"):
		return "visa"
	case strings.HasPrefix(digits, "34"), strings.HasPrefix(digits, "37"):
		return "amex"
	case len(digits) >= 2 && digits[0] == '5' && digits[1] >= '1' && digits[1] <= '5':
		return "mastercard"
	case strings.HasPrefix(digits, "2"):
		if n, err := strconv.Atoi(digits[:4]); err == nil && n >= 2221 && n <= 2720 {
			return "mastercard"
		}
	case strings.HasPrefix(digits, "6011"), strings.HasPrefix(digits, "65"):
		return "discover"
	}
	return "unknown"
}

// ParseExpiry reads "MM/YY", "MM / YY" or "MM/YYYY".
func ParseExpiry(s string) (month, year int, err error) {
	m, y, ok := strings.Cut(strings.ReplaceAll(s, " ", ""), "/")
	if !ok {
		return 0, 0, fmt.Errorf("expiry must be MM/YY")
	}
	month, err1 := strconv.Atoi(m)
	year, err2 := strconv.Atoi(y)
	if err1 != nil || err2 != nil || month < 1 || month > 12 || (len(y) != 2 && len(y) != 4) {
		return 0, 0, fmt.Errorf("expiry must be MM/YY")
	}
	if len(y) == 2 {
		year += 2000
	}
	return month, year, nil
}

// Expired reports whether a card expiring at the end of month/year has
// expired at now.
func Expired(month, year int, now time.Time) bool {
	end := time.Date(year, time.Month(month)+1, 1, 0, 0, 0, 0, time.UTC)
	return !now.Before(end)
}

// Authorize checks a card the way the test provider's processor would and
// returns what may be stored, or a *Decline.
func Authorize(c Card, now time.Time) (Method, error) {
	digits := Normalize(c.Number)
	if !Luhn(digits) {
		return Method{}, &Decline{IncorrectNumber, "The card number is not valid.", "Check the number for typing mistakes. " + useTestCard}
	}
	if c.ExpMonth < 1 || c.ExpMonth > 12 || c.ExpYear < 2000 || c.ExpYear > now.Year()+30 {
		return Method{}, &Decline{InvalidExpiry, "The expiry date is not valid.", "Enter the expiry as MM/YY, such as 12/30."}
	}
	if Expired(c.ExpMonth, c.ExpYear, now) {
		return Method{}, &Decline{ExpiredCard, "The card has expired.", "Use a card whose expiry date is in the future."}
	}
	brand := Brand(digits)
	cvcLen := 3
	if brand == "amex" {
		cvcLen = 4
	}
	if len(c.CVC) != cvcLen || strings.Trim(c.CVC, "0123456789") != "" {
		return Method{}, &Decline{InvalidCVC, fmt.Sprintf("The security code must be %d digits.", cvcLen), "Enter the digits printed on the card (any digits for a test card)."}
	}
	for _, tc := range TestCards {
		if tc.Number != digits {
			continue
		}
		switch tc.Outcome {
		case "":
			return Method{Brand: tc.Brand, Last4: digits[len(digits)-4:], ExpMonth: c.ExpMonth, ExpYear: c.ExpYear}, nil
		case InsufficientFunds:
			return Method{}, &Decline{InsufficientFunds, "The card was declined: insufficient funds.", "Use another card. " + useTestCard}
		default:
			return Method{}, &Decline{CardDeclined, "The card was declined.", "Use another card. " + useTestCard}
		}
	}
	return Method{}, &Decline{LiveCard, "This is the test payment provider; it takes test card numbers only.", useTestCard}
}

// Last4 returns the last four digits of a number as typed, for recording a
// declined attempt without the number.
func Last4(number string) string {
	d := Normalize(number)
	if len(d) < 4 {
		return ""
	}
	return d[len(d)-4:]
}
