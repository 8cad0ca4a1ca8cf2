package sandboxproof

import (
	"crypto/rand"
	"fmt"
	"regexp"
	"sync"
	"time"
)

// The ids' patterns are compiled on first use: their counted repetitions
// expand to thousands of instructions, which every command of the binary
// would otherwise pay for at package init.
var (
	// ProofIDPattern is SPEC §2.10's pattern for proof ids.
	ProofIDPattern = lazyRegexp(`^sbp_[A-Za-z0-9_-]{20,32}$`)
	// IDPattern constrains session, attempt and gate ids. The request digest
	// embeds them in JSON without escaping, which is only safe for this alphabet.
	IDPattern    = lazyRegexp(`^[A-Za-z0-9_-]{1,128}$`)
	noncePattern = lazyRegexp(`^[A-Za-z0-9_-]{16,128}$`)
)

func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// Id prefixes used by the reference server.
const (
	PrefixSession = "sbs"
	PrefixAttempt = "sba"
	PrefixGate    = "sbg"
	PrefixProof   = "sbp"
)

// NewID returns prefix + "_" + 24 random base64url characters. With the
// "sbp" prefix the result matches ProofIDPattern.
func NewID(prefix string) (string, error) {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	id := prefix + "_" + b64(b)
	if !IDPattern().MatchString(id) {
		return "", fmt.Errorf("sandboxproof: prefix %q makes an invalid id", prefix)
	}
	return id, nil
}

// NewProofID returns a fresh proof id.
func NewProofID() (string, error) { return NewID(PrefixProof) }

// NewNonce returns 16 random bytes in base64url.
func NewNonce() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return b64(b), nil
}

const timeLayout = "2006-01-02T15:04:05Z"

// FormatTime renders the format's timestamps: UTC, whole seconds. Truncating
// (not rounding) keeps a decision recorded within its gate's last second
// inside the gate's expiry.
func FormatTime(t time.Time) string {
	return t.UTC().Truncate(time.Second).Format(timeLayout)
}

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(timeLayout, s)
	if err != nil || t.Format(timeLayout) != s {
		return time.Time{}, fmt.Errorf("%q is not a UTC timestamp with whole seconds", s)
	}
	return t, nil
}
