package ledger

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

type code string

type amount int64

type flag bool

type marshalled string

func (m marshalled) MarshalJSON() ([]byte, error) { return []byte(`"m:` + string(m) + `"`), nil }

// TestNormalizePlainMatchesTheRoundTrip: the details the server writes
// normalize without JSON to exactly what the round trip through JSON
// gives, and anything else is left to the round trip.
func TestNormalizePlainMatchesTheRoundTrip(t *testing.T) {
	cases := []struct {
		details map[string]any
		plain   bool
	}{
		{map[string]any{"projectId": "prj_1", "decision": "ALLOW", "amountMicroUsd": amount(7_000_000), "held": true,
			"reasons": []code{}, "n": 0, "neg": int64(-3), "u": uint16(9), "nothing": nil, "f": flag(false)}, true},
		{map[string]any{"reasons": []code{"budget:insufficient", "policy:tld_denied"}, "none": []code(nil), "s": []string{"a"}}, true},
		{map[string]any{"html": "<a href=\"x\">&</a>", "unicode": "é\u2028\u2029", "ctl": "\x01\t\n"}, true},
		{map[string]any{"period": "month", "capMicroUsd": nil}, true},
		{map[string]any{}, true},

		{map[string]any{"bad": "\xff"}, false},
		{map[string]any{"\xffkey": "x"}, false},
		{map[string]any{"bad": []string{"\xff"}}, false},
		{map[string]any{"f": 1.5}, false},
		{map[string]any{"num": json.Number("12.50")}, false},
		{map[string]any{"nums": []json.Number{"1"}}, false},
		{map[string]any{"m": marshalled("x")}, false},
		{map[string]any{"ms": []marshalled{"x"}}, false},
		{map[string]any{"at": time.Unix(0, 0).UTC()}, false},
		{map[string]any{"nested": map[string]any{"a": 1}}, false},
		{map[string]any{"list": []any{"a", 1}}, false},
		{map[string]any{"bytes": []byte("ab")}, false},
	}
	for _, c := range cases {
		got, ok := normalizedPlain(c.details)
		if ok != c.plain {
			t.Errorf("plain %v, want %v: %#v", ok, c.plain, c.details)
			continue
		}
		want := roundTrip(t, c.details)
		if ok && !reflect.DeepEqual(got, want) {
			t.Errorf("plain %#v, round trip %#v", got, want)
		}
		if n, err := normalize(c.details); err != nil || !reflect.DeepEqual(n, want) {
			t.Errorf("normalize %#v (%v), round trip %#v", n, err, want)
		}
	}
}

// roundTrip is normalize as it was: JSON there and back, numbers as text.
func roundTrip(t *testing.T, d map[string]any) map[string]any {
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}
