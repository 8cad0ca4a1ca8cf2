package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"
)

// OAuthClient is a registered public client (RFC 7591).
type OAuthClient struct {
	ID           string
	Name         string
	RedirectURIs []string
	CreatedAt    time.Time
}

// OAuthAuthorization is an authorization request and, once a human approved
// it, the code it yielded.
type OAuthAuthorization struct {
	ID            string
	ClientID      string
	RedirectURI   string
	Scopes        []string // requested
	ClientState   string
	CodeChallenge string
	Resource      string
	Status        string // pending, approved, denied, exchanged
	CreatedAt     time.Time
	ExpiresAt     time.Time
	GrantID       string
	CodeExpiresAt time.Time
}

// OAuthGrant is what a human approved for a client in one organisation.
type OAuthGrant struct {
	ID, ClientID, OrgID, HumanID string
	Scopes                       []string
	Resource                     string
	CreatedAt                    time.Time
	RevokedAt                    *time.Time
}

// OAuthToken is a stored access or refresh token with its grant.
type OAuthToken struct {
	Kind      string // access, refresh
	GrantID   string
	Scopes    []string // a subset of the grant's
	CreatedAt time.Time
	ExpiresAt time.Time
	RotatedAt *time.Time
	RevokedAt *time.Time
	Grant     OAuthGrant
}

const oauthAuthorizationCols = `id, client_id, redirect_uri, scopes, client_state, code_challenge, resource, status, created_at, expires_at, grant_id, code_expires_at`

func scanOAuthAuthorization(row interface{ Scan(...any) error }) (OAuthAuthorization, error) {
	var a OAuthAuthorization
	var scopes string
	var created, expires int64
	var grant sql.NullString
	var codeExpires sql.NullInt64
	err := row.Scan(&a.ID, &a.ClientID, &a.RedirectURI, &scopes, &a.ClientState, &a.CodeChallenge, &a.Resource, &a.Status,
		&created, &expires, &grant, &codeExpires)
	if errors.Is(err, sql.ErrNoRows) {
		return a, ErrNotFound
	}
	a.Scopes = strings.Fields(scopes)
	a.CreatedAt, a.ExpiresAt = time.UnixMicro(created).UTC(), time.UnixMicro(expires).UTC()
	a.GrantID = grant.String
	if codeExpires.Valid {
		a.CodeExpiresAt = time.UnixMicro(codeExpires.Int64).UTC()
	}
	return a, err
}

const oauthTokenQuery = `SELECT t.kind, t.grant_id, t.scopes, t.created_at, t.expires_at, t.rotated_at, t.revoked_at,
	g.client_id, g.org_id, g.human_id, g.scopes, g.resource, g.created_at, g.revoked_at
	FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id WHERE t.token_hash = ?`

func scanOAuthToken(row interface{ Scan(...any) error }) (OAuthToken, error) {
	var t OAuthToken
	var created, expires, gcreated int64
	var rotated, revoked, grevoked sql.NullInt64
	var scopes, tokenScopes string
	err := row.Scan(&t.Kind, &t.GrantID, &tokenScopes, &created, &expires, &rotated, &revoked,
		&t.Grant.ClientID, &t.Grant.OrgID, &t.Grant.HumanID, &scopes, &t.Grant.Resource, &gcreated, &grevoked)
	if errors.Is(err, sql.ErrNoRows) {
		return t, ErrNotFound
	}
	if err != nil {
		return t, err
	}
	t.CreatedAt, t.ExpiresAt = time.UnixMicro(created).UTC(), time.UnixMicro(expires).UTC()
	t.RotatedAt, t.RevokedAt = optionalTime(rotated), optionalTime(revoked)
	t.Grant.ID = t.GrantID
	t.Scopes = strings.Fields(tokenScopes)
	t.Grant.Scopes = strings.Fields(scopes)
	t.Grant.CreatedAt = time.UnixMicro(gcreated).UTC()
	t.Grant.RevokedAt = optionalTime(grevoked)
	return t, nil
}

func optionalTime(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := time.UnixMicro(v.Int64).UTC()
	return &t
}

// CreateOAuthClient stores a registered client.
func (db OAuth) CreateClient(ctx context.Context, c OAuthClient) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO oauth_clients (id, name, redirect_uris, created_at) VALUES (?, ?, ?, ?)`),
		c.ID, c.Name, strings.Join(c.RedirectURIs, "\n"), c.CreatedAt.UnixMicro())
	return err
}

// GetOAuthClient reads a client.
func (db OAuth) Client(ctx context.Context, id string) (OAuthClient, error) {
	var c OAuthClient
	var uris string
	var created int64
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT id, name, redirect_uris, created_at FROM oauth_clients WHERE id = ?`), id).
		Scan(&c.ID, &c.Name, &uris, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return c, ErrNotFound
	}
	if uris != "" {
		// Split would make one empty URI of none.
		c.RedirectURIs = strings.Split(uris, "\n")
	}
	c.CreatedAt = time.UnixMicro(created).UTC()
	return c, err
}

// CreateOAuthAuthorization stores a pending authorization request.
func (db OAuth) CreateAuthorization(ctx context.Context, a OAuthAuthorization) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO oauth_authorizations (id, client_id, redirect_uri, scopes, client_state, code_challenge, resource, status, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)`),
		a.ID, a.ClientID, a.RedirectURI, strings.Join(a.Scopes, " "), a.ClientState, a.CodeChallenge, a.Resource,
		a.CreatedAt.UnixMicro(), a.ExpiresAt.UnixMicro())
	return err
}

// GetOAuthAuthorization reads an authorization request by id.
func (db OAuth) Authorization(ctx context.Context, id string) (OAuthAuthorization, error) {
	return scanOAuthAuthorization(db.ex.QueryRowContext(ctx, db.q(`SELECT `+oauthAuthorizationCols+` FROM oauth_authorizations WHERE id = ?`), id))
}

// LockOAuthAuthorization reads an authorization request inside a
// transaction, locking its row on PostgreSQL.
func (db OAuth) LockAuthorization(ctx context.Context, id string) (OAuthAuthorization, error) {
	return scanOAuthAuthorization(db.ex.QueryRowContext(ctx, db.q(`SELECT `+oauthAuthorizationCols+` FROM oauth_authorizations WHERE id = ?`+db.forUpdate()), id))
}

// LockOAuthAuthorizationByCode finds the authorization a code belongs to,
// whatever its status, locking its row on PostgreSQL.
func (db OAuth) LockAuthorizationByCode(ctx context.Context, codeHash string) (OAuthAuthorization, error) {
	return scanOAuthAuthorization(db.ex.QueryRowContext(ctx, db.q(`SELECT `+oauthAuthorizationCols+` FROM oauth_authorizations WHERE code_hash = ?`+db.forUpdate()), codeHash))
}

// ApproveOAuthAuthorization moves a pending, unexpired request to approved
// with its grant and code; ErrConflict if it was decided or expired.
func (db OAuth) ApproveAuthorization(ctx context.Context, id, grantID, codeHash string, codeExpires, now time.Time) error {
	return db.expectOne(db.ex.ExecContext(ctx, db.q(`UPDATE oauth_authorizations SET status = 'approved', decided_at = ?, grant_id = ?, code_hash = ?, code_expires_at = ?
		WHERE id = ? AND status = 'pending' AND expires_at > ?`), now.UnixMicro(), grantID, codeHash, codeExpires.UnixMicro(), id, now.UnixMicro()))
}

// DenyOAuthAuthorization moves a pending request to denied; ErrConflict if
// it was already decided.
func (db OAuth) DenyAuthorization(ctx context.Context, id string, now time.Time) error {
	return db.expectOne(db.ex.ExecContext(ctx, db.q(`UPDATE oauth_authorizations SET status = 'denied', decided_at = ? WHERE id = ? AND status = 'pending'`),
		now.UnixMicro(), id))
}

// SpendOAuthCode marks an approved authorization's code exchanged: the
// compare-and-set that makes a code work once.
func (db OAuth) SpendCode(ctx context.Context, id string) error {
	return db.expectOne(db.ex.ExecContext(ctx, db.q(`UPDATE oauth_authorizations SET status = 'exchanged' WHERE id = ? AND status = 'approved'`), id))
}

func (db OAuth) expectOne(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrConflict
	}
	return nil
}

// CreateOAuthGrant stores a grant.
func (db OAuth) CreateGrant(ctx context.Context, g OAuthGrant) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO oauth_grants (id, client_id, org_id, human_id, scopes, resource, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`),
		g.ID, g.ClientID, g.OrgID, g.HumanID, strings.Join(g.Scopes, " "), g.Resource, g.CreatedAt.UnixMicro())
	return err
}

// GetOAuthGrant reads a grant inside a transaction.
func (db OAuth) Grant(ctx context.Context, id string) (OAuthGrant, error) {
	var g OAuthGrant
	var scopes string
	var created int64
	var revoked sql.NullInt64
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT id, client_id, org_id, human_id, scopes, resource, created_at, revoked_at FROM oauth_grants WHERE id = ?`), id).
		Scan(&g.ID, &g.ClientID, &g.OrgID, &g.HumanID, &scopes, &g.Resource, &created, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return g, ErrNotFound
	}
	g.Scopes = strings.Fields(scopes)
	g.CreatedAt = time.UnixMicro(created).UTC()
	g.RevokedAt = optionalTime(revoked)
	return g, err
}

// RevokeOAuthGrant ends a grant and every token descending from it. It is
// a no-op on a grant already revoked.
func (db OAuth) RevokeGrant(ctx context.Context, id, reason string, now time.Time) (revoked bool, err error) {
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE oauth_grants SET revoked_at = ?, revoke_reason = ? WHERE id = ? AND revoked_at IS NULL`), now.UnixMicro(), reason, id)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	if _, err := db.ex.ExecContext(ctx, db.q(`UPDATE oauth_tokens SET revoked_at = ? WHERE grant_id = ? AND revoked_at IS NULL`), now.UnixMicro(), id); err != nil {
		return false, err
	}
	return n == 1, nil
}

// CreateOAuthToken stores a token by the hash of its secret.
func (db OAuth) CreateToken(ctx context.Context, hash, grantID, kind string, scopes []string, now, expires time.Time) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO oauth_tokens (token_hash, grant_id, kind, scopes, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`),
		hash, grantID, kind, strings.Join(scopes, " "), now.UnixMicro(), expires.UnixMicro())
	return err
}

// OAuthTokenByHash finds a token and its grant by the hash of its secret,
// whatever its state: callers decide what expiry and revocation mean.
func (db OAuth) TokenByHash(ctx context.Context, hash string) (OAuthToken, error) {
	return scanOAuthToken(db.ex.QueryRowContext(ctx, db.q(oauthTokenQuery), hash))
}

// LockOAuthToken is OAuthTokenByHash inside a transaction, locking the
// token's row on PostgreSQL.
func (db OAuth) LockToken(ctx context.Context, hash string) (OAuthToken, error) {
	q := oauthTokenQuery
	if db.store.engine == Postgres {
		q += " FOR UPDATE OF t"
	}
	return scanOAuthToken(db.ex.QueryRowContext(ctx, db.q(q), hash))
}

// RotateOAuthToken spends a refresh token; ErrConflict if it was already
// spent or revoked, which the caller treats as replay.
func (db OAuth) RotateToken(ctx context.Context, hash string, now time.Time) error {
	return db.expectOne(db.ex.ExecContext(ctx, db.q(`UPDATE oauth_tokens SET rotated_at = ? WHERE token_hash = ? AND kind = 'refresh' AND rotated_at IS NULL AND revoked_at IS NULL`),
		now.UnixMicro(), hash))
}

// RevokeOAuthToken revokes one token.
func (db OAuth) RevokeToken(ctx context.Context, hash string, now time.Time) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE oauth_tokens SET revoked_at = ? WHERE token_hash = ? AND revoked_at IS NULL`), now.UnixMicro(), hash)
	return err
}

// PurgeOAuth drops authorization requests and tokens that expired more
// than a day ago; grants stay, as the ledger names them.
func (db OAuth) Purge(ctx context.Context, now time.Time) (int64, error) {
	cutoff := now.Add(-24 * time.Hour).UnixMicro()
	var total int64
	for _, q := range []string{
		`DELETE FROM oauth_tokens WHERE expires_at < ?`,
		`DELETE FROM oauth_authorizations WHERE expires_at < ? AND (code_expires_at IS NULL OR code_expires_at < ?)`,
	} {
		args := []any{cutoff}
		if strings.Count(q, "?") == 2 {
			args = append(args, cutoff)
		}
		res, err := db.ex.ExecContext(ctx, db.q(q), args...)
		if err != nil {
			return total, err
		}
		n, _ := res.RowsAffected()
		total += n
	}
	return total, nil
}
