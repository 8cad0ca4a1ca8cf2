package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// On PostgreSQL a quote's transaction was four round trips: BEGIN, the
// locks (Quotes.LockForQuote), the hold with the quote and its ledger
// entry (Quotes.InsertHeldLogged), COMMIT. InGroupTx runs it on a
// connection of its own with the transaction's bounds folded into its
// statements, as pgx pipelines them: BEGIN goes with the locks, and COMMIT
// with the last write when its caller says nothing follows it. Two round
// trips. The transaction is the same transaction (the same statements,
// locks and isolation); only how its messages travel changes. Any other
// statement runs on the same connection inside it, after a BEGIN of its
// own if it comes first.

// pgFold is the executor of a folded transaction.
type pgFold struct {
	c *sql.Conn
	// begun: BEGIN was sent (and answered); done: COMMIT was sent with
	// the last write, which ended the transaction either way.
	begun, done bool
	// beginErr is why BEGIN failed; the transaction then fails with it.
	beginErr error
}

// inFoldedTx is InTx on PostgreSQL with BEGIN and COMMIT folded into the
// transaction's first and last statements (see pgFold).
func (s *Store) inFoldedTx(ctx context.Context, fn func(tx *Tx) error) (err error) {
	c, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	f := &pgFold{c: c}
	tx := &Tx{s: s, fold: f}
	tx.nouns = nouns{conn{store: s, ex: f, tx: tx}}
	defer func() {
		// A panic would otherwise keep the transaction open on a
		// connection going back to the pool.
		if r := recover(); r != nil {
			f.rollback(ctx)
			s.keysRolledBack(tx.keysNonces)
			c.Close()
			panic(r)
		}
		c.Close()
	}()
	err = fn(tx)
	if f.beginErr != nil {
		err = f.beginErr
	}
	switch {
	case f.done:
		// The last write carried COMMIT: its error, if any, is fn's.
		tx.committed(err)
		return err
	case err != nil:
		f.rollback(ctx)
		s.keysRolledBack(tx.keysNonces)
		return err
	case !f.begun:
		return nil
	}
	_, err = c.ExecContext(ctx, "COMMIT")
	tx.committed(err)
	return err
}

// rollback ends a transaction that did not commit; a connection that
// cannot is closed rather than given back.
func (f *pgFold) rollback(ctx context.Context) {
	if !f.begun || f.done {
		return
	}
	if _, err := f.c.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
		f.c.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// begin sends BEGIN alone, before a statement that cannot carry it.
func (f *pgFold) begin(ctx context.Context) error {
	if f.beginErr != nil {
		return f.beginErr
	}
	if f.begun {
		return nil
	}
	if _, err := f.c.ExecContext(ctx, "BEGIN"); err != nil {
		f.beginErr = err
		return err
	}
	f.begun = true
	return nil
}

func (f *pgFold) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if f.done {
		return nil, errEnded
	}
	if err := f.begin(ctx); err != nil {
		return nil, err
	}
	return f.c.ExecContext(ctx, query, args...)
}

func (f *pgFold) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if f.done {
		return nil, errEnded
	}
	if err := f.begin(ctx); err != nil {
		return nil, err
	}
	return f.c.QueryContext(ctx, query, args...)
}

func (f *pgFold) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if f.done || f.begin(ctx) != nil {
		// A row that fails (database/sql checks the context first): the
		// statement must not run outside the transaction.
		dead, cancel := context.WithCancel(ctx)
		cancel()
		return f.c.QueryRowContext(dead, query, args...)
	}
	return f.c.QueryRowContext(ctx, query, args...)
}

// errEnded: a statement after the one that carried COMMIT.
var errEnded = errors.New("store: statement after the transaction's last write")

// pgx runs fn on the connection's pgx.Conn.
func (f *pgFold) pgx(fn func(c *pgx.Conn) error) error {
	return f.c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("store: a PostgreSQL connection of type %T", dc)
		}
		return fn(sc.Conn())
	})
}

// firstRow is a query's one row, its statement sent with BEGIN when the
// transaction has not begun (else as QueryRowContext sends it). Scan
// runs it; sql.ErrNoRows is its "no row", as database/sql's.
func (f *pgFold) firstRow(ctx context.Context, query string, args ...any) interface{ Scan(...any) error } {
	if f.begun || f.beginErr != nil || f.done {
		return f.QueryRowContext(ctx, query, args...)
	}
	return scanFunc(func(dest ...any) error {
		return f.pgx(func(c *pgx.Conn) error {
			b := &pgx.Batch{}
			b.Queue("BEGIN")
			b.Queue(query, args...)
			br := c.SendBatch(ctx, b)
			if _, err := br.Exec(); err != nil {
				br.Close()
				f.beginErr = err
				return err
			}
			f.begun = true
			err := br.QueryRow().Scan(dest...)
			if cerr := br.Close(); err == nil {
				err = cerr
			}
			if errors.Is(err, pgx.ErrNoRows) {
				return sql.ErrNoRows
			}
			return err
		})
	})
}

// execLast runs the transaction's last write with COMMIT after it, in
// one round trip. A failed write leaves the transaction to be rolled
// back (the pipeline skips the COMMIT); a COMMIT that answers ROLLBACK
// is an error.
func (f *pgFold) execLast(ctx context.Context, query string, args ...any) error {
	if !f.begun || f.done {
		_, err := f.ExecContext(ctx, query, args...)
		return err
	}
	return f.pgx(func(c *pgx.Conn) error {
		b := &pgx.Batch{}
		b.Queue(query, args...)
		b.Queue("COMMIT")
		br := c.SendBatch(ctx, b)
		if _, err := br.Exec(); err != nil {
			br.Close()
			return err
		}
		f.done = true
		tag, err := br.Exec()
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err == nil && tag.String() != "COMMIT" {
			err = fmt.Errorf("store: COMMIT answered %s", tag)
		}
		return err
	})
}
