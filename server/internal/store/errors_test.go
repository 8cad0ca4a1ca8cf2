package store

import (
	"context"
	"strings"
	"testing"

	"github.com/pierhq/pier/internal/testkit/testpg"
)

// TestConstraintViolationsByCode makes each engine raise a unique and a
// check violation and tells them apart by code.
func TestConstraintViolationsByCode(t *testing.T) {
	run := func(t *testing.T, dir, url string) {
		ctx := context.Background()
		st, err := Open(ctx, dir, url)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		db := st.DB()
		if _, err := db.ExecContext(ctx, `CREATE TABLE violation_probe (k TEXT PRIMARY KEY, u TEXT UNIQUE, n INTEGER CHECK (n >= 0))`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, st.q(`INSERT INTO violation_probe (k, u, n) VALUES (?, ?, ?)`), "a", "x", 1); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name          string
			args          []any
			unique, check bool
		}{
			{"primary key", []any{"a", "y", 1}, true, false},
			{"unique column", []any{"b", "x", 1}, true, false},
			{"check", []any{"c", "z", -1}, false, true},
		} {
			_, err := db.ExecContext(ctx, st.q(`INSERT INTO violation_probe (k, u, n) VALUES (?, ?, ?)`), c.args...)
			if err == nil {
				t.Fatalf("%s: no error", c.name)
			}
			if isUniqueViolation(err) != c.unique || isCheckViolation(err) != c.check {
				t.Errorf("%s: unique %v check %v for %v", c.name, isUniqueViolation(err), isCheckViolation(err), err)
			}
		}
		if isUniqueViolation(nil) || isCheckViolation(context.Canceled) {
			t.Error("a nil or unrelated error counted as a violation")
		}
	}
	t.Run("sqlite", func(t *testing.T) { run(t, t.TempDir(), "") })
	t.Run("postgres", func(t *testing.T) { run(t, "", testpg.NewDatabase(t)) })
}

func TestPlaceholdersRewrittenOncePerQuery(t *testing.T) {
	if got := dollarPlaceholders(`SELECT a FROM t WHERE b = ? AND c IN (?, ?)`); got != `SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)` {
		t.Fatalf("rewrite: %s", got)
	}
	pg := &Store{engine: Postgres}
	const query = `UPDATE t SET a = ? WHERE b = ?`
	first := pg.q(query)
	for range 10 {
		if pg.q(query) != first {
			t.Fatal("the same query rewrote differently")
		}
	}
	if n := pg.rewriteCount.Load(); n != 1 {
		t.Errorf("%d rewrites kept for one query, want 1", n)
	}
	for i := range maxRewrites + 10 {
		pg.q(query + strings.Repeat(" ", i+1))
	}
	if n := pg.rewriteCount.Load(); n != maxRewrites {
		t.Errorf("kept %d rewrites, want the cap %d", n, maxRewrites)
	}
	sq := &Store{engine: SQLite}
	if sq.q(query) != query {
		t.Error("SQLite's query was rewritten")
	}
}
