package ratelimit_test

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/server/internal/ratelimit"
	"github.com/pierhq/pier/server/internal/store"
)

// BenchmarkRateLimitDecision is the cost of one rate-limit decision: the
// in-memory token bucket one replica keeps, against the GCRA row replicas
// share in PostgreSQL (one atomic statement). Read ns/op; the difference
// is what sharing costs each limited request.
func BenchmarkRateLimitDecision(b *testing.B) {
	policy := map[string]ratelimit.Policy{"search": {PerSecond: 1e9, Burst: 1 << 30}}
	b.Run("local", func(b *testing.B) {
		l := ratelimit.New(policy, time.Now)
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				i++
				l.Allow("search", "ip:"+strconv.Itoa(i%64))
			}
		})
	})
	b.Run("shared-postgres", func(b *testing.B) {
		st, err := store.Open(context.Background(), "", testpg.NewDatabase(b))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		l := ratelimit.New(policy, time.Now)
		l.Shared = st.RateLimits()
		b.SetParallelism(8)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				i++
				if d, _ := l.Allow("search", "ip:"+strconv.Itoa(i%64)); !d.Allowed {
					b.Error("refused")
					return
				}
			}
		})
	})
}

func TestMain(m *testing.M) { os.Exit(testpg.Run(m)) }

// BenchmarkSharedLimits is rate-limited throughput across three replicas
// on one PostgreSQL: 64 callers, each sending far over its limit (100 a
// second, a burst of 200), through three limiters as three replicas hold.
//
//   - row-per-request: every request one GCRA statement, the design
//     before leases;
//   - leased: the limiter's leases (a batch of tokens per write, none for
//     a caller it knows is refused).
//
// Read ns/op as the inverse of the requests decided a second across the
// three. Run on a durable cluster for figures that mean anything:
//
//	PIER_TEST_PG_DURABLE=1 go test ./server/internal/ratelimit -run XXX -bench SharedLimits -benchtime 5s
func BenchmarkSharedLimits(b *testing.B) {
	policy := ratelimit.Policy{PerSecond: 100, Burst: 200}
	st, err := store.Open(context.Background(), "", testpg.NewDatabase(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	interval := time.Second / time.Duration(policy.PerSecond)
	tolerance := interval * time.Duration(policy.Burst-1)
	b.Run("row-per-request", func(b *testing.B) {
		rl := st.RateLimits()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				i++
				if _, _, err := rl.Take(context.Background(), "search rpr:"+strconv.Itoa(i%64), time.Now(), interval, tolerance); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("leased", func(b *testing.B) {
		var replicas [3]*ratelimit.Limiter
		for i := range replicas {
			replicas[i] = ratelimit.New(map[string]ratelimit.Policy{"search": policy}, time.Now)
			replicas[i].Shared = st.RateLimits()
		}
		var n atomic.Int64
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			r := replicas[n.Add(1)%3]
			i := 0
			for pb.Next() {
				i++
				r.Allow("search", "leased:"+strconv.Itoa(i%64))
			}
		})
	})
}
