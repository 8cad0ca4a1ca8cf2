package store_test

import (
	"testing"
	"time"
)

// The buckets of TestRateLimits: three at once, then one a second.
const interval, burst = time.Second, 2 * time.Second

func TestRateLimits(t *testing.T) { runCases(t, rateLimitCases) }

// rateLimitCases are TestRateLimits's cases, each run on every engine.
var rateLimitCases = []storeCase{
	{"a bucket allows its burst, then its rate", func(t *testing.T, w world) {
		rl := w.st.RateLimits()
		for i := range 3 {
			ok, tat, err := rl.Take(ctx, "k", t0, interval, burst)
			if err != nil || !ok || !tat.Equal(t0.Add(time.Duration(i+1)*interval)) {
				t.Fatalf("take %d: %v %v %v", i, ok, tat, err)
			}
		}
		ok, tat, err := rl.Take(ctx, "k", t0, interval, burst)
		if err != nil || ok || !tat.Equal(t0.Add(3*interval)) {
			t.Fatalf("over the burst: %v %v %v", ok, tat, err)
		}
		if ok, _, _ := rl.Take(ctx, "other", t0, interval, burst); !ok {
			t.Fatal("buckets are per key")
		}
		if ok, _, _ := rl.Take(ctx, "k", t0.Add(interval), interval, burst); !ok {
			t.Fatal("a second later, one more")
		}
		// Long idle: the bucket starts again from now.
		later := t0.Add(time.Hour)
		if ok, tat, _ := rl.Take(ctx, "k", later, interval, burst); !ok || !tat.Equal(later.Add(interval)) {
			t.Fatalf("after idling: %v %v", ok, tat)
		}
		must(t, rl.Purge(ctx, later.Add(time.Hour)))
		// "k" was purged (full for an hour) and "other" too: both start afresh.
		if ok, tat, _ := rl.Take(ctx, "other", t0, interval, burst); !ok || !tat.Equal(t0.Add(interval)) {
			t.Fatalf("purged bucket: %v %v", ok, tat)
		}
	}},
	{"concurrent takes share one bucket", func(t *testing.T, w world) {
		var allowed [12]bool
		race(t, len(allowed), func(i int) error {
			ok, _, err := w.st.RateLimits().Take(ctx, "k", t0, interval, burst)
			allowed[i] = ok
			return err
		})
		n := 0
		for _, ok := range allowed {
			if ok {
				n++
			}
		}
		if n != 3 {
			t.Fatalf("%d of 12 allowed, want the burst of 3", n)
		}
	}},
	{"a batch takes what the bucket has, in one write", func(t *testing.T, w world) {
		rl := w.st.RateLimits()
		steps := []struct {
			at         time.Duration
			want, took int
			tat        time.Duration
		}{
			{0, 2, 2, 2 * time.Second},                       // a new bucket is full: 3
			{0, 5, 1, 3 * time.Second},                       // one left
			{0, 1, 0, 3 * time.Second},                       // none
			{2500 * time.Millisecond, 5, 2, 5 * time.Second}, // 2.5 s later: two more
		}
		for i, s := range steps {
			took, tat, err := rl.TakeUpTo(ctx, "k", t0.Add(s.at), interval, burst, s.want)
			if err != nil || took != s.took || !tat.Equal(t0.Add(s.tat)) {
				t.Fatalf("step %d: took %d, tat %v, %v; want %d, %v", i, took, tat.Sub(t0), err, s.took, s.tat)
			}
		}
		if ok, _, _ := rl.Take(ctx, "k", t0.Add(2500*time.Millisecond), interval, burst); ok {
			t.Fatal("Take allowed from a bucket TakeUpTo emptied")
		}
		if _, _, err := rl.TakeUpTo(ctx, "k", t0, 0, burst, 1); err == nil {
			t.Fatal("a zero interval was accepted")
		}
	}},
	{"concurrent batches never take more than the bucket has", func(t *testing.T, w world) {
		var took [8]int
		race(t, len(took), func(i int) error {
			n, _, err := w.st.RateLimits().TakeUpTo(ctx, "k", t0, interval, burst, 2)
			took[i] = n
			return err
		})
		total := 0
		for _, n := range took {
			total += n
		}
		if total != 3 {
			t.Fatalf("batches took %d tokens of a bucket of 3", total)
		}
	}},
}
