package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	"modernc.org/sqlite"
)

// sqliteDriver is modernc's SQLite driver with each connection keeping
// the statements it has run, by their text: the SQLite driver prepares
// (parses and plans) every statement again on each call, which was a
// quarter of a write's CPU. PostgreSQL needs none of this: pgx keeps each
// connection's prepared statements itself (its default exec mode,
// QueryExecModeCacheStatement).
const sqliteDriver = "pier-sqlite"

func init() { sql.Register(sqliteDriver, stmtCachingDriver{&sqlite.Driver{}}) }

// maxStmtsPerConn bounds a connection's statements: the store's queries
// are a fixed set, but a few are built with as many placeholders as items.
const maxStmtsPerConn = 512

type stmtCachingDriver struct{ inner driver.Driver }

func (d stmtCachingDriver) Open(name string) (driver.Conn, error) {
	c, err := d.inner.Open(name)
	if err != nil {
		return nil, err
	}
	for _, ok := range []bool{implements[driver.ConnBeginTx](c), implements[driver.ExecerContext](c), implements[driver.QueryerContext](c),
		implements[driver.ConnPrepareContext](c), implements[driver.Pinger](c), implements[driver.SessionResetter](c), implements[driver.Validator](c)} {
		if !ok {
			c.Close()
			return nil, errors.New("store: the SQLite driver's connection lacks an interface the statement cache relies on")
		}
	}
	return &stmtCachingConn{Conn: c, stmts: map[string]*cachedStmt{}}, nil
}

func implements[I any](v any) bool { _, ok := v.(I); return ok }

// stmtCachingConn is one connection and its statements. database/sql
// never uses a connection from two goroutines at once, so it needs no
// lock.
type stmtCachingConn struct {
	driver.Conn
	stmts map[string]*cachedStmt
}

type cachedStmt struct {
	stmt interface {
		driver.StmtExecContext
		driver.StmtQueryContext
		driver.Stmt
	}
	// inUse: rows of it are open; the same text run meanwhile (inside a
	// transaction, on this connection) gets a statement of its own.
	inUse bool
}

// statement returns the connection's statement for query, and what to
// call when done with it.
func (c *stmtCachingConn) statement(ctx context.Context, query string) (*cachedStmt, func(), error) {
	if cs, ok := c.stmts[query]; ok && !cs.inUse {
		cs.inUse = true
		return cs, func() { cs.inUse = false }, nil
	}
	st, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, nil, err
	}
	typed, ok := st.(interface {
		driver.StmtExecContext
		driver.StmtQueryContext
		driver.Stmt
	})
	if !ok {
		st.Close()
		return nil, nil, errors.New("store: the SQLite driver's statement lacks ExecContext or QueryContext")
	}
	cs := &cachedStmt{stmt: typed, inUse: true}
	if _, taken := c.stmts[query]; taken || len(c.stmts) >= maxStmtsPerConn {
		return cs, func() { st.Close() }, nil
	}
	c.stmts[query] = cs
	return cs, func() { cs.inUse = false }, nil
}

// ExecContext runs query on the connection's statement for it. A query
// without arguments (a migration's script of several statements, a
// PRAGMA) runs as the driver runs it.
func (c *stmtCachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if len(args) == 0 {
		return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
	}
	cs, done, err := c.statement(ctx, query)
	if err != nil {
		return nil, err
	}
	defer done()
	return cs.stmt.ExecContext(ctx, args)
}

// QueryContext is ExecContext for a query; the statement stays in use
// until its rows close.
func (c *stmtCachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if len(args) == 0 {
		return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
	}
	cs, done, err := c.statement(ctx, query)
	if err != nil {
		return nil, err
	}
	rows, err := cs.stmt.QueryContext(ctx, args)
	if err != nil {
		done()
		return nil, err
	}
	return &cachedRows{Rows: rows, done: done}, nil
}

type cachedRows struct {
	driver.Rows
	done func()
}

func (r *cachedRows) Close() error {
	err := r.Rows.Close()
	if r.done != nil {
		r.done()
		r.done = nil
	}
	return err
}

func (c *stmtCachingConn) Close() error {
	for _, cs := range c.stmts {
		cs.stmt.Close()
	}
	clear(c.stmts)
	return c.Conn.Close()
}

func (c *stmtCachingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *stmtCachingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (c *stmtCachingConn) Ping(ctx context.Context) error { return c.Conn.(driver.Pinger).Ping(ctx) }

func (c *stmtCachingConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *stmtCachingConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }
