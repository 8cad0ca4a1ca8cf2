package ratelimit

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func TestBucket(t *testing.T) {
	now := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	l := New(map[string]Policy{"search": {PerSecond: 1, Burst: 2}}, func() time.Time { return now })
	for i := 0; i < 2; i++ {
		if d, _ := l.Allow("search", "a"); !d.Allowed {
			t.Fatalf("request %d refused", i)
		}
	}
	if l.Would("search", "a") {
		t.Fatal("Would allows a caller with no token left")
	}
	d, limited := l.Allow("search", "a")
	if !limited || d.Allowed || d.RetryAfter != time.Second || d.Remaining != 0 {
		t.Fatalf("third: %+v", d)
	}
	if !l.Would("search", "new") || !l.Would("other", "a") {
		t.Fatal("Would refuses a new caller or a class without a policy")
	}
	if d, _ := l.Allow("search", "b"); !d.Allowed {
		t.Fatal("buckets are per caller")
	}
	if _, limited := l.Allow("other", "a"); limited {
		t.Fatal("a class without a policy is not limited")
	}
	now = now.Add(time.Second)
	for range 2 { // Would takes no token
		if !l.Would("search", "a") {
			t.Fatal("Would does not see the refill, or takes a token")
		}
	}
	if d, _ := l.Allow("search", "a"); !d.Allowed {
		t.Fatal("no refill")
	}
	limit, policy := d.Headers()
	if limit == "" || policy != "2;w=2" {
		t.Fatalf("headers %q %q", limit, policy)
	}
	// Idle buckets are dropped.
	now = now.Add(time.Hour)
	l.Allow("search", "c")
	if len(l.buckets) != 1 {
		t.Fatalf("%d buckets kept", len(l.buckets))
	}
}

// The header values are what they always were, written without fmt.
func TestHeadersText(t *testing.T) {
	for _, d := range []Decision{
		{Limit: 60, Remaining: 59, Reset: 50 * time.Millisecond, Policy: Policy{PerSecond: 20, Burst: 60}},
		{Limit: 3, Remaining: 0, Reset: 6 * time.Second, Policy: Policy{PerSecond: 0.5, Burst: 3}},
		{Limit: 1 << 30, Remaining: 1<<30 - 1, Policy: Policy{PerSecond: 1e9, Burst: 1 << 30}},
	} {
		limit, policy := d.Headers()
		wantLimit := fmt.Sprintf("limit=%d, remaining=%d, reset=%d", d.Limit, d.Remaining, int(math.Ceil(d.Reset.Seconds())))
		wantPolicy := fmt.Sprintf("%d;w=%d", d.Policy.Burst, int(math.Ceil(float64(d.Policy.Burst)/d.Policy.PerSecond)))
		if limit != wantLimit || policy != wantPolicy {
			t.Errorf("%+v: %q %q, want %q %q", d, limit, policy, wantLimit, wantPolicy)
		}
	}
}
