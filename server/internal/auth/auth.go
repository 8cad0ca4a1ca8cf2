// Package auth mints and checks API keys and carries the caller's identity
// through a request. Keys are high-entropy secrets, so a SHA-256 of the key is
// enough to store them safely and look them up in one indexed query; only the
// hash is ever written down.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// KeyPrefix starts every API key (SPEC §5).
const KeyPrefix = "agk_"

// Scopes every key may carry.
var Scopes = []string{"read", "quote", "launch", "buy_domain"}

// NewKey returns a new key secret and the hash to store.
func NewKey() (secret, hash string) {
	secret = KeyPrefix + Token(32)
	return secret, HashKey(secret)
}

// HashKey is what the store keeps in place of the secret.
func HashKey(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Token returns n random bytes, base64url without padding.
func Token(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// ID returns a new object id with a type prefix, such as "key_…".
func ID(prefix string) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return prefix + "_" + strings.ToLower(base32(b))
}

func base32(b []byte) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	var sb strings.Builder
	var acc, bits uint
	for _, c := range b {
		acc = acc<<8 | uint(c)
		bits += 8
		for bits >= 5 {
			sb.WriteByte(alphabet[(acc>>(bits-5))&31])
			bits -= 5
		}
	}
	if bits > 0 {
		sb.WriteByte(alphabet[(acc<<(5-bits))&31])
	}
	return sb.String()
}

// Principal is who is calling.
type Principal struct {
	// Kind is "anonymous", "agent" or "sandbox_agent".
	Kind  string
	OrgID string
	KeyID string
	// GrantID is set instead of KeyID when the caller holds an OAuth
	// access token: the grant a human approved for its client.
	GrantID string
	Scopes  []string
	// Caller identifies the caller for rate limits and idempotency: the key,
	// or the client address when anonymous.
	Caller string
}

// HasScope reports whether the principal carries scope.
func (p *Principal) HasScope(scope string) bool {
	for _, s := range p.Scopes {
		if s == scope {
			return true
		}
	}
	return false
}

type ctxKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the principal, or an anonymous one.
func FromContext(ctx context.Context) *Principal {
	if p, ok := ctx.Value(ctxKey{}).(*Principal); ok {
		return p
	}
	return &Principal{Kind: "anonymous"}
}
