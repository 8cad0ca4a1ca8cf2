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
	e := ledger.Entry{Seq: 1, PrevHash: ledger.Genesis}
	var seq sql.NullInt64
	var hash sql.NullString
	var err error
	if known := db.knownHead(r.OrgID); known != nil {
		seq, hash = known.seq, known.hash
	} else {
		head := `SELECT seq, hash FROM ledger WHERE org_id = ? ORDER BY seq DESC LIMIT 1`
		if db.store.engine == Postgres {
			head = `SELECT head_seq, head_hash FROM ledger_head(?)`
		}
		err = db.ex.QueryRowContext(ctx, db.q(head), r.OrgID).Scan(&seq, &hash)
	}
	switch {
	case err == nil && seq.Valid:
		e.Seq, e.PrevHash = seq.Int64+1, hash.String
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return e, err
	}
	e.At = now.UTC().Format("2006-01-02T15:04:05.000000Z")
	e.OrgID, e.Actor, e.Action, e.ObjectType, e.ObjectID, e.Details = r.OrgID, r.Actor, r.Action, r.ObjectType, r.ObjectID, r.Details
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	var err2 error
	if e.Hash, err2 = e.ComputeHash(); err2 != nil {
		return e, err2
	}
	detailsJSON, err := marshalDetails(e.Details)
	if err != nil {
		return e, err
	}
	_, err = db.ex.ExecContext(ctx, db.q(`INSERT INTO ledger (org_id, seq, at, actor, action, object_type, object_id, details, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		e.OrgID, e.Seq, e.At, e.Actor, e.Action, e.ObjectType, e.ObjectID, detailsJSON, e.PrevHash, e.Hash)
	if known := db.knownHead(r.OrgID); known != nil {
		if err != nil {
			// A failed statement ends a PostgreSQL transaction; know nothing.
			db.tx.ledgerHead = nil
		} else {
			known.seq, known.hash = sql.NullInt64{Int64: e.Seq, Valid: true}, sql.NullString{String: e.Hash, Valid: true}
		}
	}
	return e, err
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
