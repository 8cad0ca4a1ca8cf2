package store_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

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

// Every SQLite connection checkpoints its log every 8,192 pages and
// still commits in WAL mode at synchronous NORMAL.
func TestSQLiteLogSettings(t *testing.T) {
	st, err := store.Open(context.Background(), t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	conn, err := st.DB().Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var pages, sync int
	var mode string
	for q, dst := range map[string]any{`PRAGMA wal_autocheckpoint`: &pages, `PRAGMA synchronous`: &sync, `PRAGMA journal_mode`: &mode} {
		if err := conn.QueryRowContext(context.Background(), q).Scan(dst); err != nil {
			t.Fatal(q, err)
		}
	}
	if pages != 8192 || sync != 1 || mode != "wal" {
		t.Fatalf("wal_autocheckpoint %d, synchronous %d, journal_mode %q; want 8192, 1 (NORMAL), wal", pages, sync, mode)
	}
}

func TestOpenRefuses(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(file, nil, 0o600))
	for _, c := range []struct{ name, dir, url string }{
		{"an unknown engine", t.TempDir(), "mysql://x"},
		{"a data directory that is a file", file, ""},
		{"a PostgreSQL that does not answer", "", "postgres://nobody@/none?host=" + t.TempDir() + "&connect_timeout=1"},
	} {
		if st, err := store.Open(context.Background(), c.dir, c.url); err == nil {
			st.Close()
			t.Errorf("%s: opened", c.name)
		}
	}
}

func TestFilter(t *testing.T) {
	for _, c := range []struct {
		f    store.Filter
		args map[string]any
		size int
	}{
		{store.Filter{}, map[string]any{}, 100},
		{store.Filter{ProjectID: "p", State: "live", Limit: 5}, map[string]any{"projectId": "p", "state": "live", "limit": 5}, 5},
		{store.Filter{Limit: 501}, map[string]any{"limit": 501}, 100},
	} {
		if got := c.f.Args(); !maps.Equal(got, c.args) {
			t.Errorf("%+v: args %v, want %v", c.f, got, c.args)
		}
		if got := c.f.PageSize(); got != c.size {
			t.Errorf("%+v: page size %d, want %d", c.f, got, c.size)
		}
	}
}

// TestTransactions: a noun reached from a Tx is part of the transaction;
// the few operations that keep a transaction of their own refuse to run
// inside a caller's; and a write that commits is seen by another
// connection to the same database.
func TestTransactions(t *testing.T) { runCases(t, transactionsCases) }

// transactionsCases are TestTransactions's cases, each run on every engine.
var transactionsCases = []storeCase{
	{"one commit or none", func(t *testing.T, w world) {
		boom := errors.New("boom")
		err := w.st.InTx(ctx, func(tx *store.Tx) error {
			must(t, tx.Keys().Create(ctx, store.APIKey{ID: "key_1", OrgID: w.org, CreatedAt: t0}, "h1"))
			must(t, tx.Gates().Insert(ctx, store.Gate{ID: "gate_1", OrgID: w.org, TaskID: "t", Kind: "k", Payload: "{}", CreatedAt: t0}))
			return boom
		})
		wantErr(t, "rolled back", err, boom)
		_, err = w.st.Keys().ByHash(ctx, "h1")
		wantErr(t, "the key of a rolled-back transaction", err, store.ErrNotFound)
		_, err = w.st.Gates().Get(ctx, w.org, "gate_1")
		wantErr(t, "the gate of a rolled-back transaction", err, store.ErrNotFound)
		must(t, w.st.InTx(ctx, func(tx *store.Tx) error {
			return tx.Keys().Create(ctx, store.APIKey{ID: "key_1", OrgID: w.org, CreatedAt: t0}, "h1")
		}))
		other := w.open()
		if k, err := other.Keys().ByHash(ctx, "h1"); err != nil || k.ID != "key_1" {
			t.Fatalf("another connection reads %+v, %v", k, err)
		}
	}},
	{"operations with their own transaction refuse a caller's", func(t *testing.T, w world) {
		for name, f := range map[string]func(tx *store.Tx) error{
			"idempotency": func(tx *store.Tx) error {
				_, _, err := tx.Idempotency().Begin(ctx, store.IdempotencyClaim{}, t0, time.Minute, time.Hour)
				return err
			},
			"release publish": func(tx *store.Tx) error {
				_, err := tx.SandboxReleases().Publish(ctx, "r", nil, false, t0)
				return err
			},
			"release delete": func(tx *store.Tx) error { return tx.SandboxReleases().Delete(ctx, "r") },
		} {
			if err := w.st.InTx(ctx, f); err == nil {
				t.Errorf("%s ran inside another transaction", name)
			}
		}
	}},
	{"a transaction that cannot begin", func(t *testing.T, w world) {
		done, cancel := context.WithCancel(ctx)
		cancel()
		ran := false
		if err := w.st.InTx(done, func(*store.Tx) error { ran = true; return nil }); err == nil || ran {
			t.Fatalf("ran %v in a canceled context: %v", ran, err)
		}
	}},
}
