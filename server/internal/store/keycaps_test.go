package store_test

import (
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

func TestKeyCaps(t *testing.T) { runCases(t, keyCapsCases) }

// keyCapsCases are TestKeyCaps's cases, each run on every engine.
var keyCapsCases = []storeCase{
	{"set, read back, remove", func(t *testing.T, w world) {
		keys := w.st.Keys()
		must(t, keys.Create(ctx, store.APIKey{ID: "key_a", OrgID: w.org, CreatedAt: t0}, "hash-a"))
		if k, _ := keys.ByHash(ctx, "hash-a"); k.CapMicro != nil || k.CapPeriod != "month" {
			t.Fatalf("a new key has no cap, by the month: %+v", k)
		}
		limit := money.MicroUSD(20_000_000)
		must(t, keys.SetCap(ctx, w.org, "key_a", &limit, "lifetime"))
		if k, _ := keys.Lock(ctx, w.org, "key_a"); k.CapMicro == nil || *k.CapMicro != limit || k.CapPeriod != "lifetime" {
			t.Fatalf("after set: %+v", k)
		}
		wantErr(t, "another organisation's key", keys.SetCap(ctx, "org_other", "key_a", nil, "month"), store.ErrNotFound)
		must(t, keys.SetCap(ctx, w.org, "key_a", nil, "month"))
		if k, _ := keys.Lock(ctx, w.org, "key_a"); k.CapMicro != nil {
			t.Fatalf("after removal: %+v", k)
		}
		must(t, keys.Revoke(ctx, w.org, "key_a", t0))
		wantErr(t, "a revoked key", keys.SetCap(ctx, w.org, "key_a", &limit, "month"), store.ErrNotFound)
		neg := money.MicroUSD(-1)
		if err := keys.SetCap(ctx, w.org, "missing", &neg, "month"); err == nil {
			t.Fatal("a cap on no key")
		}
	}},
	{"spent counts consumed and live holds since a time", func(t *testing.T, w world) {
		for _, q := range []struct {
			id, state string
			amount    money.MicroUSD
			at        time.Duration
		}{
			{"quo_old", "consumed", 1, -48 * time.Hour},
			{"quo_consumed", "consumed", 10, 0},
			{"quo_held", "held", 100, 0},
			{"quo_lapsed", "held", 1000, -time.Hour},
			{"quo_released", "released", 10000, 0},
		} {
			must(t, w.st.Quotes().Insert(ctx, store.Quote{ID: q.id, OrgID: w.org, ProjectID: w.proj, KeyID: "key_s", Decision: "ALLOW",
				State: q.state, AmountMicro: q.amount, Items: "[]", Reasons: "[]", CreatedAt: t0.Add(q.at), ExpiresAt: t0.Add(q.at + 15*time.Minute)}))
		}
		got, err := w.st.Keys().Spent(ctx, "key_s", t0.Add(-2*time.Hour), t0)
		if err != nil || got != 110 {
			t.Fatalf("spent %d %v, want 110", got, err)
		}
		if got, _ := w.st.Keys().Spent(ctx, "key_none", t0.Add(-time.Hour), t0); got != 0 {
			t.Fatalf("a key with no quotes spent %d", got)
		}
	}},
	{"the running count", func(t *testing.T, w world) {
		keys := w.st.Keys()
		must(t, keys.Create(ctx, store.APIKey{ID: "key_c", OrgID: w.org, CreatedAt: t0}, "hash-c"))
		quote := func(id, state string, amount money.MicroUSD, at time.Time) {
			must(t, w.st.Quotes().Insert(ctx, store.Quote{ID: id, OrgID: w.org, ProjectID: w.proj, KeyID: "key_c", Decision: "ALLOW",
				State: state, AmountMicro: amount, Items: "[]", Reasons: "[]", CreatedAt: at, ExpiresAt: at.Add(15 * time.Minute)}))
		}
		quote("quo_before", "consumed", 1, t0.Add(-48*time.Hour))
		quote("quo_held", "held", 10, t0)
		count := func() store.CapCount {
			_, c, err := keys.LockCount(ctx, w.org, "key_c")
			must(t, err)
			return c
		}
		// Uncapped, nothing counts; a cap just set has no count yet.
		must(t, keys.AddCapSpent(ctx, "key_c", 5, t0))
		limit := money.MicroUSD(1000)
		must(t, keys.SetCap(ctx, w.org, "key_c", &limit, "month"))
		if c := count(); c.Counted || c.Spent != 0 {
			t.Fatalf("a cap just set: %+v", c)
		}
		since := t0.Add(-time.Hour)
		if n, err := keys.Recount(ctx, "key_c", since, t0); err != nil || n != 10 {
			t.Fatalf("recount %d %v, want 10", n, err)
		}
		if c := count(); !c.Counted || !c.Since.Equal(since) || c.Spent != 10 {
			t.Fatalf("after the recount: %+v", c)
		}
		// A quote from before the count's start adds nothing; one after does.
		must(t, keys.AddCapSpent(ctx, "key_c", 100, since.Add(-time.Second)))
		must(t, keys.AddCapSpent(ctx, "key_c", 100, t0))
		if c := count(); c.Spent != 110 {
			t.Fatalf("after adding: %+v", c)
		}
		// A recount at a time the hold has lapsed leaves it out.
		if n, _ := keys.Recount(ctx, "key_c", since, t0.Add(time.Hour)); n != 0 {
			t.Fatalf("recount after the hold lapsed: %d", n)
		}
		must(t, keys.SetCap(ctx, w.org, "key_c", &limit, "lifetime"))
		if c := count(); c.Counted {
			t.Fatalf("a cap set again counts again: %+v", c)
		}
		if _, _, err := keys.LockCount(ctx, "org_other", "key_c"); err != store.ErrNotFound {
			t.Fatalf("another organisation's key: %v", err)
		}
	}},
}
