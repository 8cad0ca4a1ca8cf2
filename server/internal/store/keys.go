package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/money"
)

// keyCols are the columns scanKey reads, in its order.
const keyCols = `id, org_id, name, scopes, created_at, revoked_at, cap_micro, cap_period`

func scanKey(row interface{ Scan(...any) error }) (APIKey, error) { return scanKeyAnd(row) }

// scanKeyAnd scans keyCols, then into more the columns that follow them.
func scanKeyAnd(row interface{ Scan(...any) error }, more ...any) (APIKey, error) {
	var k APIKey
	var scopes string
	var created int64
	var revoked, capMicro sql.NullInt64
	err := row.Scan(append([]any{&k.ID, &k.OrgID, &k.Name, &scopes, &created, &revoked, &capMicro, &k.CapPeriod}, more...)...)
	if errors.Is(err, sql.ErrNoRows) {
		return k, ErrNotFound
	}
	k.Scopes = strings.Fields(scopes)
	k.CreatedAt = time.UnixMicro(created).UTC()
	if revoked.Valid {
		t := time.UnixMicro(revoked.Int64).UTC()
		k.RevokedAt = &t
	}
	if capMicro.Valid {
		c := money.MicroUSD(capMicro.Int64)
		k.CapMicro = &c
	}
	return k, err
}

// APIKey is a stored key. The secret itself is never stored, only its hash.
type APIKey struct {
	ID        string
	OrgID     string
	Name      string
	Scopes    []string
	CreatedAt time.Time
	RevokedAt *time.Time
	// CapMicro is what the key may spend per CapPeriod ("month", the
	// calendar month in UTC, or "lifetime"); nil is no cap.
	CapMicro  *money.MicroUSD
	CapPeriod string
}

// HasScope reports whether the key carries scope.
func (k APIKey) HasScope(scope string) bool {
	for _, s := range k.Scopes {
		if s == scope {
			return true
		}
	}
	return false
}

// ByHash finds a key by the hash of its secret, revoked or not, in the
// database; requests ask Live instead.
func (db Keys) ByHash(ctx context.Context, hash string) (APIKey, error) {
	// Every API request asks: prepared once, not parsed per request.
	k, err := scanKey(db.queryRowPrepared(ctx, `SELECT `+keyCols+` FROM api_keys WHERE key_hash = ?`, hash))
	if err != nil {
		return APIKey{}, err
	}
	return k, nil
}

// CreateAPIKey stores a key by the hash of its secret inside a transaction.
func (db Keys) Create(ctx context.Context, k APIKey, hash string) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO api_keys (id, org_id, name, key_hash, scopes, created_at) VALUES (?, ?, ?, ?, ?, ?)`),
		k.ID, k.OrgID, k.Name, hash, strings.Join(k.Scopes, " "), k.CreatedAt.UnixMicro())
	if err != nil {
		return err
	}
	// A hash asked for before its key existed may be remembered as unknown.
	return db.keysChanged(ctx)
}

// ListAPIKeys lists an organisation's keys, newest first, revoked ones too.
func (db Keys) List(ctx context.Context, orgID string) ([]APIKey, error) {
	return collect(ctx, db.ex, scanKey, db.q(`SELECT `+keyCols+` FROM api_keys WHERE org_id = ? ORDER BY created_at DESC, id`), orgID)
}

// LockAPIKey reads a key of the organisation and locks it.
func (db Keys) Lock(ctx context.Context, orgID, id string) (APIKey, error) {
	return scanKey(db.ex.QueryRowContext(ctx, db.q(`SELECT `+keyCols+` FROM api_keys WHERE id = ? AND org_id = ?`+db.forUpdate()), id, orgID))
}

// RevokeAPIKey marks a key of the organisation revoked inside a
// transaction; ErrNotFound if it is unknown or already revoked.
func (db Keys) Revoke(ctx context.Context, orgID, id string, now time.Time) error {
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE api_keys SET revoked_at = ? WHERE id = ? AND org_id = ? AND revoked_at IS NULL`), now.UnixMicro(), id, orgID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return db.keysChanged(ctx)
}

// SetAPIKeyScopes replaces a live key's scopes; they apply from the next
// request.
func (db Keys) SetScopes(ctx context.Context, orgID, id string, scopes []string) error {
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE api_keys SET scopes = ? WHERE id = ? AND org_id = ? AND revoked_at IS NULL`), strings.Join(scopes, " "), id, orgID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return db.keysChanged(ctx)
}

// SetCap sets or (with capMicro nil) removes a live key's spending cap per
// period; it applies from the key's next quote.
func (db Keys) SetCap(ctx context.Context, orgID, id string, capMicro *money.MicroUSD, period string) error {
	// The key's running count starts again at its next quote (CapCount).
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE api_keys SET cap_micro = ?, cap_period = ?, cap_counted_since = NULL, cap_spent_micro = 0
		WHERE id = ? AND org_id = ? AND revoked_at IS NULL`), capMicro, period, id, orgID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return db.keysChanged(ctx)
}

// Spent is what a key has committed since a time: its consumed quotes and
// the held ones whose hold has not expired at now.
func (db Keys) Spent(ctx context.Context, keyID string, since, now time.Time) (money.MicroUSD, error) {
	var n money.MicroUSD
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT COALESCE(SUM(amount_micro), 0) FROM quotes
		WHERE key_id = ? AND created_at >= ? AND (state = 'consumed' OR state = 'held' AND expires_at > ?)`),
		keyID, since.UnixMicro(), now.UnixMicro()).Scan(&n)
	return n, err
}

// CapCount is a capped key's running count: at least what its quotes
// created since Since hold or have spent (Spent's figure, or more).
// Quotes add to it as they are held (AddCapSpent), in the transaction
// that holds them, with the key locked; releases and lapsed holds are
// not taken off, so the count only errs high, and a quote the count would
// refuse counts again exactly (Recount). Counted is false when there is
// no count yet: the cap was just set, or the key came from before counts.
type CapCount struct {
	Counted bool
	Since   time.Time
	Spent   money.MicroUSD
}

// LockCount reads and locks a key of the organisation, as Lock does, with
// its running count.
func (db Keys) LockCount(ctx context.Context, orgID, id string) (APIKey, CapCount, error) {
	var c CapCount
	var since sql.NullInt64
	k, err := scanKeyAnd(db.ex.QueryRowContext(ctx, db.q(`SELECT `+keyCols+`, cap_spent_micro, cap_counted_since FROM api_keys WHERE id = ? AND org_id = ?`+db.forUpdate()), id, orgID),
		&c.Spent, &since)
	if since.Valid {
		c.Counted, c.Since = true, time.UnixMicro(since.Int64).UTC()
	}
	return k, c, err
}

// Recount counts a locked key's spending since a time exactly (Spent at
// now) and keeps it as the key's running count from since.
func (db Keys) Recount(ctx context.Context, keyID string, since, now time.Time) (money.MicroUSD, error) {
	var n money.MicroUSD
	err := db.ex.QueryRowContext(ctx, db.q(`UPDATE api_keys SET cap_counted_since = ?, cap_spent_micro = (SELECT COALESCE(SUM(amount_micro), 0) FROM quotes
		WHERE key_id = ? AND created_at >= ? AND (state = 'consumed' OR state = 'held' AND expires_at > ?)) WHERE id = ? RETURNING cap_spent_micro`),
		since.UnixMicro(), keyID, since.UnixMicro(), now.UnixMicro(), keyID).Scan(&n)
	return n, err
}

// AddCapSpent adds a quote created at created, just held, to its key's
// running count, when the key is capped and counts from no later than
// created. Every quote held with a key passes here, in the transaction
// that holds it.
func (db Keys) AddCapSpent(ctx context.Context, keyID string, amount money.MicroUSD, created time.Time) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE api_keys SET cap_spent_micro = cap_spent_micro + ?
		WHERE id = ? AND cap_micro IS NOT NULL AND cap_counted_since <= ?`), amount, keyID, created.UnixMicro())
	return err
}
