// Package ratelimit is a token bucket per caller and class, on an injected
// clock. Buckets idle for longer than it takes them to refill are dropped, so
// memory stays bounded by the callers active in the last few minutes.
package ratelimit

import (
	"context"
	"math"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Policy is a bucket's refill rate and size.
type Policy struct {
	PerSecond float64
	Burst     int
}

// Shared keeps buckets every replica sees (GCRA in the database): Take
// spends one request, interval being what a request costs and tolerance
// how far ahead of now the bucket may run.
type Shared interface {
	Take(ctx context.Context, key string, now time.Time, interval, tolerance time.Duration) (allowed bool, tat time.Time, err error)
}

// Limiter holds the buckets.
type Limiter struct {
	// Shared, when set, decides instead of the local buckets, so that
	// replicas on one database together allow what one would. A failure
	// of it falls back on the local bucket.
	Shared Shared

	mu       sync.Mutex
	policies map[string]Policy
	buckets  map[string]*bucket
	now      func() time.Time
	lastGC   time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// New returns a limiter with a policy per class. A class with no policy is
// not limited.
func New(policies map[string]Policy, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{policies: policies, buckets: map[string]*bucket{}, now: now}
}

// Decision is the outcome of one Allow.
type Decision struct {
	Allowed    bool
	Limit      int
	Remaining  int
	RetryAfter time.Duration // when not allowed
	Reset      time.Duration // until the bucket is full again
	Policy     Policy
}

// Headers returns the RateLimit and RateLimit-Policy header values.
func (d Decision) Headers() (limit, policy string) {
	return string(d.AppendLimit(nil)), string(d.AppendPolicy(nil))
}

// AppendLimit appends the RateLimit header's value to dst.
func (d Decision) AppendLimit(dst []byte) []byte {
	dst = append(dst, "limit="...)
	dst = strconv.AppendInt(dst, int64(d.Limit), 10)
	dst = append(dst, ", remaining="...)
	dst = strconv.AppendInt(dst, int64(d.Remaining), 10)
	dst = append(dst, ", reset="...)
	return strconv.AppendInt(dst, int64(int(math.Ceil(d.Reset.Seconds()))), 10)
}

// AppendPolicy appends the RateLimit-Policy header's value to dst.
func (d Decision) AppendPolicy(dst []byte) []byte {
	window := int(math.Ceil(float64(d.Policy.Burst) / d.Policy.PerSecond))
	dst = strconv.AppendInt(dst, int64(d.Policy.Burst), 10)
	dst = append(dst, ";w="...)
	return strconv.AppendInt(dst, int64(window), 10)
}

// Allow takes one token for caller in class.
func (l *Limiter) Allow(class, caller string) (Decision, bool) {
	p, ok := l.policies[class]
	if !ok || class == "" {
		return Decision{Allowed: true}, false
	}
	now := l.now()
	key := class + "\x00" + caller
	if l.Shared != nil {
		// PostgreSQL text holds no NUL: the shared key uses a space.
		if d, err := l.allowShared(class+" "+caller, p, now); err == nil {
			return d, true
		}
	}

	l.mu.Lock()
	if now.Sub(l.lastGC) > time.Minute {
		l.gc(now)
	}
	b, ok := l.buckets[key]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(p.PerSecond), p.Burst)}
		l.buckets[key] = b
	}
	b.seen = now
	allowed := b.lim.AllowN(now, 1)
	tokens := b.lim.TokensAt(now)
	l.mu.Unlock()

	d := Decision{Allowed: allowed, Limit: p.Burst, Remaining: max(0, int(tokens)), Policy: p}
	missing := float64(p.Burst) - tokens
	d.Reset = time.Duration(missing / p.PerSecond * float64(time.Second))
	if !allowed {
		need := 1 - tokens
		d.RetryAfter = time.Duration(math.Ceil(need/p.PerSecond*1000)) * time.Millisecond
	}
	return d, true
}

// Would reports whether Allow would allow a request for caller in class
// now, without taking a token. With Shared set it answers false: only
// the database knows.
func (l *Limiter) Would(class, caller string) bool {
	p, ok := l.policies[class]
	if !ok || class == "" {
		return true
	}
	if l.Shared != nil {
		return false
	}
	now := l.now()
	l.mu.Lock()
	b, ok := l.buckets[class+"\x00"+caller]
	tokens := float64(p.Burst) // a new bucket starts full
	if ok {
		tokens = b.lim.TokensAt(now)
	}
	l.mu.Unlock()
	return tokens >= 1
}

// allowShared is GCRA on the shared buckets: the same limit and burst as
// a token bucket, kept as one time per bucket.
func (l *Limiter) allowShared(key string, p Policy, now time.Time) (Decision, error) {
	interval := time.Duration(float64(time.Second) / p.PerSecond)
	tolerance := interval * time.Duration(max(p.Burst-1, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	allowed, tat, err := l.Shared.Take(ctx, key, now, interval, tolerance)
	if err != nil {
		return Decision{}, err
	}
	ahead := max(tat.Sub(now), 0)
	d := Decision{Allowed: allowed, Limit: p.Burst, Policy: p, Reset: ahead}
	d.Remaining = max(0, int((tolerance-ahead)/interval)+1)
	if !allowed {
		d.Remaining = 0
		d.RetryAfter = max(ahead-tolerance, time.Millisecond)
	}
	return d, nil
}

func (l *Limiter) gc(now time.Time) {
	l.lastGC = now
	for k, b := range l.buckets {
		if now.Sub(b.seen) > 10*time.Minute {
			delete(l.buckets, k)
		}
	}
}
