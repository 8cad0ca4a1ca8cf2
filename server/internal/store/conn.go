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
		if !ok {
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

// atomically runs fn in the surrounding transaction, or in a new one.
func (c conn) atomically(ctx context.Context, fn func(tx *Tx) error) error {
	if c.tx != nil {
		return fn(c.tx)
	}
	return c.store.InTx(ctx, fn)
}

func (c conn) accounts() Accounts               { return Accounts{c} }
func (c conn) bundles() Bundles                 { return Bundles{c} }
func (c conn) domains() Domains                 { return Domains{c} }
func (c conn) gates() Gates                     { return Gates{c} }
func (c conn) idempotency() Idempotency         { return Idempotency{c} }
func (c conn) keys() Keys                       { return Keys{c} }
func (c conn) ledger() Ledger                   { return Ledger{c} }
func (c conn) mail() Mail                       { return Mail{c} }
func (c conn) oAuth() OAuth                     { return OAuth{c} }
func (c conn) onboarding() Onboarding           { return Onboarding{c} }
func (c conn) projects() Projects               { return Projects{c} }
func (c conn) quotes() Quotes                   { return Quotes{c} }
func (c conn) rateLimits() RateLimits           { return RateLimits{c} }
func (c conn) sandbox() Sandbox                 { return Sandbox{c} }
func (c conn) sandboxReleases() SandboxReleases { return SandboxReleases{c} }
func (c conn) services() Services               { return Services{c} }
func (c conn) shared() Shared                   { return Shared{c} }
func (c conn) tasks() Tasks                     { return Tasks{c} }
func (c conn) workflows() Workflows             { return Workflows{c} }

func (s *Store) conn() conn { return conn{store: s, ex: s.db} }
func (tx *Tx) conn() conn   { return conn{store: tx.s, ex: tx.tx, tx: tx} }

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

// Services holds launched services and the hosts they answer for.
type Services struct{ conn }

// Tasks holds durable tasks and the leases that keep one runner on each.
type Tasks struct{ conn }

// Workflows holds prepared workflows and whether each was applied.
type Workflows struct{ conn }

func (s *Store) Accounts() Accounts               { return s.conn().accounts() }
func (s *Store) Bundles() Bundles                 { return s.conn().bundles() }
func (s *Store) Domains() Domains                 { return s.conn().domains() }
func (s *Store) Gates() Gates                     { return s.conn().gates() }
func (s *Store) Idempotency() Idempotency         { return s.conn().idempotency() }
func (s *Store) Keys() Keys                       { return s.conn().keys() }
func (s *Store) Ledger() Ledger                   { return s.conn().ledger() }
func (s *Store) Mail() Mail                       { return s.conn().mail() }
func (s *Store) OAuth() OAuth                     { return s.conn().oAuth() }
func (s *Store) Onboarding() Onboarding           { return s.conn().onboarding() }
func (s *Store) Projects() Projects               { return s.conn().projects() }
func (s *Store) Quotes() Quotes                   { return s.conn().quotes() }
func (s *Store) RateLimits() RateLimits           { return s.conn().rateLimits() }
func (s *Store) Sandbox() Sandbox                 { return s.conn().sandbox() }
func (s *Store) SandboxReleases() SandboxReleases { return s.conn().sandboxReleases() }
func (s *Store) Services() Services               { return s.conn().services() }
func (s *Store) Shared() Shared                   { return s.conn().shared() }
func (s *Store) Tasks() Tasks                     { return s.conn().tasks() }
func (s *Store) Workflows() Workflows             { return s.conn().workflows() }

func (tx *Tx) Accounts() Accounts               { return tx.conn().accounts() }
func (tx *Tx) Bundles() Bundles                 { return tx.conn().bundles() }
func (tx *Tx) Domains() Domains                 { return tx.conn().domains() }
func (tx *Tx) Gates() Gates                     { return tx.conn().gates() }
func (tx *Tx) Idempotency() Idempotency         { return tx.conn().idempotency() }
func (tx *Tx) Keys() Keys                       { return tx.conn().keys() }
func (tx *Tx) Ledger() Ledger                   { return tx.conn().ledger() }
func (tx *Tx) Mail() Mail                       { return tx.conn().mail() }
func (tx *Tx) OAuth() OAuth                     { return tx.conn().oAuth() }
func (tx *Tx) Onboarding() Onboarding           { return tx.conn().onboarding() }
func (tx *Tx) Projects() Projects               { return tx.conn().projects() }
func (tx *Tx) Quotes() Quotes                   { return tx.conn().quotes() }
func (tx *Tx) RateLimits() RateLimits           { return tx.conn().rateLimits() }
func (tx *Tx) Sandbox() Sandbox                 { return tx.conn().sandbox() }
func (tx *Tx) SandboxReleases() SandboxReleases { return tx.conn().sandboxReleases() }
func (tx *Tx) Services() Services               { return tx.conn().services() }
func (tx *Tx) Shared() Shared                   { return tx.conn().shared() }
func (tx *Tx) Tasks() Tasks                     { return tx.conn().tasks() }
func (tx *Tx) Workflows() Workflows             { return tx.conn().workflows() }

// begin opens a transaction of the noun's own, for the few operations that
// manage one themselves. They are never part of a caller's transaction.
func (c conn) begin(ctx context.Context) (*sql.Tx, error) {
	if c.tx != nil {
		return nil, errors.New("store: this operation runs in a transaction of its own and cannot join the caller's")
	}
	return c.store.db.BeginTx(ctx, nil)
}
