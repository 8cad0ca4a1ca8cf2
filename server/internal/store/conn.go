package store

import (
	"context"
	"database/sql"
	"errors"
)

// executor runs queries: the database itself, or a transaction.
type executor interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// conn is where a noun's queries run. From Store they run on the database,
// each statement on its own; from Tx they run inside the transaction, and
// rows read with forUpdate stay locked until it ends.
type conn struct {
	store *Store
	ex    executor
	tx    *Tx // nil outside a transaction
}

func (c conn) q(query string) string { return c.store.q(query) }

// claim inserts a row whose key one holder may have, with insert (an
// INSERT … ON CONFLICT DO NOTHING, which never violates the key, so that a
// PostgreSQL transaction stays usable after a refusal). When the row was
// there already, holderOf reads its holder for key: the same holder is a
// no-op, another is ErrConflict.
func (c conn) claim(ctx context.Context, insert string, args []any, holderOf, key, holder string) error {
	res, err := c.ex.ExecContext(ctx, c.q(insert), args...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	var has string
	if err := c.ex.QueryRowContext(ctx, c.q(holderOf), key).Scan(&has); err != nil {
		return err
	}
	if has != holder {
		return ErrConflict
	}
	return nil
}

// forUpdate locks the rows a query reads, inside a transaction on
// PostgreSQL. SQLite takes its write lock at BEGIN, so it needs none.
func (c conn) forUpdate() string {
	if c.tx != nil && c.store.engine == Postgres {
		return " FOR UPDATE"
	}
	return ""
}

// execPrepared runs a statement prepared once for the store (and once per
// connection by database/sql), for the few statements that run once per
// item of a large request: parsing and planning them again each time
// costs as much as running them.
//
// Preparing on the database takes a connection of its own, which a
// transaction must not wait for (the pool may be all transactions waiting
// the same way): callers prepare before their transaction (prepare), and
// inside one a statement not yet prepared runs unprepared.
func (c conn) execPrepared(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if c.tx != nil {
		v, ok := c.store.stmts.Load(query)
		if !ok || c.tx.tx == nil {
			return c.ex.ExecContext(ctx, c.q(query), args...)
		}
		return c.tx.tx.StmtContext(ctx, v.(*sql.Stmt)).ExecContext(ctx, args...)
	}
	st, err := c.store.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// queryRowPrepared is execPrepared for a query of one row.
func (c conn) queryRowPrepared(ctx context.Context, query string, args ...any) *sql.Row {
	if c.tx != nil {
		v, ok := c.store.stmts.Load(query)
		if !ok || c.tx.tx == nil {
			return c.ex.QueryRowContext(ctx, c.q(query), args...)
		}
		return c.tx.tx.StmtContext(ctx, v.(*sql.Stmt)).QueryRowContext(ctx, args...)
	}
	st, err := c.store.prepared(ctx, query)
	if err != nil {
		return c.ex.QueryRowContext(ctx, c.q(query), args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// atomically runs fn in the surrounding transaction, or in a new one.
func (c conn) atomically(ctx context.Context, fn func(tx *Tx) error) error {
	if c.tx != nil {
		return fn(c.tx)
	}
	return c.store.InTx(ctx, fn)
}

// Accounts holds organisations, humans, their sign-in links and sessions.
type Accounts struct{ conn }

// Bundles holds uploaded bundles and the content-addressed blobs they name.
type Bundles struct{ conn }

// Domains holds registrar purchases, launches' claims on names, and zones.
type Domains struct{ conn }

// Gates holds human decisions that tasks wait on.
type Gates struct{ conn }

// Idempotency holds the answers replayed for a repeated Idempotency-Key.
type Idempotency struct{ conn }

// Keys holds agent API keys, by the hash of their secret.
type Keys struct{ conn }

// Ledger is the hash-chained audit ledger.
type Ledger struct{ conn }

// Mail holds mail domains and their DKIM keys, addresses, inboxes,
// messages and registrant contacts.
type Mail struct{ conn }

// OAuth holds OAuth clients, authorizations, grants and tokens.
type OAuth struct{ conn }

// Onboarding holds signups, billing setups and payment methods.
type Onboarding struct{ conn }

// Projects holds projects and their budgets.
type Projects struct{ conn }

// Quotes holds quotes and the budget they hold.
type Quotes struct{ conn }

// Sandbox holds sandbox sessions, their attempts, gates and proofs.
type Sandbox struct{ conn }

// SandboxReleases holds the sandbox's signing keys and published releases.
type SandboxReleases struct{ conn }

// Services holds launched services, the hosts they answer for and their
// managed databases.
type Services struct{ conn }

// ServiceVersions holds each service's immutable, numbered versions.
type ServiceVersions struct{ conn }

// ServiceRuns holds where each live service runs: the version it serves,
// where it answers, its health and the replica that supervises it.
type ServiceRuns struct{ conn }

// ServiceLogs holds the lines services write.
type ServiceLogs struct{ conn }

// Tasks holds durable tasks and the leases that keep one runner on each.
type Tasks struct{ conn }

// Workflows holds prepared workflows and whether each was applied.
type Workflows struct{ conn }

// nouns reaches each noun over one conn. Store and Tx embed it, so that
// st.Accounts() runs on the database and tx.Accounts() inside the
// transaction, with one accessor per noun written once.
type nouns struct{ c conn }

func (n nouns) Accounts() Accounts               { return Accounts{n.c} }
func (n nouns) Bundles() Bundles                 { return Bundles{n.c} }
func (n nouns) Domains() Domains                 { return Domains{n.c} }
func (n nouns) Gates() Gates                     { return Gates{n.c} }
func (n nouns) Idempotency() Idempotency         { return Idempotency{n.c} }
func (n nouns) Keys() Keys                       { return Keys{n.c} }
func (n nouns) Ledger() Ledger                   { return Ledger{n.c} }
func (n nouns) Mail() Mail                       { return Mail{n.c} }
func (n nouns) OAuth() OAuth                     { return OAuth{n.c} }
func (n nouns) Onboarding() Onboarding           { return Onboarding{n.c} }
func (n nouns) Projects() Projects               { return Projects{n.c} }
func (n nouns) Quotes() Quotes                   { return Quotes{n.c} }
func (n nouns) RateLimits() RateLimits           { return RateLimits{n.c} }
func (n nouns) Sandbox() Sandbox                 { return Sandbox{n.c} }
func (n nouns) SandboxReleases() SandboxReleases { return SandboxReleases{n.c} }
func (n nouns) ServiceLogs() ServiceLogs         { return ServiceLogs{n.c} }
func (n nouns) ServiceRuns() ServiceRuns         { return ServiceRuns{n.c} }
func (n nouns) ServiceVersions() ServiceVersions { return ServiceVersions{n.c} }
func (n nouns) Services() Services               { return Services{n.c} }
func (n nouns) Shared() Shared                   { return Shared{n.c} }
func (n nouns) Tasks() Tasks                     { return Tasks{n.c} }
func (n nouns) Workflows() Workflows             { return Workflows{n.c} }

// begin opens a transaction of the noun's own, for the few operations that
// manage one themselves. They are never part of a caller's transaction.
func (c conn) begin(ctx context.Context) (*sql.Tx, error) {
	if c.tx != nil {
		return nil, errors.New("store: this operation runs in a transaction of its own and cannot join the caller's")
	}
	return c.store.db.BeginTx(ctx, nil)
}
