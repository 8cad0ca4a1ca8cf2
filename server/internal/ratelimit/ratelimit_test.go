package ratelimit

import (
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
	d, limited := l.Allow("search", "a")
	if !limited || d.Allowed || d.RetryAfter != time.Second || d.Remaining != 0 {
		t.Fatalf("third: %+v", d)
	}
	if d, _ := l.Allow("search", "b"); !d.Allowed {
		t.Fatal("buckets are per caller")
	}
	if _, limited := l.Allow("other", "a"); limited {
		t.Fatal("a class without a policy is not limited")
	}
	now = now.Add(time.Second)
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
