package ratelimit_test

import (
	"context"

	"sync/atomic"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/server/internal/ratelimit"
	"github.com/pierhq/pier/server/internal/store"
)

// countedTakes counts the shared bucket's writes.
type countedTakes struct {
	store.RateLimits
	n atomic.Int64
}

func (c *countedTakes) TakeUpTo(ctx context.Context, key string, now time.Time, interval, tolerance time.Duration, want int) (int, time.Time, error) {
	c.n.Add(1)
	return c.RateLimits.TakeUpTo(ctx, key, now, interval, tolerance, want)
}

func (c *countedTakes) Take(ctx context.Context, key string, now time.Time, interval, tolerance time.Duration) (bool, time.Time, error) {
	c.n.Add(1)
	return c.RateLimits.Take(ctx, key, now, interval, tolerance)
}

// TestLeasedLimitsHoldAcrossReplicas: three replicas on one database, a
// caller sending ten times its limit spread over them for ten seconds.
// Together they allow the limit within 10 % (never more than it), and
// the database is written far less than once a request.
func TestLeasedLimitsHoldAcrossReplicas(t *testing.T) {
	for _, engine := range []struct{ name, url string }{{"sqlite", ""}, {"postgres", "postgres"}} {
		t.Run(engine.name, func(t *testing.T) {
			url := engine.url
			if url != "" {
				url = testpg.NewDatabase(t)
			}
			st, err := store.Open(context.Background(), t.TempDir(), url)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			leasedAcross(t, st)
		})
	}
}

func leasedAcross(t *testing.T, st *store.Store) {
	const perSecond, burst, seconds, factor = 200, 400, 10, 10
	policy := map[string]ratelimit.Policy{"search": {PerSecond: perSecond, Burst: burst}}
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	shared := &countedTakes{RateLimits: st.RateLimits()}
	var replicas []*ratelimit.Limiter
	for range 3 {
		l := ratelimit.New(policy, clock)
		l.Shared = shared
		replicas = append(replicas, l)
	}
	requests := perSecond * factor * seconds
	step := time.Duration(seconds) * time.Second / time.Duration(requests)
	allowed := 0
	for i := range requests {
		if d, _ := replicas[i%3].Allow("search", "203.0.113.9"); d.Allowed {
			allowed++
		}
		now = now.Add(step)
	}
	limit := perSecond*seconds + burst
	t.Logf("%d requests: %d allowed of a limit of %d (%.1f %%), %d database writes", requests, allowed, limit, 100*float64(allowed)/float64(limit), shared.n.Load())
	if allowed > limit {
		t.Fatalf("allowed %d, over the limit of %d", allowed, limit)
	}
	if float64(allowed) < 0.9*float64(limit) {
		t.Fatalf("allowed %d, under 90 %% of the limit of %d", allowed, limit)
	}
	if w := shared.n.Load(); w > int64(requests/10) {
		t.Fatalf("%d writes for %d requests; leases should cut them tenfold", w, requests)
	}
}

// TestNoLeaseWritesEveryRequest: the row-per-request design (NoLease),
// kept for benchmarks, writes the shared bucket once a request and holds
// the limit.
func TestNoLeaseWritesEveryRequest(t *testing.T) {
	st, err := store.Open(context.Background(), t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const perSecond, burst, requests = 100, 100, 1000
	policy := map[string]ratelimit.Policy{"search": {PerSecond: perSecond, Burst: burst}}
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	shared := &countedTakes{RateLimits: st.RateLimits()}
	var replicas []*ratelimit.Limiter
	for range 3 {
		l := ratelimit.New(policy, func() time.Time { return now })
		l.Shared, l.NoLease = shared, true
		replicas = append(replicas, l)
	}
	allowed := 0
	for i := range requests {
		if d, _ := replicas[i%3].Allow("search", "203.0.113.9"); d.Allowed {
			allowed++
		}
		now = now.Add(time.Millisecond) // a second in all
	}
	if limit := perSecond + burst; allowed > limit || allowed < limit-2 {
		t.Errorf("allowed %d, want the limit %d", allowed, limit)
	}
	if w := shared.n.Load(); w != requests {
		t.Errorf("%d writes for %d requests, want one each", w, requests)
	}
}

// TestWouldFromTheLease: with shared buckets, Would answers true only
// while this replica holds an unspent token of the caller's lease, and
// never with NoLease.
func TestWouldFromTheLease(t *testing.T) {
	st, err := store.Open(context.Background(), t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	l := ratelimit.New(map[string]ratelimit.Policy{"search": {PerSecond: 100, Burst: 100}}, func() time.Time { return now })
	l.Shared = st.RateLimits()
	if l.Would("search", "a") {
		t.Fatal("Would allows a caller this replica holds no lease for")
	}
	l.Allow("search", "a") // a batch of one, spent
	l.Allow("search", "a") // a batch of two: one left
	if !l.Would("search", "a") {
		t.Fatal("Would refuses a caller with a token of its lease left")
	}
	now = now.Add(2 * time.Second)
	if l.Would("search", "a") {
		t.Fatal("Would allows from a lease that has ended")
	}
	l.Allow("search", "a")
	l.Allow("search", "a")
	l.NoLease = true
	if l.Would("search", "a") {
		t.Fatal("Would allows without leases")
	}
}

// TestRefusedWithoutAsking: Refused knows a refusal without taking a
// token or asking the database, locally and from a shared refusal.
func TestRefusedWithoutAsking(t *testing.T) {
	st, err := store.Open(context.Background(), t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	policy := map[string]ratelimit.Policy{"search": {PerSecond: 1, Burst: 2}}
	local := ratelimit.New(policy, func() time.Time { return now })
	shared := ratelimit.New(policy, func() time.Time { return now })
	shared.Shared = st.RateLimits()
	for _, l := range []*ratelimit.Limiter{local, shared} {
		if _, ok := l.Refused("search", "a"); ok {
			t.Fatal("Refused refuses a caller it has not seen")
		}
		var last ratelimit.Decision
		for range 3 {
			last, _ = l.Allow("search", "a")
		}
		d, ok := l.Refused("search", "a")
		if last.Allowed || !ok || d.Allowed || d.RetryAfter != last.RetryAfter || d.Remaining != 0 {
			t.Fatalf("after the burst: Allow %+v, Refused %+v %v", last, d, ok)
		}
		if _, ok := l.Refused("search", "b"); ok {
			t.Fatal("Refused refuses another caller")
		}
	}
	now = now.Add(2 * time.Second)
	for _, l := range []*ratelimit.Limiter{local, shared} {
		if _, ok := l.Refused("search", "a"); ok {
			t.Fatal("Refused refuses a caller whose bucket has refilled")
		}
	}
}

// TestSteadyCallerUnderAGenerousLimit: a caller sending steadily, far
// under its limit, is not brought back to leases of one each time a
// lease ends unspent: the next asks for what the last one spent.
func TestSteadyCallerUnderAGenerousLimit(t *testing.T) {
	st, err := store.Open(context.Background(), t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	l := ratelimit.New(map[string]ratelimit.Policy{"search": {PerSecond: 1e6, Burst: 1 << 20}}, func() time.Time { return now })
	shared := &countedTakes{RateLimits: st.RateLimits()}
	l.Shared = shared
	const requests = 2000 // 140 a second for about 14 s
	for range requests {
		if d, _ := l.Allow("search", "203.0.113.9"); !d.Allowed {
			t.Fatal("refused under a generous limit")
		}
		now = now.Add(time.Second / 140)
	}
	w := shared.n.Load()
	t.Logf("%d requests, %d database writes", requests, w)
	if w > requests/25 {
		t.Fatalf("%d writes for %d requests", w, requests)
	}
}
