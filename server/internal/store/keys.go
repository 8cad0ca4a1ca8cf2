package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"
)

func scanKey(row interface{ Scan(...any) error }) (APIKey, error) {
	var k APIKey
	var scopes string
	var created int64
	var revoked sql.NullInt64
	err := row.Scan(&k.ID, &k.OrgID, &k.Name, &scopes, &created, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return k, ErrNotFound
	}
	k.Scopes = strings.Fields(scopes)
	k.CreatedAt = time.UnixMicro(created).UTC()
	if revoked.Valid {
		t := time.UnixMicro(revoked.Int64).UTC()
		k.RevokedAt = &t
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

// APIKeyByHash finds a key that is not revoked by the hash of its secret.
func (db Keys) ByHash(ctx context.Context, hash string) (APIKey, error) {
	var k APIKey
	var scopes string
	var created int64
	var revoked sql.NullInt64
	// Every API request asks: prepared once, not parsed per request.
	err := db.queryRowPrepared(ctx, `SELECT id, org_id, name, scopes, created_at, revoked_at FROM api_keys WHERE key_hash = ?`, hash).
		Scan(&k.ID, &k.OrgID, &k.Name, &scopes, &created, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return k, ErrNotFound
	}
	if err != nil {
		return k, err
	}
	k.Scopes = strings.Fields(scopes)
	k.CreatedAt = time.UnixMicro(created)
	if revoked.Valid {
		t := time.UnixMicro(revoked.Int64)
		k.RevokedAt = &t
	}
	return k, nil
}

// CreateAPIKey stores a key by the hash of its secret inside a transaction.
func (db Keys) Create(ctx context.Context, k APIKey, hash string) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO api_keys (id, org_id, name, key_hash, scopes, created_at) VALUES (?, ?, ?, ?, ?, ?)`),
		k.ID, k.OrgID, k.Name, hash, strings.Join(k.Scopes, " "), k.CreatedAt.UnixMicro())
	return err
}

// ListAPIKeys lists an organisation's keys, newest first, revoked ones too.
func (db Keys) List(ctx context.Context, orgID string) ([]APIKey, error) {
	return collect(ctx, db.ex, scanKey, db.q(`SELECT id, org_id, name, scopes, created_at, revoked_at FROM api_keys WHERE org_id = ? ORDER BY created_at DESC, id`), orgID)
}

// LockAPIKey reads a key of the organisation and locks it.
func (db Keys) Lock(ctx context.Context, orgID, id string) (APIKey, error) {
	return scanKey(db.ex.QueryRowContext(ctx, db.q(`SELECT id, org_id, name, scopes, created_at, revoked_at FROM api_keys WHERE id = ? AND org_id = ?`+db.forUpdate()), id, orgID))
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
	return nil
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
	return nil
}
