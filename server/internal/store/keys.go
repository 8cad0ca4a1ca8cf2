package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"
)

// Organization owns projects, keys, domains and email addresses.
type Organization struct {
	ID        string
	Name      string
	CreatedAt time.Time
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

// CreateOrganization inserts an organization.
func (s *Store) CreateOrganization(ctx context.Context, id, name string, now time.Time) (Organization, error) {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO organizations (id, name, created_at) VALUES (?, ?, ?)`), id, name, now.UnixMicro())
	if err != nil {
		return Organization{}, err
	}
	return Organization{ID: id, Name: name, CreatedAt: now}, nil
}

// FirstOrganization returns the oldest organization, for the local operator.
func (s *Store) FirstOrganization(ctx context.Context) (Organization, error) {
	var o Organization
	var created int64
	err := s.db.QueryRowContext(ctx, `SELECT id, name, created_at FROM organizations ORDER BY created_at, id LIMIT 1`).Scan(&o.ID, &o.Name, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return o, ErrNotFound
	}
	o.CreatedAt = time.UnixMicro(created)
	return o, err
}

// CreateAPIKey stores a key by the hash of its secret.
func (s *Store) CreateAPIKey(ctx context.Context, k APIKey, hash string) error {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO api_keys (id, org_id, name, key_hash, scopes, created_at) VALUES (?, ?, ?, ?, ?, ?)`),
		k.ID, k.OrgID, k.Name, hash, strings.Join(k.Scopes, " "), k.CreatedAt.UnixMicro())
	return err
}

// APIKeyByHash finds a key that is not revoked by the hash of its secret.
func (s *Store) APIKeyByHash(ctx context.Context, hash string) (APIKey, error) {
	var k APIKey
	var scopes string
	var created int64
	var revoked sql.NullInt64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT id, org_id, name, scopes, created_at, revoked_at FROM api_keys WHERE key_hash = ?`), hash).
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

// RevokeAPIKey marks a key revoked; it stops working on the next request.
func (s *Store) RevokeAPIKey(ctx context.Context, orgID, id string, now time.Time) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE api_keys SET revoked_at = ? WHERE id = ? AND org_id = ? AND revoked_at IS NULL`), now.UnixMicro(), id, orgID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}
