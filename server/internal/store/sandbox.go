package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/pierhq/pier/server/internal/money"
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
	BudgetMicro    money.MicroUSD
	CommittedMicro money.MicroUSD
	AttemptCount   int
	ProofID        string
}

// SandboxAttempt is one attempt with its issuer-signed receipt.
type SandboxAttempt struct {
	ID            string
	SessionID     string
	Seq           int
	Scenario      string
	AmountMicro   money.MicroUSD
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
func (t *SandboxTx) ExpireGates(ctx context.Context, sessionID string, now time.Time) (money.MicroUSD, error) {
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
	return money.MicroUSD(held.Int64), nil
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
// it has seen. The table's check constraint refuses (ErrBudget) a
// commitment beyond the mandate, whatever the caller computed.
func (t *SandboxTx) SetBudget(ctx context.Context, sessionID string, committedMicro money.MicroUSD, attempts int) error {
	_, err := t.tx.ExecContext(ctx, t.s.q(`UPDATE sandbox_sessions SET committed_micro = ?, attempt_count = ? WHERE id = ?`),
		committedMicro, attempts, sessionID)
	if isCheckViolation(err) {
		return ErrBudget
	}
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

// CreateSandboxSession inserts a session without a mandate.
func (db Sandbox) CreateSession(ctx context.Context, sess SandboxSession) error {
	ref := 0
	if sess.Reference {
		ref = 1
	}
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO sandbox_sessions (id, capability_hash, reference, created_at, registration_hash) VALUES (?, ?, ?, ?, ?)`),
		sess.ID, sess.CapabilityHash, ref, sess.CreatedAt.UnixMicro(), sess.RegistrationHash)
	return err
}

// GetSandboxSession reads a session.
func (db Sandbox) Session(ctx context.Context, id string) (SandboxSession, error) {
	return scanSandboxSession(db.ex.QueryRowContext(ctx, db.q(`SELECT `+sandboxSessionColumns+` FROM sandbox_sessions WHERE id = ?`), id))
}

// RegisterSandboxMandate records the session's mandate, once: it reports
// false when the session already has one (or does not exist), so that of
// two concurrent registrations exactly one wins.
func (db Sandbox) RegisterMandate(ctx context.Context, sess SandboxSession) (bool, error) {
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE sandbox_sessions
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
func (db Sandbox) Attempts(ctx context.Context, sessionID string) ([]SandboxAttempt, error) {
	return sandboxAttempts(ctx, db.ex, db.q, sessionID)
}

// SandboxGates lists a session's gates in the order they were opened.
func (db Sandbox) Gates(ctx context.Context, sessionID string) ([]SandboxGate, error) {
	return sandboxGates(ctx, db.ex, db.q, sessionID, "")
}

// GetSandboxGate reads one gate of a session.
func (db Sandbox) Gate(ctx context.Context, sessionID, gateID string) (SandboxGate, error) {
	gs, err := sandboxGates(ctx, db.ex, db.q, sessionID, gateID)
	if err != nil {
		return SandboxGate{}, err
	}
	if len(gs) == 0 {
		return SandboxGate{}, ErrNotFound
	}
	return gs[0], nil
}

// SandboxProof returns a minted proof, the bytes exactly as signed.
func (db Sandbox) Proof(ctx context.Context, proofID string) ([]byte, error) {
	var b []byte
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT proof FROM sandbox_proofs WHERE id = ?`), proofID).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return b, err
}

// InSandboxSession runs fn in a transaction holding the session's lock:
// SELECT … FOR UPDATE on PostgreSQL; on SQLite the transaction takes the
// database write lock at BEGIN (_txlock=immediate). fn's error rolls back.
func (db Sandbox) InSession(ctx context.Context, id string, fn func(tx *SandboxTx, sess *SandboxSession) error) error {
	tx, err := db.begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	lock := ""
	if db.store.engine == Postgres {
		lock = " FOR UPDATE"
	}
	sess, err := scanSandboxSession(tx.QueryRowContext(ctx, db.q(`SELECT `+sandboxSessionColumns+` FROM sandbox_sessions WHERE id = ?`+lock), id))
	if err != nil {
		return err
	}
	if err := fn(&SandboxTx{tx: tx, s: db.store}, &sess); err != nil {
		return err
	}
	return tx.Commit()
}
