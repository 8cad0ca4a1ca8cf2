package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"net/url"
	"strings"

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
	return &stmtCachingConn{Conn: c, stmts: map[string]*cachedStmt{}, begin: beginFor(name)}, nil
}

// beginFor is the BEGIN a connection opened with dsn starts its writing
// transactions with, as the driver would from the DSN's _txlock.
func beginFor(dsn string) string {
	_, query, _ := strings.Cut(dsn, "?")
	v, err := url.ParseQuery(query)
	if err != nil {
		return "BEGIN"
	}
	switch mode := strings.ToUpper(v.Get("_txlock")); mode {
	case "IMMEDIATE", "EXCLUSIVE", "DEFERRED":
		return "BEGIN " + mode
	}
	return "BEGIN"
}

// controlStmts are the statements without arguments that every grouped
// write runs: kept per connection like the others. Any other text without
// arguments (a migration's script of several statements, a PRAGMA) runs
// as the driver runs it.
var controlStmts = map[string]bool{"SAVEPOINT grouped": true, "RELEASE grouped": true, "ROLLBACK TO grouped": true}

func implements[I any](v any) bool { _, ok := v.(I); return ok }

// stmtCachingConn is one connection and its statements. database/sql
// never uses a connection from two goroutines at once, so it needs no
// lock.
type stmtCachingConn struct {
	driver.Conn
	stmts map[string]*cachedStmt
	// begin is what BeginTx runs: "BEGIN IMMEDIATE" for the store's DSN.
	begin string
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
	if len(args) == 0 && !controlStmts[query] {
		return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
	}
	return c.exec(ctx, query, args)
}

// exec runs query on the connection's statement for it.
func (c *stmtCachingConn) exec(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
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

// BeginTx begins a writing transaction with the connection's statement
// for BEGIN, and its Commit and Rollback use the connection's statements
// too: the driver parses all three again on every transaction, which was
// a twentieth of a quote's CPU. A read-only transaction, or one asking
// for an isolation level, begins as the driver begins it.
func (c *stmtCachingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if opts.ReadOnly || opts.Isolation != driver.IsolationLevel(sql.LevelDefault) {
		return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	}
	if _, err := c.exec(ctx, c.begin, nil); err != nil {
		return nil, err
	}
	return cachedTx{c}, nil
}

// cachedTx is a transaction BeginTx began.
type cachedTx struct{ c *stmtCachingConn }

// Commit commits. A COMMIT that fails can leave the transaction open
// (SQLITE_BUSY while statements are still running); database/sql expects
// the connection to be out of it whatever Commit returns, so a failed
// COMMIT is followed by a ROLLBACK, whose own failure (no transaction left
// to roll back) is not the caller's error. The driver's Commit does the
// same.
func (t cachedTx) Commit() error {
	_, err := t.c.exec(context.Background(), "COMMIT", nil)
	if err != nil {
		t.c.exec(context.Background(), "ROLLBACK", nil)
	}
	return err
}

func (t cachedTx) Rollback() error {
	_, err := t.c.exec(context.Background(), "ROLLBACK", nil)
	return err
}

func (c *stmtCachingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (c *stmtCachingConn) Ping(ctx context.Context) error { return c.Conn.(driver.Pinger).Ping(ctx) }

func (c *stmtCachingConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *stmtCachingConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }
