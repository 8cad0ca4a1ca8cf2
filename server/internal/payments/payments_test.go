package payments

import (
	"errors"
	"testing"
	"time"
)

func TestLuhn(t *testing.T) {
	for number, want := range map[string]bool{
		"4242424242424242":    true,
		"4242424242424241":    false,
		"4000000000000002":    true,
		"4000000000009995":    true,
		"378282246310005":     true,
		"5555555555554444":    true,
		"0000000000000000":    true,
		"42424242424242a2":    false,
		"4242":                false,
		"4242424242424242424": false,
	} {
		if got := Luhn(number); got != want {
			t.Errorf("Luhn(%s) = %v, want %v", number, got, want)
		}
	}
}

func TestAuthorize(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		card   Card
		code   string
		brand  string
		last4  string
		expiry int
	}{
		{"visa succeeds", Card{"4242 4242 4242 4242", 12, 2030, "123"}, "", "visa", "4242", 12},
		{"dashes", Card{"5555-5555-5555-4444", 1, 2027, "999"}, "", "mastercard", "4444", 1},
		{"amex needs four digits", Card{"378282246310005", 1, 2027, "123"}, InvalidCVC, "", "", 0},
		{"amex", Card{"378282246310005", 1, 2027, "1234"}, "", "amex", "0005", 1},
		{"declined", Card{"4000000000000002", 12, 2030, "123"}, CardDeclined, "", "", 0},
		{"insufficient funds", Card{"4000000000009995", 12, 2030, "123"}, InsufficientFunds, "", "", 0},
		{"bad checksum", Card{"4242424242424241", 12, 2030, "123"}, IncorrectNumber, "", "", 0},
		{"expired", Card{"4242424242424242", 10, 2026, "123"}, ExpiredCard, "", "", 0},
		{"this month still works", Card{"4242424242424242", 11, 2026, "123"}, "", "visa", "4242", 11},
		{"bad month", Card{"4242424242424242", 13, 2030, "123"}, InvalidExpiry, "", "", 0},
		{"a real-looking number", Card{"4111111111111111", 12, 2030, "123"}, LiveCard, "", "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Authorize(tc.card, now)
			if tc.code != "" {
				var d *Decline
				if !errors.As(err, &d) || d.Code != tc.code || d.Resolution == "" {
					t.Fatalf("got %v, want decline %s", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Brand != tc.brand || m.Last4 != tc.last4 || m.ExpMonth != tc.expiry {
				t.Fatalf("method %+v", m)
			}
		})
	}
}

func TestParseExpiry(t *testing.T) {
	for in, want := range map[string][2]int{"12/30": {12, 2030}, "01 / 2031": {1, 2031}, "7/29": {7, 2029}} {
		m, y, err := ParseExpiry(in)
		if err != nil || m != want[0] || y != want[1] {
			t.Errorf("%q: %d %d %v", in, m, y, err)
		}
	}
	for _, in := range []string{"", "1230", "13/30", "12/3", "aa/bb"} {
		if _, _, err := ParseExpiry(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
