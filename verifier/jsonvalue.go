package verifier

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Documents are decoded into generic values and members are read by exact
// name, the way JavaScript reads them. Go's struct decoding matches names
// case-insensitively and would let "AmountUsd" stand in for "amountUsd".

type object = map[string]any

func parseObject(b []byte) (object, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	m, ok := v.(object)
	if !ok {
		return nil, errors.New("not a JSON object")
	}
	return m, nil
}

// exactly insists on the members of an object: an unchecked member is an
// unverified claim.
func exactly(m object, required []string, optional ...string) error {
	for _, name := range required {
		if _, ok := m[name]; !ok {
			return fmt.Errorf("missing member %q", name)
		}
	}
	unknown := false
	for name := range m {
		if !slices.Contains(required, name) && !slices.Contains(optional, name) {
			unknown = true
			break
		}
	}
	if !unknown {
		return nil
	}
	// Name the first unknown member in sorted order, whatever the map's.
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(required, name) && !slices.Contains(optional, name) {
			return fmt.Errorf("unknown member %q", name)
		}
	}
	return nil
}

func getString(m object, name string) (string, error) {
	s, ok := m[name].(string)
	if !ok {
		return "", fmt.Errorf("%q must be a string", name)
	}
	return s, nil
}

func getMatch(m object, name string, pattern func() *regexp.Regexp) (string, error) {
	s, err := getString(m, name)
	if err != nil {
		return "", err
	}
	if re := pattern(); !re.MatchString(s) {
		return "", fmt.Errorf("%q is %q, which does not match %s", name, s, re)
	}
	return s, nil
}

func getConst(m object, name string, want any) error {
	if m[name] != want {
		return fmt.Errorf("%q must be %s", name, jsonText(want))
	}
	return nil
}

func getObject(m object, name string) (object, error) {
	o, ok := m[name].(object)
	if !ok {
		return nil, fmt.Errorf("%q must be an object", name)
	}
	return o, nil
}

// getNumericDate reads a JWT NumericDate: whole seconds, in the range where
// float64 and JavaScript numbers are exact.
func getNumericDate(m object, name string) (int64, error) {
	f, ok := m[name].(float64)
	if !ok || f < 0 || f > 1<<53 || f != math.Trunc(f) {
		return 0, fmt.Errorf("%q must be integer seconds", name)
	}
	return int64(f), nil
}

// The fields' patterns, compiled on first use rather than at package init:
// the counted repetitions expand to thousands of instructions, which every
// command of the binary would otherwise pay for at start.
var (
	proofIDPattern   = lazyRegexp(`^sbp_[A-Za-z0-9_-]{20,32}$`)
	idPattern        = lazyRegexp(`^[A-Za-z0-9_-]{1,128}$`)
	noncePattern     = lazyRegexp(`^[A-Za-z0-9_-]{16,128}$`)
	hexPattern       = lazyRegexp(`^[0-9a-f]{64}$`)
	timestampPattern = lazyRegexp(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$`)
	amountPattern    = lazyRegexp(`^[0-9]+(\.[0-9]{1,2})?$`)
)

func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

func getTimestamp(m object, name string) (string, error) {
	s, err := getMatch(m, name, timestampPattern)
	if err != nil {
		return "", err
	}
	// The pattern admits "2026-02-30T25:00:00Z"; a real instant must
	// print back to itself.
	t, err := time.Parse("2006-01-02T15:04:05Z", s)
	if err != nil || t.UTC().Format("2006-01-02T15:04:05Z") != s {
		return "", fmt.Errorf("%q is %q, which is not a real instant", name, s)
	}
	return s, nil
}

// amount is a fake-money amount kept both as the JSON number and in cents.
type amount struct {
	value float64
	text  string
	cents int64
}

// getAmount reads an amount: a number in (0, 100] with at most two
// fractional digits in its shortest round-trip form. Cents are taken from
// that decimal text, so no float arithmetic touches money.
func getAmount(m object, name string) (amount, error) {
	f, ok := m[name].(float64)
	if !ok {
		return amount{}, fmt.Errorf("%q must be a number", name)
	}
	text := strconv.FormatFloat(f, 'f', -1, 64)
	if !(f > 0 && f <= 100) || !amountPattern().MatchString(text) {
		return amount{}, fmt.Errorf("%q is %s, not whole cents in (0, 100]", name, text)
	}
	whole, frac, _ := strings.Cut(text, ".")
	w, _ := strconv.ParseInt(whole, 10, 64)
	c := int64(0)
	if frac != "" {
		c, _ = strconv.ParseInt((frac + "0")[:2], 10, 64)
	}
	return amount{value: f, text: text, cents: w*100 + c}, nil
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
