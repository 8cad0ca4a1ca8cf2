package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Usage is what an organisation holds, for its quotas.
type Usage struct {
	// Services counts services not failed or torn down.
	Services int
	// Bundles and BundleBytes count its bundles and the bytes their files
	// decode to (shared blobs counted once per bundle that names them).
	Bundles     int
	BundleBytes int64
}

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

// Organization owns projects, keys, domains and email addresses.
type Organization struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// OrgUsage reads an organisation's usage.
func (db Accounts) Usage(ctx context.Context, orgID string) (Usage, error) {
	var u Usage
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT
		(SELECT COUNT(*) FROM services WHERE org_id = ? AND state NOT IN ('failed', 'torn_down')),
		(SELECT COUNT(*) FROM bundles WHERE org_id = ?),
		(SELECT COALESCE(SUM(total_bytes), 0) FROM bundles WHERE org_id = ?)`), orgID, orgID, orgID).Scan(&u.Services, &u.Bundles, &u.BundleBytes)
	return u, err
}

// FirstOrganization returns the oldest organization, for the local operator.
func (db Accounts) FirstOrganization(ctx context.Context) (Organization, error) {
	var o Organization
	var created int64
	err := db.ex.QueryRowContext(ctx, `SELECT id, name, created_at FROM organizations ORDER BY created_at, id LIMIT 1`).Scan(&o.ID, &o.Name, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return o, ErrNotFound
	}
	o.CreatedAt = time.UnixMicro(created)
	return o, err
}

// CreateOrganization inserts an organisation inside a transaction.
func (db Accounts) CreateOrganization(ctx context.Context, id, name string, now time.Time) (Organization, error) {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO organizations (id, name, created_at) VALUES (?, ?, ?)`), id, name, now.UnixMicro())
	return Organization{ID: id, Name: name, CreatedAt: now}, err
}

// GetOrganization reads an organisation.
func (db Accounts) Organization(ctx context.Context, id string) (Organization, error) {
	var o Organization
	var created int64
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT id, name, created_at FROM organizations WHERE id = ?`), id).Scan(&o.ID, &o.Name, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return o, ErrNotFound
	}
	o.CreatedAt = time.UnixMicro(created).UTC()
	return o, err
}

// CreateHuman inserts a human.
func (db Accounts) CreateHuman(ctx context.Context, h Human) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO humans (`+humanCols+`) VALUES (?, ?, ?, ?, ?, ?)`),
		h.ID, h.OrgID, h.Kind, h.Name, h.Email, h.CreatedAt.UnixMicro())
	return err
}

// GetHuman reads a human.
func (db Accounts) Human(ctx context.Context, id string) (Human, error) {
	return scanHuman(db.ex.QueryRowContext(ctx, db.q(`SELECT `+humanCols+` FROM humans WHERE id = ?`), id))
}

// LocalOperator finds the organisation's local operator, if it has one.
func (db Accounts) LocalOperator(ctx context.Context, orgID string) (Human, error) {
	return scanHuman(db.ex.QueryRowContext(ctx, db.q(`SELECT `+humanCols+` FROM humans WHERE org_id = ? AND kind = 'local_operator' ORDER BY created_at, id LIMIT 1`), orgID))
}

// CreateSignInToken stores a one-time sign-in token by its hash.
func (db Accounts) CreateSignInToken(ctx context.Context, hash, humanID, next string, now, expires time.Time) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO signin_tokens (token_hash, human_id, next_path, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`),
		hash, humanID, next, now.UnixMicro(), expires.UnixMicro())
	return err
}

// UseSignInToken is the compare-and-set that spends a sign-in token: it
// succeeds once, before expiry, and returns the human and where to go next.
// A used, expired or unknown token is ErrNotFound; the caller cannot tell
// which.
func (db Accounts) UseSignInToken(ctx context.Context, hash string, now time.Time) (humanID, next string, err error) {
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE signin_tokens SET used_at = ? WHERE token_hash = ? AND used_at IS NULL AND expires_at > ?`),
		now.UnixMicro(), hash, now.UnixMicro())
	if err != nil {
		return "", "", err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return "", "", ErrNotFound
	}
	err = db.ex.QueryRowContext(ctx, db.q(`SELECT human_id, next_path FROM signin_tokens WHERE token_hash = ?`), hash).Scan(&humanID, &next)
	return humanID, next, err
}

// CreateSession stores a session by the hash of its secret.
func (db Accounts) CreateSession(ctx context.Context, hash string, s HumanSession) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO human_sessions (token_hash, human_id, org_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`),
		hash, s.HumanID, s.OrgID, s.CreatedAt.UnixMicro(), s.ExpiresAt.UnixMicro())
	return err
}

// SessionByHash finds a live session.
func (db Accounts) SessionByHash(ctx context.Context, hash string, now time.Time) (HumanSession, error) {
	var hs HumanSession
	var created, expires int64
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT human_id, org_id, created_at, expires_at FROM human_sessions WHERE token_hash = ? AND ended_at IS NULL AND expires_at > ?`),
		hash, now.UnixMicro()).Scan(&hs.HumanID, &hs.OrgID, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return hs, ErrNotFound
	}
	hs.CreatedAt, hs.ExpiresAt = time.UnixMicro(created).UTC(), time.UnixMicro(expires).UTC()
	return hs, err
}

// EndSession ends a session; ending one twice is harmless.
func (db Accounts) EndSession(ctx context.Context, hash string, now time.Time) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE human_sessions SET ended_at = ? WHERE token_hash = ? AND ended_at IS NULL`), now.UnixMicro(), hash)
	return err
}
