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

// gcra is p as the shared buckets keep it: what one request costs, and how
// far ahead of now a bucket may run (the burst).
func (p Policy) gcra() (interval, tolerance time.Duration) {
	interval = time.Duration(float64(time.Second) / p.PerSecond)
	return interval, interval * time.Duration(max(p.Burst-1, 0))
}

// Limiter holds the buckets.
type Limiter struct {
	// Shared, when set, decides instead of the local buckets, so that
	// replicas on one database together allow what one would. A failure
	// of it falls back on the local bucket.
	Shared Shared
	// NoLease makes every shared decision one write to the shared bucket
	// (Shared.Take), as before leases: the row-per-request design, kept
	// so benchmarks can measure leases against it in the same run.
	// Production leaves it off.
	NoLease bool

	mu       sync.Mutex
	policies map[string]Policy
	buckets  map[string]*bucket
	now      func() time.Time
	lastGC   time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
	// With Shared: tokens this replica has taken from the shared bucket
	// and not yet spent, until leaseEnd; blockedUntil is when the shared
	// bucket next has a token, learnt from a refusal; batch is how many
	// tokens the next take asks for.
	tokens       int
	leaseEnd     time.Time
	blockedUntil time.Time
	tat          time.Time
	batch        int
	taken        int // how many the last take brought
	// taking is closed when the take under way ends (nil when none is).
	taking chan struct{}
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
	if l.Shared != nil {
		// PostgreSQL text holds no NUL: the shared key uses a space.
		if d, err := l.allowShared(class+" "+caller, p, now); err == nil {
			return d, true
		}
	}
	// The bucket's key, class NUL caller, made on the stack: the map is
	// read without allocating it, and only a new bucket keeps a copy.
	var kb [64]byte
	key := append(append(append(kb[:0], class...), 0), caller...)

	l.mu.Lock()
	if now.Sub(l.lastGC) > time.Minute {
		l.gc(now)
	}
	b, ok := l.buckets[string(key)]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(p.PerSecond), p.Burst)}
		l.buckets[string(key)] = b
	}
	b.seen = now
	allowed := b.lim.AllowN(now, 1)
	tokens := b.lim.TokensAt(now)
	l.mu.Unlock()

	return localDecision(p, allowed, tokens), true
}

// localDecision is the answer of a local bucket under p left with tokens.
func localDecision(p Policy, allowed bool, tokens float64) Decision {
	d := Decision{Allowed: allowed, Limit: p.Burst, Remaining: max(0, int(tokens)), Policy: p}
	missing := float64(p.Burst) - tokens
	d.Reset = time.Duration(missing / p.PerSecond * float64(time.Second))
	if !allowed {
		need := 1 - tokens
		d.RetryAfter = time.Duration(math.Ceil(need/p.PerSecond*1000)) * time.Millisecond
	}
	return d
}

// Would reports whether Allow would allow a request for caller in class
// now, without taking a token. With Shared set it answers from the
// caller's lease: true while this replica holds a token of it, false
// otherwise (only the database knows), and always false with NoLease.
func (l *Limiter) Would(class, caller string) bool {
	p, ok := l.policies[class]
	if !ok || class == "" {
		return true
	}
	now := l.now()
	if l.Shared != nil {
		if l.NoLease {
			return false
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		b, ok := l.buckets[class+" "+caller]
		return ok && b.tokens > 0 && now.Before(b.leaseEnd)
	}
	l.mu.Lock()
	b, ok := l.buckets[class+"\x00"+caller]
	tokens := float64(p.Burst) // a new bucket starts full
	if ok {
		tokens = b.lim.TokensAt(now)
	}
	l.mu.Unlock()
	return tokens >= 1
}

// Refused answers the refusal Allow would give caller in class now, when
// it knows it without taking a token or asking the database: the local
// bucket is empty, or with shared buckets this replica learnt from a
// refusal that the shared one has no token yet. ok is false otherwise.
func (l *Limiter) Refused(class, caller string) (d Decision, ok bool) {
	p, limited := l.policies[class]
	if !limited || class == "" {
		return Decision{}, false
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Shared != nil {
		b, ok := l.buckets[class+" "+caller]
		if l.NoLease || !ok || b.tokens > 0 && now.Before(b.leaseEnd) || !now.Before(b.blockedUntil) {
			return Decision{}, false
		}
		return l.sharedDecision(p, now, b.tat, false, 0), true
	}
	b, ok := l.buckets[class+"\x00"+caller]
	if !ok {
		return Decision{}, false
	}
	if tokens := b.lim.TokensAt(now); tokens < 1 {
		return localDecision(p, false, tokens), true
	}
	return Decision{}, false
}

// Leases: a replica takes tokens from the shared bucket in batches and
// spends them locally, so that a busy caller costs one database write per
// batch, not per request, and a refused one none until the shared bucket
// has a token again. Tokens are only ever taken from the shared bucket,
// so replicas together never allow more than the limit; a lease's unspent
// tokens are lost when it ends, which bounds what they allow less.
const (
	// leaseFor bounds how long taken tokens stay spendable. Each replica
	// holds its own lease of a caller a balancer spreads over all of
	// them, so a caller under its limit spends a lease at a third of its
	// rate: at 250 ms, leases of a few tokens made one request in four or
	// five a write (bench/README.md, rate-limited throughput).
	leaseFor = time.Second
	// leaseShare is the most of a policy's rate one take asks for, in
	// seconds of its tokens (see maxBatch).
	leaseShare = 0.25
)

// allowShared decides from the caller's lease, taking a new batch from
// the shared bucket (GCRA in the database) when it is spent.
func (l *Limiter) allowShared(key string, p Policy, now time.Time) (Decision, error) {
	if l.NoLease {
		return l.allowRow(key, p, now)
	}
	l.mu.Lock()
	if now.Sub(l.lastGC) > time.Minute {
		l.gc(now)
	}
	b, ok := l.buckets[key]
	if !ok {
		b = &bucket{batch: 1}
		l.buckets[key] = b
	}
	// One take at a time per bucket: the requests that arrive while it is
	// out wait for it and spend what it brings, instead of each writing.
	// A caller whose batches have grown, or who was refused, is sending
	// faster than its lease lasts: it is refused meanwhile rather than
	// queued, and the batch is spent by the requests that follow.
	if b.taking != nil && b.batch > 1 {
		d := l.sharedDecision(p, now, b.tat, false, 0)
		d.RetryAfter = max(time.Duration(float64(time.Second)/p.PerSecond), time.Millisecond)
		l.mu.Unlock()
		return d, nil
	}
	for b.taking != nil {
		wait := b.taking
		l.mu.Unlock()
		<-wait
		l.mu.Lock()
		now = l.now()
	}
	b.seen = now
	if d, ok := b.local(l, p, now); ok {
		l.mu.Unlock()
		return d, nil
	}
	// A lease spent before it ended asks for twice as many next time; one
	// that ended with tokens left asks for what it spent (none yet: one),
	// so a slow caller costs what it did before leases and loses nothing
	// to them, and a steady one does not climb from one again.
	if b.leaseEnd.IsZero() {
		b.batch = 1
	} else if b.tokens > 0 {
		b.batch = max(1, b.taken-b.tokens)
	}
	want := b.batch
	b.taking = make(chan struct{})
	l.mu.Unlock()

	interval, tolerance := p.gcra()
	got, tat, err := l.take(key, now, interval, tolerance, want)
	l.mu.Lock()
	defer l.mu.Unlock()
	close(b.taking)
	b.taking = nil
	if err != nil {
		return Decision{}, err
	}
	b.tat = tat
	if got == 0 {
		// Nothing until the bucket has a token again; a caller still
		// sending then is over its limit, so this replica waits for a
		// batch's worth and takes them in one write.
		b.tokens, b.taken, b.batch, b.leaseEnd = 0, 0, maxBatch(p), now
		b.blockedUntil = tat.Add(-tolerance + time.Duration(b.batch-1)*interval)
		return l.sharedDecision(p, now, tat, false, 0), nil
	}
	b.tokens, b.taken, b.leaseEnd, b.blockedUntil = got-1, got, now.Add(leaseFor), time.Time{}
	b.batch = min(want*2, maxBatch(p))
	return l.sharedDecision(p, now, tat, true, b.tokens), nil
}

// allowRow is one GCRA statement per request on the shared bucket: the
// row-per-request design (NoLease).
func (l *Limiter) allowRow(key string, p Policy, now time.Time) (Decision, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	interval, tolerance := p.gcra()
	allowed, tat, err := l.Shared.Take(ctx, key, now, interval, tolerance)
	if err != nil {
		return Decision{}, err
	}
	return l.sharedDecision(p, now, tat, allowed, 0), nil
}

// local decides from the bucket's lease or known refusal alone, when it
// can; l.mu is held.
func (b *bucket) local(l *Limiter, p Policy, now time.Time) (Decision, bool) {
	switch {
	case b.tokens > 0 && now.Before(b.leaseEnd):
		b.tokens--
		return l.sharedDecision(p, now, b.tat, true, b.tokens), true
	case now.Before(b.blockedUntil):
		return l.sharedDecision(p, now, b.tat, false, 0), true
	}
	return Decision{}, false
}

// maxBatch is the most tokens one take asks for under p: a quarter of a
// second's tokens, and never more than a quarter of the burst.
func maxBatch(p Policy) int {
	return max(1, min(int(p.PerSecond*leaseShare), p.Burst/4))
}

// Leaser is a Shared that takes a batch of tokens in one write.
type Leaser interface {
	TakeUpTo(ctx context.Context, key string, now time.Time, interval, tolerance time.Duration, want int) (taken int, tat time.Time, err error)
}

// take takes up to want tokens from the shared bucket: it answers how
// many it took (0 when none is there) and the bucket's theoretical
// arrival time after it.
func (l *Limiter) take(key string, now time.Time, interval, tolerance time.Duration, want int) (int, time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if lease, ok := l.Shared.(Leaser); ok {
		return lease.TakeUpTo(ctx, key, now, interval, tolerance, want)
	}
	ok, tat, err := l.Shared.Take(ctx, key, now, interval, tolerance)
	if err != nil || !ok {
		return 0, tat, err
	}
	return 1, tat, nil
}

// sharedDecision is the answer for a shared bucket that runs to tat, with
// left tokens of this replica's lease unspent.
func (l *Limiter) sharedDecision(p Policy, now, tat time.Time, allowed bool, left int) Decision {
	interval, tolerance := p.gcra()
	ahead := max(tat.Sub(now), 0)
	d := Decision{Allowed: allowed, Limit: p.Burst, Policy: p, Reset: ahead}
	d.Remaining = min(max(0, int((tolerance-ahead)/interval)+1)+left, p.Burst)
	if !allowed {
		d.Remaining = 0
		d.RetryAfter = max(ahead-tolerance, time.Millisecond)
	}
	return d
}

func (l *Limiter) gc(now time.Time) {
	l.lastGC = now
	for k, b := range l.buckets {
		if now.Sub(b.seen) > 10*time.Minute {
			delete(l.buckets, k)
		}
	}
}
