package store_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

func TestKeys(t *testing.T) { runCases(t, keysCases) }

// keysCases are TestKeys's cases, each run on every engine.
var keysCases = []storeCase{
	{"by hash, revoke", func(t *testing.T, w world) {
		keys := w.st.Keys()
		k := store.APIKey{ID: "key_a", OrgID: w.org, Name: "ci", Scopes: []string{"read", "quote"}, CreatedAt: t0}
		must(t, keys.Create(ctx, k, "hash-a"))
		got, err := keys.ByHash(ctx, "hash-a")
		if err != nil || got.ID != "key_a" || !got.HasScope("quote") || got.HasScope("buy_domain") || !got.CreatedAt.Equal(t0) || got.RevokedAt != nil {
			t.Fatalf("lookup: %+v %v", got, err)
		}
		_, err = keys.ByHash(ctx, "nope")
		wantErr(t, "unknown hash", err, store.ErrNotFound)
		wantErr(t, "another organisation revokes", keys.Revoke(ctx, "org_other", "key_a", t0), store.ErrNotFound)
		must(t, keys.Revoke(ctx, w.org, "key_a", t0.Add(time.Minute)))
		wantErr(t, "revoked twice", keys.Revoke(ctx, w.org, "key_a", t0), store.ErrNotFound)
		// The lookup still finds a revoked key; the caller refuses it.
		if got, _ := keys.ByHash(ctx, "hash-a"); got.RevokedAt == nil || !got.RevokedAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("not revoked: %+v", got)
		}
	}},
	{"a hash names one key", func(t *testing.T, w world) {
		keys := w.st.Keys()
		must(t, keys.Create(ctx, store.APIKey{ID: "key_a", OrgID: w.org, CreatedAt: t0}, "hash-a"))
		if err := keys.Create(ctx, store.APIKey{ID: "key_b", OrgID: w.org, CreatedAt: t0}, "hash-a"); err == nil {
			t.Fatal("duplicate hash accepted")
		}
		if err := keys.Create(ctx, store.APIKey{ID: "key_a", OrgID: w.org, CreatedAt: t0}, "hash-b"); err == nil {
			t.Fatal("duplicate id accepted")
		}
		if err := keys.Create(ctx, store.APIKey{ID: "key_c", OrgID: "org_none", CreatedAt: t0}, "hash-c"); err == nil {
			t.Fatal("a key of no organisation was stored")
		}
	}},
	{"list, newest first, revoked too", func(t *testing.T, w world) {
		keys := w.st.Keys()
		for i, id := range []string{"key_1", "key_2", "key_3"} {
			must(t, keys.Create(ctx, store.APIKey{ID: id, OrgID: w.org, Scopes: []string{"read"}, CreatedAt: t0.Add(time.Duration(i) * time.Second)}, "hash-"+id))
		}
		must(t, w.other(t, "org_b").st.Keys().Create(ctx, store.APIKey{ID: "key_b", OrgID: "org_b", CreatedAt: t0}, "hash-b"))
		must(t, keys.Revoke(ctx, w.org, "key_2", t0))
		got, err := keys.List(ctx, w.org)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, k := range got {
			ids = append(ids, k.ID)
		}
		if !slices.Equal(ids, []string{"key_3", "key_2", "key_1"}) || got[1].RevokedAt == nil || got[0].RevokedAt != nil || !got[2].HasScope("read") {
			t.Fatalf("list %v: %+v", ids, got)
		}
		if none, err := keys.List(ctx, "org_none"); err != nil || len(none) != 0 {
			t.Fatalf("unknown organisation lists %v, %v", none, err)
		}
	}},
	{"lock and set scopes", func(t *testing.T, w world) {
		must(t, w.st.Keys().Create(ctx, store.APIKey{ID: "key_a", OrgID: w.org, Scopes: []string{"read"}, CreatedAt: t0}, "hash-a"))
		err := w.st.InTx(ctx, func(tx *store.Tx) error {
			k, err := tx.Keys().Lock(ctx, w.org, "key_a")
			if err != nil || k.ID != "key_a" {
				t.Errorf("lock %+v, %v", k, err)
			}
			if _, err := tx.Keys().Lock(ctx, "org_other", "key_a"); err != store.ErrNotFound {
				t.Errorf("another organisation locked the key: %v", err)
			}
			return tx.Keys().SetScopes(ctx, w.org, "key_a", []string{"read", "launch"})
		})
		must(t, err)
		if k, _ := w.st.Keys().ByHash(ctx, "hash-a"); !k.HasScope("launch") {
			t.Fatalf("scopes %v", k.Scopes)
		}
		wantErr(t, "another organisation's key", w.st.Keys().SetScopes(ctx, "org_other", "key_a", nil), store.ErrNotFound)
		must(t, w.st.Keys().Revoke(ctx, w.org, "key_a", t0))
		wantErr(t, "a revoked key", w.st.Keys().SetScopes(ctx, w.org, "key_a", nil), store.ErrNotFound)
		if k, _ := w.st.Keys().Lock(ctx, w.org, "key_a"); k.RevokedAt == nil {
			t.Fatal("lock outside a transaction does not read the key")
		}
	}},
}

func TestLiveKeys(t *testing.T) { runCases(t, liveKeysCases) }

// liveKeysCases hold Keys.Live, the lookup of every keyed request, to the
// database's truth: from memory on SQLite, and on PostgreSQL from the
// database while no listener hears the other replicas' changes.
var liveKeysCases = []storeCase{
	{"changes through the store are seen at once", func(t *testing.T, w world) {
		keys := w.st.Keys()
		must(t, keys.Create(ctx, store.APIKey{ID: "key_a", OrgID: w.org, Scopes: []string{"read"}, CreatedAt: t0}, "hash-a"))
		if k, err := keys.Live(ctx, "hash-a"); err != nil || k.ID != "key_a" || k.HasScope("quote") {
			t.Fatalf("live: %+v %v", k, err)
		}
		_, err := keys.Live(ctx, "hash-b")
		wantErr(t, "unknown hash", err, store.ErrNotFound)
		must(t, keys.Create(ctx, store.APIKey{ID: "key_b", OrgID: w.org, Scopes: []string{"read"}, CreatedAt: t0}, "hash-b"))
		if k, err := keys.Live(ctx, "hash-b"); err != nil || k.ID != "key_b" {
			t.Fatalf("a hash asked for before its key was made: %+v %v", k, err)
		}
		must(t, w.st.InTx(ctx, func(tx *store.Tx) error { return tx.Keys().SetScopes(ctx, w.org, "key_a", []string{"read", "quote"}) }))
		if k, _ := keys.Live(ctx, "hash-a"); !k.HasScope("quote") {
			t.Fatalf("scope granted, not seen: %+v", k)
		}
		// A change rolled back changes nothing.
		rollback := errors.New("rolled back")
		wantErr(t, "rollback", w.st.InTx(ctx, func(tx *store.Tx) error {
			must(t, tx.Keys().Revoke(ctx, w.org, "key_a", t0))
			return rollback
		}), rollback)
		if _, err := keys.Live(ctx, "hash-a"); err != nil {
			t.Fatalf("after a rolled-back revocation: %v", err)
		}
		must(t, w.st.InTx(ctx, func(tx *store.Tx) error { return tx.Keys().Revoke(ctx, w.org, "key_a", t0) }))
		_, err = keys.Live(ctx, "hash-a")
		wantErr(t, "revoked in a transaction", err, store.ErrNotFound)
		must(t, keys.Revoke(ctx, w.org, "key_b", t0))
		_, err = keys.Live(ctx, "hash-b")
		wantErr(t, "revoked", err, store.ErrNotFound)
	}},
	{"another replica's change", func(t *testing.T, w world) {
		keys := w.st.Keys()
		must(t, keys.Create(ctx, store.APIKey{ID: "key_a", OrgID: w.org, Scopes: []string{"read"}, CreatedAt: t0}, "hash-a"))
		if _, err := keys.Live(ctx, "hash-a"); err != nil {
			t.Fatal(err)
		}
		// Another server on the same database revokes the key.
		must(t, w.open().Keys().Revoke(ctx, w.org, "key_a", t0))
		_, err := keys.Live(ctx, "hash-a")
		if w.st.Engine() == store.Postgres {
			// No listener: every lookup reads the database.
			wantErr(t, "revoked elsewhere, no listener", err, store.ErrNotFound)
			return
		}
		if err != nil {
			t.Fatalf("SQLite has no other replicas and remembers: %v", err)
		}
		// The announcement (on PostgreSQL, through the listener) empties
		// the cache.
		w.st.ForgetKeys(store.KeysChanged + "elsewhere")
		_, err = keys.Live(ctx, "hash-a")
		wantErr(t, "after the announcement", err, store.ErrNotFound)
	}},
}
