package store

import (
	"context"
	"testing"

	"github.com/pierhq/pier/internal/testpg"
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
