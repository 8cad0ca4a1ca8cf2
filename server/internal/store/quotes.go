package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/money"
)

// Quote is a priced request; when held, its amount is reserved.
type Quote struct {
	ID, OrgID, ProjectID, KeyID string
	Decision                    string
	State                       string // held, consumed, released, expired, not_held
	AmountMicro                 money.MicroUSD
	Items, Reasons              string // JSON
	CreatedAt, ExpiresAt        time.Time
	SettledAt                   *time.Time
}

const quoteCols = `id, org_id, project_id, key_id, decision, state, amount_micro, items, reasons, created_at, expires_at, settled_at`

func scanQuote(row interface{ Scan(...any) error }) (Quote, error) {
	var q Quote
	var created, expires int64
	var settled sql.NullInt64
	err := row.Scan(&q.ID, &q.OrgID, &q.ProjectID, &q.KeyID, &q.Decision, &q.State, &q.AmountMicro, &q.Items, &q.Reasons, &created, &expires, &settled)
	if errors.Is(err, sql.ErrNoRows) {
		return q, ErrNotFound
	}
	q.CreatedAt = time.UnixMicro(created).UTC()
	q.ExpiresAt = time.UnixMicro(expires).UTC()
	if settled.Valid {
		t := time.UnixMicro(settled.Int64).UTC()
		q.SettledAt = &t
	}
	return q, err
}

// MarkQuoteApproved records the human who approved a quote.
func (db Quotes) MarkApproved(ctx context.Context, id, by string) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE quotes SET approved_by = ? WHERE id = ?`), by, id)
	return err
}

// QuoteApproved reports whether a human approved a quote.
func (db Quotes) Approved(ctx context.Context, id string) (bool, error) {
	var by sql.NullString
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT approved_by FROM quotes WHERE id = ?`), id).Scan(&by)
	if errors.Is(err, sql.ErrNoRows) {
		return false, ErrNotFound
	}
	return by.Valid && by.String != "", err
}

// QuoteGate finds the approval gate a REQUIRES_APPROVAL quote opened.
func (db Quotes) Gate(ctx context.Context, orgID, quoteID string) (Gate, error) {
	// The id's "_" (every id has one) is a LIKE wildcard unless escaped.
	return scanGate(db.ex.QueryRowContext(ctx, db.q(`SELECT `+gateCols+` FROM gates WHERE org_id = ? AND kind = 'quote_approval' AND payload LIKE ? ESCAPE '\' ORDER BY created_at DESC LIMIT 1`),
		orgID, `%"quoteId":"`+likeLiteral(quoteID)+`"%`))
}

// likeLiteral escapes s for a LIKE pattern whose escape character is \.
func likeLiteral(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// ListQuotes lists an organisation's quotes.
func (db Quotes) List(ctx context.Context, orgID string, f Filter) ([]Quote, error) {
	return collect(ctx, db.ex, scanQuote, db.q(`SELECT `+quoteCols+` FROM quotes
		WHERE org_id = ? AND (? = '' OR project_id = ?) AND (? = '' OR state = ?) AND `+afterCond("id")+`
		ORDER BY created_at DESC, id LIMIT ?`), append(append([]any{orgID, f.ProjectID, f.ProjectID, f.State, f.State}, f.afterArgs()...), f.limit())...)
}

// GetQuote reads one quote of an organisation.
func (db Quotes) Get(ctx context.Context, orgID, id string) (Quote, error) {
	return scanQuote(db.ex.QueryRowContext(ctx, db.q(`SELECT `+quoteCols+` FROM quotes WHERE org_id = ? AND id = ?`), orgID, id))
}

// InsertQuote records a quote.
func (db Quotes) Insert(ctx context.Context, q Quote) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO quotes (`+quoteCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)`),
		q.ID, q.OrgID, q.ProjectID, q.KeyID, q.Decision, q.State, q.AmountMicro, q.Items, q.Reasons, q.CreatedAt.UnixMicro(), q.ExpiresAt.UnixMicro())
	return err
}

// InsertHeld records a held quote and moves its amount into its locked
// project's held money (Projects.Hold): on PostgreSQL in one statement, one
// round trip. The database refuses (ErrBudget) a hold over the limit.
func (db Quotes) InsertHeld(ctx context.Context, q Quote) error {
	if db.store.engine != Postgres {
		if err := Projects(db).Hold(ctx, q.ProjectID, q.AmountMicro, q.ExpiresAt); err != nil {
			return err
		}
		return db.Insert(ctx, q)
	}
	_, err := db.ex.ExecContext(ctx, db.q(`WITH hold AS (UPDATE projects SET held_micro = held_micro + ?, holds_expire_at = LEAST(holds_expire_at, ?) WHERE id = ?)
		INSERT INTO quotes (`+quoteCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)`),
		q.AmountMicro, q.ExpiresAt.UnixMicro(), q.ProjectID,
		q.ID, q.OrgID, q.ProjectID, q.KeyID, q.Decision, q.State, q.AmountMicro, q.Items, q.Reasons, q.CreatedAt.UnixMicro(), q.ExpiresAt.UnixMicro())
	if isCheckViolation(err) {
		return ErrBudget
	}
	return err
}

// InsertHeldLogged is InsertHeld and then the quote's ledger entry r. On
// PostgreSQL, when the transaction knows the ledger's head (its quote's
// locks read it: LockForQuote), the hold, the quote and the entry are one
// statement, one round trip; the database refuses (ErrBudget) a hold over
// the limit and then writes none of them.
//
// last says that nothing follows it in the transaction: on PostgreSQL,
// in InGroupTx, the transaction's COMMIT then goes with it (pgFold), and
// when it returns nil the quote is committed.
func (db Quotes) InsertHeldLogged(ctx context.Context, q Quote, r LedgerRecord, now time.Time, last bool) error {
	known := Ledger(db).knownHead(r.OrgID)
	if db.store.engine != Postgres || known == nil {
		if err := db.InsertHeld(ctx, q); err != nil {
			return err
		}
		_, err := Ledger(db).Append(ctx, r, now)
		return err
	}
	e, detailsJSON, err := entryAfter(*known, r, now)
	if err != nil {
		return err
	}
	args := append([]any{q.AmountMicro, q.ExpiresAt.UnixMicro(), q.ProjectID,
		q.ID, q.OrgID, q.ProjectID, q.KeyID, q.Decision, q.State, q.AmountMicro, q.Items, q.Reasons, q.CreatedAt.UnixMicro(), q.ExpiresAt.UnixMicro()},
		entryArgs(e, detailsJSON)...)
	query := db.q(`WITH hold AS (UPDATE projects SET held_micro = held_micro + ?, holds_expire_at = LEAST(holds_expire_at, ?) WHERE id = ?),
		quote AS (INSERT INTO quotes (` + quoteCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL))
		INSERT INTO ledger (` + ledgerCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if last && db.tx != nil && db.tx.fold != nil {
		err = db.tx.fold.execLast(ctx, query, args...)
	} else {
		_, err = db.ex.ExecContext(ctx, query, args...)
	}
	db.appended(r.OrgID, e, err)
	if isCheckViolation(err) {
		return ErrBudget
	}
	return err
}

// LockQuote reads a quote of the organisation and locks it.
func (db Quotes) Lock(ctx context.Context, orgID, id string) (Quote, error) {
	return scanQuote(db.ex.QueryRowContext(ctx, db.q(`SELECT `+quoteCols+` FROM quotes WHERE id = ? AND org_id = ?`+db.forUpdate()), id, orgID))
}

// SettleQuote moves a held quote to a final state (consumed, released or
// expired); ErrConflict if it is no longer held.
func (db Quotes) Settle(ctx context.Context, id, state string, now time.Time) error {
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE quotes SET state = ?, settled_at = ? WHERE id = ? AND state = 'held'`), state, now.UnixMicro(), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrConflict
	}
	return nil
}

// ExpiredHolds lists a locked project's held quotes whose hold has run out.
func (db Quotes) ExpiredHolds(ctx context.Context, projectID string, now time.Time) ([]Quote, error) {
	return collect(ctx, db.ex, scanQuote, db.q(`SELECT `+quoteCols+` FROM quotes WHERE project_id = ? AND state = 'held' AND expires_at <= ? ORDER BY expires_at, id`), projectID, now.UnixMicro())
}

// ActiveHolds lists a project's held quotes that have not expired.
func (db Quotes) ActiveHolds(ctx context.Context, projectID string, now time.Time) ([]Quote, error) {
	return collect(ctx, db.ex, scanQuote, db.q(`SELECT `+quoteCols+` FROM quotes WHERE project_id = ? AND state = 'held' AND expires_at > ? ORDER BY expires_at, id`), projectID, now.UnixMicro())
}

// QuoteTotals sums a project's quotes by state, for checking the books.
func (db Quotes) Totals(ctx context.Context, projectID string) (map[string]money.MicroUSD, error) {
	rows, err := db.ex.QueryContext(ctx, db.q(`SELECT state, COALESCE(SUM(amount_micro), 0) FROM quotes WHERE project_id = ? GROUP BY state`), projectID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]money.MicroUSD{}
	for rows.Next() {
		var st string
		var sum money.MicroUSD
		if err := rows.Scan(&st, &sum); err != nil {
			return nil, err
		}
		out[st] = sum
	}
	return out, rows.Err()
}

// HoldQuote turns an approved quote into a hold; ErrConflict if it is not
// waiting.
func (db Quotes) Hold(ctx context.Context, id string, expires time.Time) error {
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE quotes SET state = 'held', decision = 'ALLOW', expires_at = ? WHERE id = ? AND state = 'not_held' AND decision = 'REQUIRES_APPROVAL'`),
		expires.UnixMicro(), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrConflict
	}
	return nil
}
