package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A connection's statements are kept by their text, and stay right when
// the same text runs again while rows of it are open (in a transaction,
// on the same connection), and their number is bounded.
func TestSQLiteStatementsPerConnection(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 3 {
		if _, err := st.Accounts().CreateOrganization(ctx, fmt.Sprintf("org_%d", i), "org", time.UnixMicro(int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	const list = `SELECT id FROM organizations WHERE created_at >= ? ORDER BY id`
	err = st.InTx(ctx, func(tx *Tx) error {
		outer, err := tx.tx.QueryContext(ctx, list, 0)
		if err != nil {
			return err
		}
		defer outer.Close()
		var seen []string
		for outer.Next() {
			var id string
			outer.Scan(&id)
			seen = append(seen, id)
			// The same text again, with rows of it open.
			var n int
			inner, err := tx.tx.QueryContext(ctx, list, 1)
			if err != nil {
				return err
			}
			for inner.Next() {
				n++
			}
			inner.Close()
			if n != 2 {
				return fmt.Errorf("inner query saw %d rows, want 2", n)
			}
		}
		if len(seen) != 3 {
			return fmt.Errorf("outer query saw %v", seen)
		}
		return outer.Err()
	})
	if err != nil {
		t.Fatal(err)
	}

	conn, err := st.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i := range maxStmtsPerConn + 100 {
		var n int
		if err := conn.QueryRowContext(ctx, fmt.Sprintf(`SELECT COUNT(*) + %d FROM organizations WHERE created_at >= ?`, i), 0).Scan(&n); err != nil || n != 3+i {
			t.Fatalf("query %d: %d %v", i, n, err)
		}
	}
	conn.Raw(func(dc any) error {
		if n := len(dc.(*stmtCachingConn).stmts); n > maxStmtsPerConn {
			t.Errorf("%d statements kept on one connection, at most %d", n, maxStmtsPerConn)
		}
		return nil
	})
}

// A transaction begins, commits and rolls back with the connection's own
// statements, and a COMMIT that fails leaves the connection out of the
// transaction, its writes gone, as the driver's own Commit does.
func TestSQLiteTransactionStatements(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	conn, err := st.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `CREATE TABLE parent (id TEXT PRIMARY KEY);
		CREATE TABLE child (parent_id TEXT REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	count := func() (n int) {
		if err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM child WHERE parent_id <> ?`, "").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	insert := func(parent string) error {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO child (parent_id) VALUES (?)`, parent); err != nil {
			tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	// The deferred key is checked at COMMIT, which fails.
	if err := insert("missing"); err == nil || !strings.Contains(err.Error(), "FOREIGN KEY") {
		t.Fatalf("commit of a row without its parent: %v", err)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d rows after a failed commit", n)
	}
	// The connection is out of the transaction: the next one begins.
	if _, err := conn.ExecContext(ctx, `INSERT INTO parent (id) VALUES (?)`, "p"); err != nil {
		t.Fatal(err)
	}
	if err := insert("p"); err != nil {
		t.Fatalf("a transaction after a failed commit: %v", err)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tx.ExecContext(ctx, `INSERT INTO child (parent_id) VALUES (?)`, "p")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d rows, want the one committed", n)
	}
	conn.Raw(func(dc any) error {
		c := dc.(*stmtCachingConn)
		for _, q := range []string{"BEGIN IMMEDIATE", "COMMIT", "ROLLBACK"} {
			if _, ok := c.stmts[q]; !ok {
				t.Errorf("%q is not among the connection's statements", q)
			}
		}
		return nil
	})
}

func TestBeginFor(t *testing.T) {
	for dsn, want := range map[string]string{
		"file:/d/pier.db?_pragma=busy_timeout(10000)&_txlock=immediate": "BEGIN IMMEDIATE",
		"file:/d/pier.db?_txlock=exclusive":                             "BEGIN EXCLUSIVE",
		"file:/d/pier.db?_pragma=foreign_keys(1)":                       "BEGIN",
		"file:/d/pier.db":                      "BEGIN",
		"file:/d/pier.db?_txlock=drop%20table": "BEGIN",
	} {
		if got := beginFor(dsn); got != want {
			t.Errorf("beginFor(%q) = %q, want %q", dsn, got, want)
		}
	}
}
