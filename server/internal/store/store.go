package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	_ "modernc.org/sqlite"             // registers the "sqlite" driver
)

// Filter narrows a listing; empty fields match everything. Listings are
// newest first and at most Limit long.
type Filter struct {
	ProjectID, State string
	Limit            int
	// After, when set, starts the list after this item: lists run newest
	// first, ties in id order, so a page goes on from the last one's.
	After Cursor
}

// Cursor is where a list goes on from: an item's creation time (Unix
// microseconds) and id. The zero Cursor is the list's start.
type Cursor struct {
	At int64
	ID string
}

func (f Filter) limit() int {
	if f.Limit <= 0 || f.Limit > 500 {
		return 100
	}
	return f.Limit
}

// Args are the filters as a list operation's arguments, for the action
// that asks for the next page.
func (f Filter) Args() map[string]any {
	args := map[string]any{}
	if f.ProjectID != "" {
		args["projectId"] = f.ProjectID
	}
	if f.State != "" {
		args["state"] = f.State
	}
	if f.Limit > 0 {
		args["limit"] = f.Limit
	}
	return args
}

// PageSize is the most items a list answers for f.
func (f Filter) PageSize() int { return f.limit() }

// afterCond is the condition for items after f.After, with the list's id
// column; afterArgs are its arguments.
func afterCond(idCol string) string {
	// The first test is on the id, a string: PostgreSQL would take a bare
	// "? = 0" for an int4 and refuse a microsecond time.
	return `(? = '' OR created_at < ? OR (created_at = ? AND ` + idCol + ` > ?))`
}

// afterCondOldest is afterCond for a list that runs oldest first.
func afterCondOldest(idCol string) string {
	return `(? = '' OR created_at > ? OR (created_at = ? AND ` + idCol + ` > ?))`
}

func (f Filter) afterArgs() []any { return []any{f.After.ID, f.After.At, f.After.At, f.After.ID} }

// Tx is a transaction. Every money movement and its ledger entry commit
// together or not at all.
type Tx struct {
	nouns
	tx *sql.Tx
	s  *Store
	// domainsWritten: the transaction wrote who holds a name; the
	// store's domains version is bumped once it commits.
	domainsWritten bool
	// keysNonces: the transaction changed keys, with these announcements
	// (keysChanged); the store's key cache is emptied once it commits.
	keysNonces []string
	// ledgerHead: the organisation's ledger head, read under its lock by
	// Quotes.LockForQuote (PostgreSQL), for Ledger.Append.
	ledgerHead *ledgerHead
	// fold, on PostgreSQL, is InGroupTx's transaction, whose BEGIN and
	// COMMIT go with its first and last statements (pgfold.go); tx is
	// then nil.
	fold *pgFold
}

// InTx runs fn in a transaction. On SQLite the write lock is taken at BEGIN,
// so transactions serialize; on PostgreSQL rows are locked FOR UPDATE as read.
func (s *Store) InTx(ctx context.Context, fn func(tx *Tx) error) error {
	t, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	tx := &Tx{tx: t, s: s}
	tx.nouns = nouns{conn{store: s, ex: t, tx: tx}}
	defer func() {
		// A panic would otherwise keep the transaction, and on SQLite the
		// write lock, open.
		if r := recover(); r != nil {
			t.Rollback()
			s.keysRolledBack(tx.keysNonces)
			panic(r)
		}
	}()
	if err := fn(tx); err != nil {
		t.Rollback()
		s.keysRolledBack(tx.keysNonces)
		return err
	}
	err = t.Commit()
	tx.committed(err)
	return err
}

// committed tells the store's caches what the transaction wrote, once
// its COMMIT has returned err.
func (tx *Tx) committed(err error) {
	s := tx.s
	if tx.domainsWritten {
		s.domainsVersion.Add(1)
	}
	if tx.keysNonces != nil {
		if err != nil {
			s.keysRolledBack(tx.keysNonces)
		}
		// Forgotten even after a failed commit, which may have committed.
		for _, n := range tx.keysNonces {
			s.keysCommitted(n)
		}
	}
}

// DomainsVersion changes after every write of who holds or claims a name
// through this store, once the write is committed. An answer made from
// those rows after reading the version is current while it holds.
func (s *Store) DomainsVersion() uint64 { return s.domainsVersion.Load() }

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// ErrNotFound is returned when a row does not exist.
var ErrNotFound = errors.New("store: not found")

//go:embed migrations
var migrations embed.FS

// Engine names a database engine.
type Engine string

const (
	SQLite   Engine = "sqlite"
	Postgres Engine = "postgres"
)

// Store is the database. It is safe for concurrent use.
type Store struct {
	nouns
	db      *sql.DB
	engine  Engine
	objects ObjectStore // nil: blob bodies in the database

	rewrites     sync.Map // query text → the engine's text
	rewriteCount atomic.Int64

	// blobWrites commits this process's concurrent blob writes together
	// on SQLite.
	blobWrites groupCommit
	// txGroup commits concurrent InGroupTx calls together on SQLite.
	txGroup txGroup
	// stmts holds the statements prepared once (execPrepared), by query.
	stmts sync.Map
	// domainsVersion: see DomainsVersion.
	domainsVersion atomic.Uint64
	// keys serves Keys.Live from memory.
	keys *keyCache
}

// ObjectStore keeps blob bodies outside the database (S3 and the like);
// the blobs table still records each blob, with an empty body, and
// blob_forms each compressed form.
type ObjectStore interface {
	Put(ctx context.Context, sha string, data []byte) error
	Get(ctx context.Context, sha string) ([]byte, error)
	PutForm(ctx context.Context, sha, encoding string, data []byte) error
	GetForm(ctx context.Context, sha, encoding string) ([]byte, error)
}

// Option configures Open.
type Option func(*Store)

// WithObjects keeps new blob bodies in o.
func WithObjects(o ObjectStore) Option { return func(s *Store) { s.objects = o } }

// Open connects to PostgreSQL when databaseURL is set, and otherwise to
// SQLite at dataDir/pier.db, then applies pending migrations.
func Open(ctx context.Context, dataDir, databaseURL string, opts ...Option) (*Store, error) {
	var s *Store
	switch {
	case strings.HasPrefix(databaseURL, "postgres://"), strings.HasPrefix(databaseURL, "postgresql://"):
		db, err := sql.Open("pgx", databaseURL)
		if err != nil {
			return nil, fmt.Errorf("store: open postgres: %w", err)
		}
		db.SetMaxOpenConns(20)
		db.SetMaxIdleConns(20)
		s = &Store{db: db, engine: Postgres}
	case databaseURL == "":
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("store: data directory: %w", err)
		}
		path := filepath.Join(dataDir, "pier.db")
		// WAL lets readers run beside the writer; _txlock=immediate takes the
		// write lock at BEGIN, so check-then-write transactions serialize
		// instead of failing with SQLITE_BUSY halfway through.
		// wal_autocheckpoint(8192) checkpoints every 32 MiB of log instead
		// of SQLite's 4 MiB: a page rewritten by many commits (an index
		// page of a digest upload's blobs) is copied into the database
		// once per checkpoint, so a first deploy of 20,000 files copies
		// and syncs far less (bench/README.md, "Deploys with the CLI
		// exec'd"). Commits are as durable as before: the log is the
		// database until it is checkpointed.
		dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_pragma=wal_autocheckpoint(8192)&_txlock=immediate"
		db, err := sql.Open(sqliteDriver, dsn)
		if err != nil {
			return nil, fmt.Errorf("store: open sqlite: %w", err)
		}
		db.SetMaxOpenConns(8)
		db.SetMaxIdleConns(8)
		s = &Store{db: db, engine: SQLite}
	default:
		return nil, fmt.Errorf("store: database URL must start with postgres:// (or be empty for SQLite)")
	}
	s.nouns = nouns{conn{store: s, ex: s.db}}
	s.keys = newKeyCache()
	for _, o := range opts {
		o(s)
	}
	if err := s.db.PingContext(ctx); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("store: connect %s: %w", s.engine, err)
	}
	if err := s.migrate(ctx); err != nil {
		s.db.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Engine reports which engine backs the store.
func (s *Store) Engine() Engine { return s.engine }

// DB exposes the handle for packages that bring their own schema (River).
func (s *Store) DB() *sql.DB { return s.db }

// q gives a query in the engine's placeholder style. The store writes
// ?-placeholders; PostgreSQL wants $n, so each query text is rewritten once
// and the result kept. Queries built with a variable number of
// placeholders are few, and the table stops growing at maxRewrites.
func (s *Store) q(query string) string {
	if s.engine != Postgres {
		return query
	}
	if v, ok := s.rewrites.Load(query); ok {
		return v.(string)
	}
	out := dollarPlaceholders(query)
	if s.rewriteCount.Load() < maxRewrites {
		if _, loaded := s.rewrites.LoadOrStore(query, out); !loaded {
			s.rewriteCount.Add(1)
		}
	}
	return out
}

const maxRewrites = 4096

// prepared returns the statement for query, prepared on first use. Only a
// fixed set of queries comes here, so the map stays small.
func (s *Store) prepared(ctx context.Context, query string) (*sql.Stmt, error) {
	if v, ok := s.stmts.Load(query); ok {
		return v.(*sql.Stmt), nil
	}
	st, err := s.db.PrepareContext(context.WithoutCancel(ctx), s.q(query))
	if err != nil {
		return nil, err
	}
	if v, loaded := s.stmts.LoadOrStore(query, st); loaded {
		st.Close()
		return v.(*sql.Stmt), nil
	}
	return st, nil
}

func dollarPlaceholders(query string) string {
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (s *Store) migrate(ctx context.Context) error {
	dir := "migrations"
	entries, err := fs.ReadDir(migrations, dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".up.sql") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)

	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)`); err != nil {
		return fmt.Errorf("store: migrations table: %w", err)
	}
	for _, name := range names {
		version, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if err != nil {
			return fmt.Errorf("store: migration %s: name must start with a number", name)
		}
		body, err := fs.ReadFile(migrations, dir+"/"+name)
		if err != nil {
			return err
		}
		if err := s.applyMigration(ctx, version, name, s.dialect(string(body))+engineSQL[version][s.engine]); err != nil {
			return fmt.Errorf("store: migration %s: %w", name, err)
		}
	}
	return nil
}

var blobType = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\bBLOB\b`)
})

// dialect adapts a migration written once for both engines: the only type
// they spell differently is the byte string.
func (s *Store) dialect(sql string) string {
	if s.engine == Postgres {
		return blobType().ReplaceAllString(sql, "BYTEA")
	}
	return sql
}

// engineSQL is what a migration adds that the engines cannot spell alike,
// by migration and engine, run in the migration's transaction after its
// file: triggers, whose bodies SQLite writes inline and PostgreSQL as a
// function.
var engineSQL = map[int]map[Engine]string{
	// Every deletion from blobs (by hand: the server deletes none) counts
	// in blob_losses, which launches compare with what their bundle was
	// checked at.
	16: {
		SQLite: `
CREATE TRIGGER blobs_lost AFTER DELETE ON blobs BEGIN UPDATE blob_losses SET n = n + 1 WHERE id = 1; END;`,
		Postgres: `
CREATE FUNCTION blobs_lost() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE blob_losses SET n = n + 1 WHERE id = 1; RETURN NULL; END $$;
CREATE TRIGGER blobs_lost AFTER DELETE OR TRUNCATE ON blobs FOR EACH STATEMENT EXECUTE FUNCTION blobs_lost();`,
	},
	// The ledger's append locks the organisation and reads its chain's
	// head in one round trip (Ledger.Append). Each statement of a
	// function takes a snapshot of its own, so the head is read after the
	// lock is granted and is the one the previous append committed.
	26: {
		Postgres: `
CREATE FUNCTION ledger_head(p_org TEXT, OUT head_seq BIGINT, OUT head_hash TEXT) LANGUAGE plpgsql AS $$
BEGIN
	PERFORM 1 FROM organizations WHERE id = p_org FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'no organisation %', p_org USING ERRCODE = 'foreign_key_violation';
	END IF;
	SELECT l.seq, l.hash INTO head_seq, head_hash FROM ledger l WHERE l.org_id = p_org ORDER BY l.seq DESC LIMIT 1;
END $$;`,
	},
	// A quote's locks and its ledger's head in one round trip
	// (Quotes.LockForQuote).
	27: {Postgres: quoteLocksSQL},
}

func (s *Store) applyMigration(ctx context.Context, version int, name, body string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if s.engine == Postgres {
		// Replicas starting together take turns.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7461626)`); err != nil {
			return err
		}
	}
	var n int
	if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`), version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, body); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO schema_migrations (version, name) VALUES (?, ?)`), version, name); err != nil {
		return err
	}
	return tx.Commit()
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// collect runs a query and scans every row with scan.
func collect[T any](ctx context.Context, q querier, scan func(interface{ Scan(...any) error }) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
