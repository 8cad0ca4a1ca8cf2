package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// SandboxSession is a fake-money sandbox session. The agent capability is
// kept only as its SHA-256.
type SandboxSession struct {
	ID             string
	CapabilityHash string
	// RegistrationHash is the SHA-256 of the secret the holder presents to
	// register the mandate, returned once to the session's creator.
	RegistrationHash string
	// Reference marks the session the server ran itself to mint the
	// reference release.
	Reference bool
	CreatedAt time.Time
	// The mandate, empty until the holder registers one.
	MandateJWS       string
	MandateSHA256    string
	HolderThumbprint string
	IssuerKID        string
	MandateExpiresAt time.Time
	// BudgetMicro is the mandate's amount; CommittedMicro is what charged
	// attempts and open or approved gates hold of it.
	BudgetMicro    int64
	CommittedMicro int64
	AttemptCount   int
	ProofID        string
}

// SandboxAttempt is one attempt with its issuer-signed receipt.
type SandboxAttempt struct {
	ID            string
	SessionID     string
	Seq           int
	Scenario      string
	AmountMicro   int64
	RequestDigest string
	Outcome       string
	Receipt       string
	CreatedAt     time.Time
}

// Gate states.
const (
	GateOpen    = "open"
	GateDecided = "decided"
	GateExpired = "expired"
)

// SandboxGate is the gate an approval attempt opens, and the decision it
// got.
type SandboxGate struct {
	ID            string
	SessionID     string
	AttemptID     string
	Seq           int
	RequestDigest string
	Nonce         string
	// ExpiresText is the expiry exactly as the holder signs it.
	ExpiresText    string
	ExpiresAt      time.Time
	State          string
	DecisionJWS    string
	DecisionSHA256 string
	DecidedOutcome string
	DecidedAt      time.Time
}

const sandboxSessionColumns = `id, capability_hash, reference, created_at, mandate_jws, mandate_sha256, holder_thumbprint,
	issuer_kid, mandate_expires_at, budget_micro, committed_micro, attempt_count, proof_id, registration_hash`

type rowScanner interface{ Scan(dest ...any) error }

func scanSandboxSession(r rowScanner) (SandboxSession, error) {
	var (
		s                                SandboxSession
		ref                              int
		created                          int64
		jws, digest, thumb, kid, proofID sql.NullString
		expires                          sql.NullInt64
	)
	err := r.Scan(&s.ID, &s.CapabilityHash, &ref, &created, &jws, &digest, &thumb, &kid, &expires,
		&s.BudgetMicro, &s.CommittedMicro, &s.AttemptCount, &proofID, &s.RegistrationHash)
	if errors.Is(err, sql.ErrNoRows) {
		return s, ErrNotFound
	}
	if err != nil {
		return s, err
	}
	s.Reference = ref != 0
	s.CreatedAt = time.UnixMicro(created).UTC()
	s.MandateJWS, s.MandateSHA256, s.HolderThumbprint, s.IssuerKID = jws.String, digest.String, thumb.String, kid.String
	if expires.Valid {
		s.MandateExpiresAt = time.UnixMicro(expires.Int64).UTC()
	}
	s.ProofID = proofID.String
	return s, nil
}

// CreateSandboxSession inserts a session without a mandate.
func (s *Store) CreateSandboxSession(ctx context.Context, sess SandboxSession) error {
	ref := 0
	if sess.Reference {
		ref = 1
	}
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO sandbox_sessions (id, capability_hash, reference, created_at, registration_hash) VALUES (?, ?, ?, ?, ?)`),
		sess.ID, sess.CapabilityHash, ref, sess.CreatedAt.UnixMicro(), sess.RegistrationHash)
	return err
}

// GetSandboxSession reads a session.
func (s *Store) GetSandboxSession(ctx context.Context, id string) (SandboxSession, error) {
	return scanSandboxSession(s.db.QueryRowContext(ctx, s.q(`SELECT `+sandboxSessionColumns+` FROM sandbox_sessions WHERE id = ?`), id))
}

// RegisterSandboxMandate records the session's mandate, once: it reports
// false when the session already has one (or does not exist), so that of
// two concurrent registrations exactly one wins.
func (s *Store) RegisterSandboxMandate(ctx context.Context, sess SandboxSession) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE sandbox_sessions
		SET mandate_jws = ?, mandate_sha256 = ?, holder_thumbprint = ?, issuer_kid = ?, mandate_expires_at = ?, budget_micro = ?
		WHERE id = ? AND mandate_jws IS NULL`),
		sess.MandateJWS, sess.MandateSHA256, sess.HolderThumbprint, sess.IssuerKID, sess.MandateExpiresAt.UnixMicro(), sess.BudgetMicro, sess.ID)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// SandboxAttempts lists a session's attempts in the order they were made.
func (s *Store) SandboxAttempts(ctx context.Context, sessionID string) ([]SandboxAttempt, error) {
	return sandboxAttempts(ctx, s.db, s.q, sessionID)
}

// SandboxGates lists a session's gates in the order they were opened.
func (s *Store) SandboxGates(ctx context.Context, sessionID string) ([]SandboxGate, error) {
	return sandboxGates(ctx, s.db, s.q, sessionID, "")
}

// GetSandboxGate reads one gate of a session.
func (s *Store) GetSandboxGate(ctx context.Context, sessionID, gateID string) (SandboxGate, error) {
	gs, err := sandboxGates(ctx, s.db, s.q, sessionID, gateID)
	if err != nil {
		return SandboxGate{}, err
	}
	if len(gs) == 0 {
		return SandboxGate{}, ErrNotFound
	}
	return gs[0], nil
}

// SandboxProof returns a minted proof, the bytes exactly as signed.
func (s *Store) SandboxProof(ctx context.Context, proofID string) ([]byte, error) {
	var b []byte
	err := s.db.QueryRowContext(ctx, s.q(`SELECT proof FROM sandbox_proofs WHERE id = ?`), proofID).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return b, err
}

type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func sandboxAttempts(ctx context.Context, db queryer, q func(string) string, sessionID string) ([]SandboxAttempt, error) {
	rows, err := db.QueryContext(ctx, q(`SELECT id, session_id, seq, scenario, amount_micro, request_digest, outcome, receipt, created_at
		FROM sandbox_attempts WHERE session_id = ? ORDER BY seq`), sessionID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SandboxAttempt
	for rows.Next() {
		var a SandboxAttempt
		var created int64
		if err := rows.Scan(&a.ID, &a.SessionID, &a.Seq, &a.Scenario, &a.AmountMicro, &a.RequestDigest, &a.Outcome, &a.Receipt, &created); err != nil {
			return nil, err
		}
		a.CreatedAt = time.UnixMicro(created).UTC()
		out = append(out, a)
	}
	return out, rows.Err()
}

func sandboxGates(ctx context.Context, db queryer, q func(string) string, sessionID, gateID string) ([]SandboxGate, error) {
	query := `SELECT id, session_id, attempt_id, seq, request_digest, nonce, expires_text, expires_at, state,
		decision_jws, decision_sha256, decided_outcome, decided_at FROM sandbox_gates WHERE session_id = ?`
	args := []any{sessionID}
	if gateID != "" {
		query += ` AND id = ?`
		args = append(args, gateID)
	}
	rows, err := db.QueryContext(ctx, q(query+` ORDER BY seq`), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SandboxGate
	for rows.Next() {
		var g SandboxGate
		var expires int64
		var jws, digest, outcome sql.NullString
		var decided sql.NullInt64
		if err := rows.Scan(&g.ID, &g.SessionID, &g.AttemptID, &g.Seq, &g.RequestDigest, &g.Nonce, &g.ExpiresText, &expires, &g.State,
			&jws, &digest, &outcome, &decided); err != nil {
			return nil, err
		}
		g.ExpiresAt = time.UnixMicro(expires).UTC()
		g.DecisionJWS, g.DecisionSHA256, g.DecidedOutcome = jws.String, digest.String, outcome.String
		if decided.Valid {
			g.DecidedAt = time.UnixMicro(decided.Int64).UTC()
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// SandboxTx is a transaction that holds one session's row lock, so that
// checking the mandate's remaining budget and debiting it, or checking a
// gate and deciding it, cannot interleave with another request on the same
// session.
type SandboxTx struct {
	tx *sql.Tx
	s  *Store
}

// InSandboxSession runs fn in a transaction holding the session's lock:
// SELECT … FOR UPDATE on PostgreSQL; on SQLite the transaction takes the
// database write lock at BEGIN (_txlock=immediate). fn's error rolls back.
func (s *Store) InSandboxSession(ctx context.Context, id string, fn func(tx *SandboxTx, sess *SandboxSession) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	lock := ""
	if s.engine == Postgres {
		lock = " FOR UPDATE"
	}
	sess, err := scanSandboxSession(tx.QueryRowContext(ctx, s.q(`SELECT `+sandboxSessionColumns+` FROM sandbox_sessions WHERE id = ?`+lock), id))
	if err != nil {
		return err
	}
	if err := fn(&SandboxTx{tx: tx, s: s}, &sess); err != nil {
		return err
	}
	return tx.Commit()
}

// Attempts lists the session's attempts inside the transaction.
func (t *SandboxTx) Attempts(ctx context.Context, sessionID string) ([]SandboxAttempt, error) {
	return sandboxAttempts(ctx, t.tx, t.s.q, sessionID)
}

// Gates lists the session's gates inside the transaction.
func (t *SandboxTx) Gates(ctx context.Context, sessionID string) ([]SandboxGate, error) {
	return sandboxGates(ctx, t.tx, t.s.q, sessionID, "")
}

// ExpireGates marks the session's open gates whose expiry has passed as
// expired and returns how much of the mandate they held.
func (t *SandboxTx) ExpireGates(ctx context.Context, sessionID string, now time.Time) (int64, error) {
	var held sql.NullInt64
	err := t.tx.QueryRowContext(ctx, t.s.q(`SELECT SUM(a.amount_micro) FROM sandbox_gates g JOIN sandbox_attempts a ON a.id = g.attempt_id
		WHERE g.session_id = ? AND g.state = 'open' AND g.expires_at < ?`), sessionID, now.UnixMicro()).Scan(&held)
	if err != nil {
		return 0, err
	}
	if _, err := t.tx.ExecContext(ctx, t.s.q(`UPDATE sandbox_gates SET state = 'expired' WHERE session_id = ? AND state = 'open' AND expires_at < ?`),
		sessionID, now.UnixMicro()); err != nil {
		return 0, err
	}
	return held.Int64, nil
}

// InsertAttempt records an attempt and, for an approval, the gate it opens.
func (t *SandboxTx) InsertAttempt(ctx context.Context, a SandboxAttempt, g *SandboxGate) error {
	_, err := t.tx.ExecContext(ctx, t.s.q(`INSERT INTO sandbox_attempts
		(id, session_id, seq, scenario, amount_micro, request_digest, outcome, receipt, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		a.ID, a.SessionID, a.Seq, a.Scenario, a.AmountMicro, a.RequestDigest, a.Outcome, a.Receipt, a.CreatedAt.UnixMicro())
	if err != nil || g == nil {
		return err
	}
	_, err = t.tx.ExecContext(ctx, t.s.q(`INSERT INTO sandbox_gates
		(id, session_id, attempt_id, seq, request_digest, nonce, expires_text, expires_at, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'open')`),
		g.ID, g.SessionID, g.AttemptID, g.Seq, g.RequestDigest, g.Nonce, g.ExpiresText, g.ExpiresAt.UnixMicro())
	return err
}

// SetBudget stores what the session's mandate holds and how many attempts
// it has seen. The table's check constraint refuses a commitment beyond
// the mandate, whatever the caller computed.
func (t *SandboxTx) SetBudget(ctx context.Context, sessionID string, committedMicro int64, attempts int) error {
	_, err := t.tx.ExecContext(ctx, t.s.q(`UPDATE sandbox_sessions SET committed_micro = ?, attempt_count = ? WHERE id = ?`),
		committedMicro, attempts, sessionID)
	return err
}

// DecideGate records the first decision on an open gate that has not
// expired at decidedAt (compare-and-set); it reports false when the gate
// was no longer open.
func (t *SandboxTx) DecideGate(ctx context.Context, g SandboxGate) (bool, error) {
	res, err := t.tx.ExecContext(ctx, t.s.q(`UPDATE sandbox_gates
		SET state = 'decided', decision_jws = ?, decision_sha256 = ?, decided_outcome = ?, decided_at = ?
		WHERE id = ? AND session_id = ? AND state = 'open' AND expires_at >= ?`),
		g.DecisionJWS, g.DecisionSHA256, g.DecidedOutcome, g.DecidedAt.UnixMicro(), g.ID, g.SessionID, g.DecidedAt.UnixMicro())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// InsertProof stores a minted proof and names it on its session.
func (t *SandboxTx) InsertProof(ctx context.Context, sessionID, proofID string, proof []byte, now time.Time) error {
	if _, err := t.tx.ExecContext(ctx, t.s.q(`INSERT INTO sandbox_proofs (id, session_id, proof, created_at) VALUES (?, ?, ?, ?)`),
		proofID, sessionID, proof, now.UnixMicro()); err != nil {
		return err
	}
	res, err := t.tx.ExecContext(ctx, t.s.q(`UPDATE sandbox_sessions SET proof_id = ? WHERE id = ? AND proof_id IS NULL`), proofID, sessionID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("store: session %s already has a proof", sessionID)
	}
	return nil
}

// SandboxKey returns a stored private key by name (PostgreSQL keeps the
// sandbox's keys in the database so that replicas share them).
func (s *Store) SandboxKey(ctx context.Context, name string) (string, error) {
	var jwk string
	err := s.db.QueryRowContext(ctx, s.q(`SELECT private_jwk FROM sandbox_keys WHERE name = ?`), name).Scan(&jwk)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	return jwk, err
}

// PutSandboxKeyIfAbsent stores a key under name unless one is there already;
// of replicas racing to create it, one wins and all read the winner's.
func (s *Store) PutSandboxKeyIfAbsent(ctx context.Context, name, privateJWK string, now time.Time) error {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO sandbox_keys (name, private_jwk, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`),
		name, privateJWK, now.UnixMicro())
	return err
}

// SandboxReleaseFile is one file of a reference release.
type SandboxReleaseFile struct {
	Path        string
	ContentType string
	SHA256      string
	Body        []byte
}

// SandboxRelease is one immutable reference release.
type SandboxRelease struct {
	// ID is the SHA-256 of the manifest, so a release is named by what it
	// says.
	ID        string
	ProofID   string
	Manifest  []byte
	CreatedAt time.Time
	Files     []SandboxReleaseFile
}

// WriteSandboxRelease writes a release's files and manifest. Writing the
// same release again changes nothing. It does not publish the release.
func (s *Store) WriteSandboxRelease(ctx context.Context, r SandboxRelease) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, f := range r.Files {
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO sandbox_release_files (release_id, path, content_type, sha256, body)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (release_id, path) DO NOTHING`), r.ID, f.Path, f.ContentType, f.SHA256, f.Body); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO sandbox_releases (id, proof_id, manifest, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`), r.ID, r.ProofID, r.Manifest, r.CreatedAt.UnixMicro()); err != nil {
		return err
	}
	return tx.Commit()
}

// PublishSandboxRelease points the public hosts at a written release, after
// checking that every one of want's paths is stored with its hash. Unless
// replace is set, an existing publication is kept and its id returned.
func (s *Store) PublishSandboxRelease(ctx context.Context, id string, want map[string]string, replace bool, now time.Time) (string, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, s.q(`SELECT path, sha256 FROM sandbox_release_files WHERE release_id = ?`), id)
	if err != nil {
		return "", err
	}
	have := map[string]string{}
	for rows.Next() {
		var p, h string
		if err := rows.Scan(&p, &h); err != nil {
			rows.Close()
			return "", err
		}
		have[p] = h
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", err
	}
	for p, h := range want {
		if have[p] != h {
			return "", fmt.Errorf("store: release %s: %s is not in place", id, p)
		}
	}
	var n int
	if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM sandbox_releases WHERE id = ?`), id).Scan(&n); err != nil || n != 1 {
		return "", fmt.Errorf("store: release %s has no manifest: %v", id, err)
	}
	if replace {
		_, err = tx.ExecContext(ctx, s.q(`INSERT INTO sandbox_reference (singleton, release_id, published_at) VALUES (1, ?, ?)
			ON CONFLICT (singleton) DO UPDATE SET release_id = excluded.release_id, published_at = excluded.published_at`), id, now.UnixMicro())
	} else {
		_, err = tx.ExecContext(ctx, s.q(`INSERT INTO sandbox_reference (singleton, release_id, published_at) VALUES (1, ?, ?)
			ON CONFLICT (singleton) DO NOTHING`), id, now.UnixMicro())
	}
	if err != nil {
		return "", err
	}
	var current string
	if err := tx.QueryRowContext(ctx, `SELECT release_id FROM sandbox_reference WHERE singleton = 1`).Scan(&current); err != nil {
		return "", err
	}
	return current, tx.Commit()
}

// CurrentSandboxRelease is the id of the published release.
func (s *Store) CurrentSandboxRelease(ctx context.Context) (string, error) {
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT release_id FROM sandbox_reference WHERE singleton = 1`).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	return id, err
}

// GetSandboxRelease reads a release with its files.
func (s *Store) GetSandboxRelease(ctx context.Context, id string) (SandboxRelease, error) {
	r := SandboxRelease{ID: id}
	var created int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT proof_id, manifest, created_at FROM sandbox_releases WHERE id = ?`), id).
		Scan(&r.ProofID, &r.Manifest, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	if err != nil {
		return r, err
	}
	r.CreatedAt = time.UnixMicro(created).UTC()
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT path, content_type, sha256, body FROM sandbox_release_files WHERE release_id = ? ORDER BY path`), id)
	if err != nil {
		return r, err
	}
	defer rows.Close()
	for rows.Next() {
		var f SandboxReleaseFile
		if err := rows.Scan(&f.Path, &f.ContentType, &f.SHA256, &f.Body); err != nil {
			return r, err
		}
		r.Files = append(r.Files, f)
	}
	return r, rows.Err()
}

// DeleteSandboxRelease removes a written release that was never published
// (the loser of two replicas publishing at once).
func (s *Store) DeleteSandboxRelease(ctx context.Context, id string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM sandbox_reference WHERE release_id = ?`), id).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("store: release %s is published", id)
	}
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM sandbox_releases WHERE id = ?`), id); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM sandbox_release_files WHERE release_id = ?`), id); err != nil {
		return err
	}
	return tx.Commit()
}
