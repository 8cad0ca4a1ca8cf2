package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// QuoteLocks is what a new quote reads under its locks: its project, and
// the caller's key with the key's running count.
type QuoteLocks struct {
	Project  Project
	Key      APIKey
	KeyFound bool
	Count    CapCount
}

// LockForQuote locks a new quote's project and then the caller's key
// (keyID "" for none), the order quotes take them in, and reads both
// (ErrNotFound: no such project), with the organisation's ledger head:
// the transaction keeps it, and Ledger.Append then sends only the entry.
// On PostgreSQL this is the function quote_locks, one round trip for what
// took three (the project's lock, the key's, ledger_head); it locks the
// organisation after the key, as the quote's ledger entry did. On SQLite,
// whose write lock the transaction holds from BEGIN, it is one statement
// for what took three.
func (db Quotes) LockForQuote(ctx context.Context, orgID, projectID, keyID string) (QuoteLocks, error) {
	if db.tx == nil {
		return QuoteLocks{}, errors.New("store: LockForQuote outside a transaction")
	}
	var out QuoteLocks
	var since sql.NullInt64
	var head ledgerHead
	var row interface{ Scan(...any) error }
	switch {
	case db.store.engine == Postgres && db.tx.fold != nil:
		// With the transaction's BEGIN, in one round trip.
		row = db.tx.fold.firstRow(ctx, `SELECT `+quoteLocksCols+` FROM quote_locks($1, $2, $3) q WHERE (q.proj).id IS NOT NULL`, orgID, projectID, keyID)
	case db.store.engine == Postgres:
		row = db.ex.QueryRowContext(ctx, `SELECT `+quoteLocksCols+` FROM quote_locks($1, $2, $3) q WHERE (q.proj).id IS NOT NULL`, orgID, projectID, keyID)
	default:
		row = db.ex.QueryRowContext(ctx, quoteLocksSQLite, keyID, orgID, projectID, orgID)
	}
	var err error
	out.Project, err = scanProject(scanFunc(func(project ...any) error {
		var kerr error
		out.Key, kerr = scanKeyAnd(scanFunc(func(key ...any) error {
			return row.Scan(append(append(project, key...), &out.Count.Spent, &since, &out.KeyFound, &head.seq, &head.hash)...)
		}))
		return kerr
	}))
	if err != nil {
		return QuoteLocks{}, err
	}
	if since.Valid {
		out.Count.Counted, out.Count.Since = true, time.UnixMicro(since.Int64).UTC()
	}
	if !out.KeyFound {
		out.Key = APIKey{}
	}
	head.org = orgID
	db.tx.ledgerHead = &head
	return out, nil
}

// quoteLocksSQLite is LockForQuote's statement on SQLite, its columns as
// quoteLocksCols's.
const quoteLocksSQLite = `SELECT p.id, p.org_id, p.name, p.budget_limit_micro, p.spent_micro, p.held_micro, p.policy, p.created_at,
	COALESCE(p.parent_id, ''), p.deleted_at, COALESCE(p.deletion, ''), p.holds_expire_at,
	COALESCE(k.id, ''), COALESCE(k.org_id, ''), COALESCE(k.name, ''), COALESCE(k.scopes, ''), COALESCE(k.created_at, 0), k.revoked_at,
	k.cap_micro, COALESCE(k.cap_period, 'month'), COALESCE(k.cap_spent_micro, 0), k.cap_counted_since, k.id IS NOT NULL, h.seq, h.hash
	FROM projects p
	LEFT JOIN api_keys k ON k.id = ? AND k.org_id = p.org_id
	LEFT JOIN (SELECT seq, hash FROM ledger WHERE org_id = ? ORDER BY seq DESC LIMIT 1) h ON 1 = 1
	WHERE p.id = ? AND p.org_id = ?`

// quoteLocksCols are quote_locks' answer in the order scanProject and
// scanKeyAnd read them (projectCols, keyCols), then the key's running
// count, whether the key was found, and the ledger's head. A key not
// found reads as zero values.
const quoteLocksCols = `(q.proj).id, (q.proj).org_id, (q.proj).name, (q.proj).budget_limit_micro, (q.proj).spent_micro,
	(q.proj).held_micro, (q.proj).policy, (q.proj).created_at, COALESCE((q.proj).parent_id, ''), (q.proj).deleted_at,
	COALESCE((q.proj).deletion, ''), (q.proj).holds_expire_at,
	COALESCE((q.akey).id, ''), COALESCE((q.akey).org_id, ''), COALESCE((q.akey).name, ''), COALESCE((q.akey).scopes, ''),
	COALESCE((q.akey).created_at, 0), (q.akey).revoked_at, (q.akey).cap_micro, COALESCE((q.akey).cap_period, 'month'),
	COALESCE((q.akey).cap_spent_micro, 0), (q.akey).cap_counted_since, (q.akey).id IS NOT NULL, q.head_seq, q.head_hash`

// ledgerHead is an organisation's ledger head as a transaction holding
// the organisation's lock last saw it (no entry yet: not valid).
type ledgerHead struct {
	org  string
	seq  sql.NullInt64
	hash sql.NullString
}

// scanFunc is a row that scans with a function.
type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

// quoteLocksSQL creates quote_locks (migration 027, PostgreSQL). Each
// statement of a function takes a snapshot of its own, so each row is
// read after its lock is granted, as the latest committed version.
const quoteLocksSQL = `
CREATE FUNCTION quote_locks(p_org TEXT, p_project TEXT, p_key TEXT,
	OUT proj projects, OUT akey api_keys, OUT head_seq BIGINT, OUT head_hash TEXT) LANGUAGE plpgsql AS $$
BEGIN
	SELECT * INTO proj FROM projects WHERE id = p_project AND org_id = p_org FOR UPDATE;
	IF NOT FOUND THEN
		RETURN;
	END IF;
	IF p_key <> '' THEN
		SELECT * INTO akey FROM api_keys WHERE id = p_key AND org_id = p_org FOR UPDATE;
	END IF;
	PERFORM 1 FROM organizations WHERE id = p_org FOR UPDATE;
	SELECT l.seq, l.hash INTO head_seq, head_hash FROM ledger l WHERE l.org_id = p_org ORDER BY l.seq DESC LIMIT 1;
END $$;`
