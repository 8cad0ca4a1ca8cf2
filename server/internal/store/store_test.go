package store_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/server/internal/store"
)

func TestMain(m *testing.M) { os.Exit(testpg.Run(m)) }

// suite runs one behaviour test against SQLite and a real PostgreSQL.
func suite(t *testing.T, f func(t *testing.T, open func() *store.Store)) {
	run := func(t *testing.T, dir, url string) {
		f(t, func() *store.Store {
			st, err := store.Open(context.Background(), dir, url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		})
	}
	t.Run("sqlite", func(t *testing.T) { run(t, t.TempDir(), "") })
	t.Run("postgres", func(t *testing.T) { run(t, "", testpg.NewDatabase(t)) })
}

func TestMigrationsAreIdempotent(t *testing.T) {
	suite(t, func(t *testing.T, open func() *store.Store) {
		a := open()
		b := open() // a second process opening the same database
		if a.Engine() != b.Engine() {
			t.Fatal("engines differ")
		}
		var n, distinct int
		if err := b.DB().QueryRow(`SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations`).Scan(&n, &distinct); err != nil || n == 0 || n != distinct {
			t.Fatalf("migrations recorded %d (%d distinct), %v", n, distinct, err)
		}
	})
}

func TestRejectsUnknownDatabaseURL(t *testing.T) {
	if _, err := store.Open(context.Background(), t.TempDir(), "mysql://x"); err == nil {
		t.Fatal("mysql URL accepted")
	}
}

func TestAPIKeys(t *testing.T) {
	suite(t, func(t *testing.T, open func() *store.Store) {
		st := open()
		ctx := context.Background()
		now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
		if _, err := st.Accounts().FirstOrganization(ctx); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("empty store: %v", err)
		}
		o, err := st.Accounts().CreateOrganization(ctx, "org_a", "A", now)
		if err != nil {
			t.Fatal(err)
		}
		k := store.APIKey{ID: "key_a", OrgID: o.ID, Name: "ci", Scopes: []string{"read", "quote"}, CreatedAt: now}
		if err := st.Keys().Create(ctx, k, "hash-a"); err != nil {
			t.Fatal(err)
		}
		if err := st.Keys().Create(ctx, store.APIKey{ID: "key_b", OrgID: o.ID, CreatedAt: now}, "hash-a"); err == nil {
			t.Fatal("duplicate hash accepted")
		}
		got, err := st.Keys().ByHash(ctx, "hash-a")
		if err != nil || got.ID != "key_a" || !got.HasScope("quote") || got.HasScope("buy_domain") || !got.CreatedAt.Equal(now) {
			t.Fatalf("lookup: %+v %v", got, err)
		}
		if _, err := st.Keys().ByHash(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unknown hash: %v", err)
		}
		if err := st.Keys().Revoke(ctx, "org_other", "key_a", now); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("another org revoked the key: %v", err)
		}
		if err := st.Keys().Revoke(ctx, o.ID, "key_a", now); err != nil {
			t.Fatal(err)
		}
		if got, _ := st.Keys().ByHash(ctx, "hash-a"); got.RevokedAt == nil {
			t.Fatal("not revoked")
		}
	})
}

func TestIdempotencyStore(t *testing.T) {
	suite(t, func(t *testing.T, open func() *store.Store) {
		st := open()
		ctx := context.Background()
		now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
		const lease, ttl = time.Minute, 24 * time.Hour
		c := store.IdempotencyClaim{Principal: "key:a", Key: "k", Operation: "create_quote", RequestHash: "h1"}

		if o, _, err := st.Idempotency().Begin(ctx, c, now, lease, ttl); err != nil || o != store.IdempotencyAcquired {
			t.Fatalf("acquire: %v %v", o, err)
		}
		if o, _, _ := st.Idempotency().Begin(ctx, c, now, lease, ttl); o != store.IdempotencyInFlight {
			t.Fatalf("in flight: %v", o)
		}
		other := c
		other.RequestHash = "h2"
		if o, _, _ := st.Idempotency().Begin(ctx, other, now, lease, ttl); o != store.IdempotencyMismatch {
			t.Fatalf("mismatch: %v", o)
		}
		otherCaller := c
		otherCaller.Principal = "key:b"
		if o, _, _ := st.Idempotency().Begin(ctx, otherCaller, now, lease, ttl); o != store.IdempotencyAcquired {
			t.Fatalf("keys are per caller: %v", o)
		}
		if err := st.Idempotency().Complete(ctx, c, store.StoredResponse{Status: 201, ContentType: "application/json", Body: []byte(`{"x":1}`)}); err != nil {
			t.Fatal(err)
		}
		o, r, _ := st.Idempotency().Begin(ctx, c, now.Add(time.Hour), lease, ttl)
		if o != store.IdempotencyReplay || r.Status != 201 || string(r.Body) != `{"x":1}` || r.ContentType != "application/json" {
			t.Fatalf("replay: %v %+v", o, r)
		}
		// Abandoning releases the key for another attempt.
		if err := st.Idempotency().Abandon(ctx, otherCaller); err != nil {
			t.Fatal(err)
		}
		if o, _, _ := st.Idempotency().Begin(ctx, otherCaller, now, lease, ttl); o != store.IdempotencyAcquired {
			t.Fatalf("after abandon: %v", o)
		}
		// Expired records count as absent and are purged.
		if o, _, _ := st.Idempotency().Begin(ctx, other, now.Add(ttl+time.Second), lease, ttl); o != store.IdempotencyAcquired {
			t.Fatalf("after expiry: %v", o)
		}
		if n, err := st.Idempotency().Purge(ctx, now.Add(3*ttl)); err != nil || n != 2 {
			t.Fatalf("purge %d %v", n, err)
		}
	})
}
