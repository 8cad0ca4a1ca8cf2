package ratelimit_test

import (
	"context"
	"os"
	"strconv"
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
