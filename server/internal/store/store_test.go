package store_test

import (
	"context"
	"testing"

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

func TestRejectsUnknownDatabaseURL(t *testing.T) {
	if _, err := store.Open(context.Background(), t.TempDir(), "mysql://x"); err == nil {
		t.Fatal("mysql URL accepted")
	}
}
