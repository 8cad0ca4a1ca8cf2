package store

import (
	"context"
	"fmt"
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
