package store

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/pierhq/pier/ledger"
)

// Human is a person who acts on the human pages for one organisation.
type Human struct {
	ID, OrgID string
	Kind      string // person, local_operator
	Name      string
	Email     string
	CreatedAt time.Time
}

// HumanSession is a signed-in browser session, found by the hash of its
// cookie secret.
type HumanSession struct {
	HumanID, OrgID       string
	CreatedAt, ExpiresAt time.Time
}

const humanCols = `id, org_id, kind, name, email, created_at`

func scanHuman(row interface{ Scan(...any) error }) (Human, error) {
	var h Human
	var created int64
	err := row.Scan(&h.ID, &h.OrgID, &h.Kind, &h.Name, &h.Email, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return h, ErrNotFound
	}
	h.CreatedAt = time.UnixMicro(created).UTC()
	return h, err
}

// CreateOrganization inserts an organisation inside a transaction.
func (tx *Tx) CreateOrganization(ctx context.Context, id, name string, now time.Time) (Organization, error) {
	_, err := tx.tx.ExecContext(ctx, tx.s.q(`INSERT INTO organizations (id, name, created_at) VALUES (?, ?, ?)`), id, name, now.UnixMicro())
	return Organization{ID: id, Name: name, CreatedAt: now}, err
}

// GetOrganization reads an organisation.
func (s *Store) GetOrganization(ctx context.Context, id string) (Organization, error) {
	var o Organization
	var created int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT id, name, created_at FROM organizations WHERE id = ?`), id).Scan(&o.ID, &o.Name, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return o, ErrNotFound
	}
	o.CreatedAt = time.UnixMicro(created).UTC()
	return o, err
}

// CreateHuman inserts a human.
func (tx *Tx) CreateHuman(ctx context.Context, h Human) error {
	_, err := tx.tx.ExecContext(ctx, tx.s.q(`INSERT INTO humans (`+humanCols+`) VALUES (?, ?, ?, ?, ?, ?)`),
		h.ID, h.OrgID, h.Kind, h.Name, h.Email, h.CreatedAt.UnixMicro())
	return err
}

// GetHuman reads a human.
func (s *Store) GetHuman(ctx context.Context, id string) (Human, error) {
	return scanHuman(s.db.QueryRowContext(ctx, s.q(`SELECT `+humanCols+` FROM humans WHERE id = ?`), id))
}

// LocalOperator finds the organisation's local operator, if it has one.
func (tx *Tx) LocalOperator(ctx context.Context, orgID string) (Human, error) {
	return scanHuman(tx.tx.QueryRowContext(ctx, tx.s.q(`SELECT `+humanCols+` FROM humans WHERE org_id = ? AND kind = 'local_operator' ORDER BY created_at, id LIMIT 1`), orgID))
}

// CreateSignInToken stores a one-time sign-in token by its hash.
func (tx *Tx) CreateSignInToken(ctx context.Context, hash, humanID, next string, now, expires time.Time) error {
	_, err := tx.tx.ExecContext(ctx, tx.s.q(`INSERT INTO signin_tokens (token_hash, human_id, next_path, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`),
		hash, humanID, next, now.UnixMicro(), expires.UnixMicro())
	return err
}

// UseSignInToken is the compare-and-set that spends a sign-in token: it
// succeeds once, before expiry, and returns the human and where to go next.
// A used, expired or unknown token is ErrNotFound; the caller cannot tell
// which.
func (tx *Tx) UseSignInToken(ctx context.Context, hash string, now time.Time) (humanID, next string, err error) {
	res, err := tx.tx.ExecContext(ctx, tx.s.q(`UPDATE signin_tokens SET used_at = ? WHERE token_hash = ? AND used_at IS NULL AND expires_at > ?`),
		now.UnixMicro(), hash, now.UnixMicro())
	if err != nil {
		return "", "", err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return "", "", ErrNotFound
	}
	err = tx.tx.QueryRowContext(ctx, tx.s.q(`SELECT human_id, next_path FROM signin_tokens WHERE token_hash = ?`), hash).Scan(&humanID, &next)
	return humanID, next, err
}

// GetHumanTx reads a human inside a transaction.
func (tx *Tx) GetHuman(ctx context.Context, id string) (Human, error) {
	return scanHuman(tx.tx.QueryRowContext(ctx, tx.s.q(`SELECT `+humanCols+` FROM humans WHERE id = ?`), id))
}

// CreateSession stores a session by the hash of its secret.
func (tx *Tx) CreateSession(ctx context.Context, hash string, s HumanSession) error {
	_, err := tx.tx.ExecContext(ctx, tx.s.q(`INSERT INTO human_sessions (token_hash, human_id, org_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`),
		hash, s.HumanID, s.OrgID, s.CreatedAt.UnixMicro(), s.ExpiresAt.UnixMicro())
	return err
}

// SessionByHash finds a live session.
func (s *Store) SessionByHash(ctx context.Context, hash string, now time.Time) (HumanSession, error) {
	var hs HumanSession
	var created, expires int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT human_id, org_id, created_at, expires_at FROM human_sessions WHERE token_hash = ? AND ended_at IS NULL AND expires_at > ?`),
		hash, now.UnixMicro()).Scan(&hs.HumanID, &hs.OrgID, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return hs, ErrNotFound
	}
	hs.CreatedAt, hs.ExpiresAt = time.UnixMicro(created).UTC(), time.UnixMicro(expires).UTC()
	return hs, err
}

// EndSession ends a session; ending one twice is harmless.
func (s *Store) EndSession(ctx context.Context, hash string, now time.Time) error {
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE human_sessions SET ended_at = ? WHERE token_hash = ? AND ended_at IS NULL`), now.UnixMicro(), hash)
	return err
}

// CreateAPIKey stores a key by the hash of its secret inside a transaction.
func (tx *Tx) CreateAPIKey(ctx context.Context, k APIKey, hash string) error {
	_, err := tx.tx.ExecContext(ctx, tx.s.q(`INSERT INTO api_keys (id, org_id, name, key_hash, scopes, created_at) VALUES (?, ?, ?, ?, ?, ?)`),
		k.ID, k.OrgID, k.Name, hash, strings.Join(k.Scopes, " "), k.CreatedAt.UnixMicro())
	return err
}

// ListAPIKeys lists an organisation's keys, newest first, revoked ones too.
func (s *Store) ListAPIKeys(ctx context.Context, orgID string) ([]APIKey, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT id, org_id, name, scopes, created_at, revoked_at FROM api_keys WHERE org_id = ? ORDER BY created_at DESC, id`), orgID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []APIKey
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

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

// LockAPIKey reads a key of the organisation and locks it.
func (tx *Tx) LockAPIKey(ctx context.Context, orgID, id string) (APIKey, error) {
	return scanKey(tx.tx.QueryRowContext(ctx, tx.s.q(`SELECT id, org_id, name, scopes, created_at, revoked_at FROM api_keys WHERE id = ? AND org_id = ?`+tx.forUpdate()), id, orgID))
}

// RevokeAPIKey marks a key of the organisation revoked inside a
// transaction; ErrNotFound if it is unknown or already revoked.
func (tx *Tx) RevokeAPIKey(ctx context.Context, orgID, id string, now time.Time) error {
	res, err := tx.tx.ExecContext(ctx, tx.s.q(`UPDATE api_keys SET revoked_at = ? WHERE id = ? AND org_id = ? AND revoked_at IS NULL`), now.UnixMicro(), id, orgID)
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
func (tx *Tx) SetAPIKeyScopes(ctx context.Context, orgID, id string, scopes []string) error {
	res, err := tx.tx.ExecContext(ctx, tx.s.q(`UPDATE api_keys SET scopes = ? WHERE id = ? AND org_id = ? AND revoked_at IS NULL`), strings.Join(scopes, " "), id, orgID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// LedgerTail reads an organisation's newest ledger entries, newest first.
func (s *Store) LedgerTail(ctx context.Context, orgID string, n int) ([]ledger.Entry, error) {
	var head int64
	if err := s.db.QueryRowContext(ctx, s.q(`SELECT COALESCE(MAX(seq), 0) FROM ledger WHERE org_id = ?`), orgID).Scan(&head); err != nil {
		return nil, err
	}
	after := head - int64(n)
	if after < 0 {
		after = 0
	}
	entries, err := s.LedgerEntries(ctx, orgID, after, n)
	if err != nil {
		return nil, err
	}
	slices.Reverse(entries)
	return entries, nil
}
