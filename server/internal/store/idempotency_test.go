package store_test

import (
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

const lease, ttl = time.Minute, 24 * time.Hour

// claim is the idempotency claim the cases make and repeat.
var claim = store.IdempotencyClaim{Principal: "key:a", Key: "k", Operation: "create_quote", RequestHash: "h1"}

func TestIdempotency(t *testing.T) { runCases(t, idempotencyCases) }

// idempotencyCases are TestIdempotency's cases, each run on every engine.
var idempotencyCases = []storeCase{
	{"acquire, in flight, mismatch, replay", func(t *testing.T, w world) {
		idem := w.st.Idempotency()
		c := claim
		if o, _, err := idem.Begin(ctx, c, t0, lease, ttl); err != nil || o != store.IdempotencyAcquired {
			t.Fatalf("acquire: %v %v", o, err)
		}
		if o, _, _ := idem.Begin(ctx, c, t0, lease, ttl); o != store.IdempotencyInFlight {
			t.Fatalf("in flight: %v", o)
		}
		other := c
		other.RequestHash = "h2"
		if o, _, _ := idem.Begin(ctx, other, t0, lease, ttl); o != store.IdempotencyMismatch {
			t.Fatalf("another body: %v", o)
		}
		otherOp := c
		otherOp.Operation = "launch"
		if o, _, _ := idem.Begin(ctx, otherOp, t0, lease, ttl); o != store.IdempotencyMismatch {
			t.Fatalf("another operation: %v", o)
		}
		otherCaller := c
		otherCaller.Principal = "key:b"
		if o, _, _ := idem.Begin(ctx, otherCaller, t0, lease, ttl); o != store.IdempotencyAcquired {
			t.Fatalf("keys are per caller: %v", o)
		}
		// Completing with another body's hash stores nothing.
		must(t, idem.Complete(ctx, other, store.StoredResponse{Status: 500}))
		must(t, idem.Complete(ctx, c, store.StoredResponse{Status: 201, ContentType: "application/json", Body: []byte(`{"x":1}`)}))
		o, r, err := idem.Begin(ctx, c, t0.Add(time.Hour), lease, ttl)
		if err != nil || o != store.IdempotencyReplay || r.Status != 201 || string(r.Body) != `{"x":1}` || r.ContentType != "application/json" {
			t.Fatalf("replay: %v %+v %v", o, r, err)
		}
		// A completed record is not abandoned.
		must(t, idem.Abandon(ctx, c))
		if o, _, _ := idem.Begin(ctx, c, t0.Add(time.Hour), lease, ttl); o != store.IdempotencyReplay {
			t.Fatalf("abandon dropped a stored answer: %v", o)
		}
		// Abandoning releases an in-flight key for another attempt.
		must(t, idem.Abandon(ctx, otherCaller))
		if o, _, _ := idem.Begin(ctx, otherCaller, t0, lease, ttl); o != store.IdempotencyAcquired {
			t.Fatalf("after abandon: %v", o)
		}
	}},
	{"leases and expiry", func(t *testing.T, w world) {
		idem := w.st.Idempotency()
		c := claim
		if o, _, _ := idem.Begin(ctx, c, t0, lease, ttl); o != store.IdempotencyAcquired {
			t.Fatalf("acquire: %v", o)
		}
		// Its server died: the lease runs out and another takes over.
		if o, _, _ := idem.Begin(ctx, c, t0.Add(lease), lease, ttl); o != store.IdempotencyAcquired {
			t.Fatalf("lapsed lease not taken over: %v", o)
		}
		if o, _, _ := idem.Begin(ctx, c, t0.Add(lease+time.Second), lease, ttl); o != store.IdempotencyInFlight {
			t.Fatalf("the new lease holds: %v", o)
		}
		must(t, idem.Complete(ctx, c, store.StoredResponse{Status: 200, Body: []byte("a")}))
		// An expired record counts as absent, whatever its body.
		other := c
		other.RequestHash = "h2"
		if o, _, _ := idem.Begin(ctx, other, t0.Add(lease+ttl), lease, ttl); o != store.IdempotencyAcquired {
			t.Fatalf("after expiry: %v", o)
		}
		c2 := c
		c2.Key = "k2"
		idem.Begin(ctx, c2, t0, lease, ttl)
		if n, err := idem.Purge(ctx, t0.Add(ttl)); err != nil || n != 1 {
			t.Fatalf("purged %d, %v", n, err)
		}
		if n, err := idem.Purge(ctx, t0.Add(3*ttl)); err != nil || n != 1 {
			t.Fatalf("purged %d, %v", n, err)
		}
	}},
	{"concurrent requests: one executes", func(t *testing.T, w world) {
		var outcomes [10]store.IdempotencyOutcome
		race(t, len(outcomes), func(i int) error {
			o, _, err := w.st.Idempotency().Begin(ctx, claim, t0, lease, ttl)
			outcomes[i] = o
			return err
		})
		acquired := 0
		for _, o := range outcomes {
			switch o {
			case store.IdempotencyAcquired:
				acquired++
			case store.IdempotencyInFlight:
			default:
				t.Fatalf("outcome %v", o)
			}
		}
		if acquired != 1 {
			t.Fatalf("%d requests executed under one key", acquired)
		}
	}},
	{"concurrent takeovers of a lapsed lease: one executes", func(t *testing.T, w world) {
		w.st.Idempotency().Begin(ctx, claim, t0, lease, ttl)
		var outcomes [10]store.IdempotencyOutcome
		race(t, len(outcomes), func(i int) error {
			o, _, err := w.st.Idempotency().Begin(ctx, claim, t0.Add(2*lease), lease, ttl)
			outcomes[i] = o
			return err
		})
		acquired := 0
		for _, o := range outcomes {
			if o == store.IdempotencyAcquired {
				acquired++
			}
		}
		if acquired != 1 {
			t.Fatalf("%d requests took the lapsed key over", acquired)
		}
	}},
	{"concurrent replays", func(t *testing.T, w world) {
		w.st.Idempotency().Begin(ctx, claim, t0, lease, ttl)
		must(t, w.st.Idempotency().Complete(ctx, claim, store.StoredResponse{Status: 201, Body: []byte("x")}))
		race(t, 10, func(i int) error {
			o, r, err := w.st.Idempotency().Begin(ctx, claim, t0.Add(time.Second), lease, ttl)
			if err == nil && (o != store.IdempotencyReplay || string(r.Body) != "x") {
				t.Errorf("replay %v %+v", o, r)
			}
			return err
		})
	}},
}
