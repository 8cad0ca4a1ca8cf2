package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/pierhq/pier/ledger"
)

func marshalDetails(d map[string]any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return "", err
	}
	return string(bytes.TrimRight(buf.Bytes(), "\n")), nil
}

// unmarshalDetails keeps numbers as written, so an entry read back hashes
// as it did when appended.
func unmarshalDetails(s string) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// LedgerRecord is what a mutation writes to the ledger; Append fills in
// the sequence, time and hashes.
type LedgerRecord struct {
	OrgID, Actor, Action, ObjectType, ObjectID string
	Details                                    map[string]any
}

// LedgerTail reads an organisation's newest ledger entries, newest first.
func (db Ledger) Tail(ctx context.Context, orgID string, n int) ([]ledger.Entry, error) {
	var head int64
	if err := db.ex.QueryRowContext(ctx, db.q(`SELECT COALESCE(MAX(seq), 0) FROM ledger WHERE org_id = ?`), orgID).Scan(&head); err != nil {
		return nil, err
	}
	after := head - int64(n)
	if after < 0 {
		after = 0
	}
	entries, err := db.Entries(ctx, orgID, after, n)
	if err != nil {
		return nil, err
	}
	slices.Reverse(entries)
	return entries, nil
}

// AppendLedger adds an entry to the organisation's chain inside the
// mutation's transaction. Appends to one chain take turns, so that it
// never forks: on PostgreSQL the organisation's row is locked before the
// head is read (both in one round trip, the function ledger_head, or
// already by Quotes.LockForQuote, whose head the transaction keeps);
// SQLite's transactions already take turns (the write lock is taken at
// BEGIN).
func (db Ledger) Append(ctx context.Context, r LedgerRecord, now time.Time) (ledger.Entry, error) {
	var head ledgerHead
	if known := db.knownHead(r.OrgID); known != nil {
		head = *known
	} else {
		q := `SELECT seq, hash FROM ledger WHERE org_id = ? ORDER BY seq DESC LIMIT 1`
		if db.store.engine == Postgres {
			q = `SELECT head_seq, head_hash FROM ledger_head(?)`
		}
		err := db.ex.QueryRowContext(ctx, db.q(q), r.OrgID).Scan(&head.seq, &head.hash)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return ledger.Entry{}, err
		}
	}
	e, detailsJSON, err := entryAfter(head, r, now)
	if err != nil {
		return e, err
	}
	_, err = db.ex.ExecContext(ctx, db.q(`INSERT INTO ledger (`+ledgerCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`), entryArgs(e, detailsJSON)...)
	db.appended(r.OrgID, e, err)
	return e, err
}

// ledgerCols are a ledger row's columns, in entryArgs's order.
const ledgerCols = `org_id, seq, at, actor, action, object_type, object_id, details, prev_hash, hash`

func entryArgs(e ledger.Entry, detailsJSON string) []any {
	return []any{e.OrgID, e.Seq, e.At, e.Actor, e.Action, e.ObjectType, e.ObjectID, detailsJSON, e.PrevHash, e.Hash}
}

// entryAfter is the entry r makes after head, with its hash, and its
// details as stored.
func entryAfter(head ledgerHead, r LedgerRecord, now time.Time) (ledger.Entry, string, error) {
	e := ledger.Entry{Seq: 1, PrevHash: ledger.Genesis}
	if head.seq.Valid {
		e.Seq, e.PrevHash = head.seq.Int64+1, head.hash.String
	}
	e.At = now.UTC().Format("2006-01-02T15:04:05.000000Z")
	e.OrgID, e.Actor, e.Action, e.ObjectType, e.ObjectID, e.Details = r.OrgID, r.Actor, r.Action, r.ObjectType, r.ObjectID, r.Details
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	var err error
	if e.Hash, err = e.ComputeHash(); err != nil {
		return e, "", err
	}
	detailsJSON, err := marshalDetails(e.Details)
	return e, detailsJSON, err
}

// appended moves the head the transaction keeps on past e, or, when the
// statement that wrote it failed, forgets it: a failed statement ends a
// PostgreSQL transaction.
func (c conn) appended(orgID string, e ledger.Entry, err error) {
	known := Ledger{c}.knownHead(orgID)
	switch {
	case known == nil:
	case err != nil:
		c.tx.ledgerHead = nil
	default:
		known.seq, known.hash = sql.NullInt64{Int64: e.Seq, Valid: true}, sql.NullString{String: e.Hash, Valid: true}
	}
}

// knownHead is the organisation's ledger head as the transaction last
// saw it under the organisation's lock (Quotes.LockForQuote), or nil.
// Every append in the transaction passes here and moves it on.
func (db Ledger) knownHead(orgID string) *ledgerHead {
	if db.tx == nil || db.tx.ledgerHead == nil || db.tx.ledgerHead.org != orgID {
		return nil
	}
	return db.tx.ledgerHead
}

// LedgerEntries reads an organisation's chain after a sequence number.
func (db Ledger) Entries(ctx context.Context, orgID string, after int64, limit int) ([]ledger.Entry, error) {
	rows, err := db.ex.QueryContext(ctx, db.q(`SELECT seq, at, org_id, actor, action, object_type, object_id, details, prev_hash, hash
		FROM ledger WHERE org_id = ? AND seq > ? ORDER BY seq LIMIT ?`), orgID, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ledger.Entry
	for rows.Next() {
		var e ledger.Entry
		var details string
		if err := rows.Scan(&e.Seq, &e.At, &e.OrgID, &e.Actor, &e.Action, &e.ObjectType, &e.ObjectID, &details, &e.PrevHash, &e.Hash); err != nil {
			return nil, err
		}
		if e.Details, err = unmarshalDetails(details); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
