package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Signup is an account an agent asked for and a human reviews.
type Signup struct {
	ID, SecretHash, ReviewHash string
	Email, OrgName             string
	State                      string // pending_review, pending_card, complete, claimed
	OrgID, ProjectID, HumanID  string
	SetupID, KeyID             string
	CreatedAt, ExpiresAt       time.Time
	ReviewedAt, CompletedAt    *time.Time
	ClaimedAt                  *time.Time
}

// BillingSetup is one card flow.
type BillingSetup struct {
	ID, OrgID, SecretHash string
	Reason                string // signup, scratch_account, expired_card, replace_card
	SignupID              string
	State                 string // pending, declined, complete
	DeclineCode           string
	PaymentMethodID       string
	CreatedAt, ExpiresAt  time.Time
	CompletedAt           *time.Time
}

// PaymentMethod is a card on file: brand and last four digits only.
type PaymentMethod struct {
	ID, OrgID, Brand, Last4 string
	ExpMonth, ExpYear       int
	State                   string // active, replaced
	CreatedAt               time.Time
}

func microPtr(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := time.UnixMicro(v.Int64).UTC()
	return &t
}

const signupCols = `id, secret_hash, review_hash, email, org_name, state, COALESCE(org_id, ''), COALESCE(project_id, ''), COALESCE(human_id, ''),
	COALESCE(setup_id, ''), COALESCE(key_id, ''), created_at, expires_at, reviewed_at, completed_at, claimed_at`

func scanSignup(row interface{ Scan(...any) error }) (Signup, error) {
	var s Signup
	var created, expires int64
	var reviewed, completed, claimed sql.NullInt64
	err := row.Scan(&s.ID, &s.SecretHash, &s.ReviewHash, &s.Email, &s.OrgName, &s.State, &s.OrgID, &s.ProjectID, &s.HumanID,
		&s.SetupID, &s.KeyID, &created, &expires, &reviewed, &completed, &claimed)
	if errors.Is(err, sql.ErrNoRows) {
		return s, ErrNotFound
	}
	s.CreatedAt, s.ExpiresAt = time.UnixMicro(created).UTC(), time.UnixMicro(expires).UTC()
	s.ReviewedAt, s.CompletedAt, s.ClaimedAt = microPtr(reviewed), microPtr(completed), microPtr(claimed)
	return s, err
}

const setupCols = `id, org_id, secret_hash, reason, COALESCE(signup_id, ''), state, decline_code, COALESCE(payment_method_id, ''), created_at, expires_at, completed_at`

func scanSetup(row interface{ Scan(...any) error }) (BillingSetup, error) {
	var b BillingSetup
	var created, expires int64
	var completed sql.NullInt64
	err := row.Scan(&b.ID, &b.OrgID, &b.SecretHash, &b.Reason, &b.SignupID, &b.State, &b.DeclineCode, &b.PaymentMethodID, &created, &expires, &completed)
	if errors.Is(err, sql.ErrNoRows) {
		return b, ErrNotFound
	}
	b.CreatedAt, b.ExpiresAt, b.CompletedAt = time.UnixMicro(created).UTC(), time.UnixMicro(expires).UTC(), microPtr(completed)
	return b, err
}

// CreateSignup records a signup waiting for review.
func (db Onboarding) CreateSignup(ctx context.Context, su Signup) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO signups (id, secret_hash, review_hash, email, org_name, state, created_at, expires_at) VALUES (?, ?, ?, ?, ?, 'pending_review', ?, ?)`),
		su.ID, su.SecretHash, su.ReviewHash, su.Email, su.OrgName, su.CreatedAt.UnixMicro(), su.ExpiresAt.UnixMicro())
	return err
}

// GetSignup reads a signup by id.
func (db Onboarding) Signup(ctx context.Context, id string) (Signup, error) {
	return scanSignup(db.ex.QueryRowContext(ctx, db.q(`SELECT `+signupCols+` FROM signups WHERE id = ?`), id))
}

// SignupByReviewHash finds the signup a review URL names.
func (db Onboarding) SignupByReviewHash(ctx context.Context, hash string) (Signup, error) {
	return scanSignup(db.ex.QueryRowContext(ctx, db.q(`SELECT `+signupCols+` FROM signups WHERE review_hash = ?`), hash))
}

// LockSignup reads a signup and locks it.
func (db Onboarding) LockSignup(ctx context.Context, id string) (Signup, error) {
	return scanSignup(db.ex.QueryRowContext(ctx, db.q(`SELECT `+signupCols+` FROM signups WHERE id = ?`+db.forUpdate()), id))
}

// ReviewSignup is the compare-and-set of a human's approval: a signup still
// pending review (and not expired) moves to pending_card with what the
// review created. ErrConflict if it was already reviewed or has expired.
func (db Onboarding) ReviewSignup(ctx context.Context, su Signup, now time.Time) error {
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE signups SET state = 'pending_card', org_id = ?, project_id = ?, human_id = ?, setup_id = ?, reviewed_at = ?
		WHERE id = ? AND state = 'pending_review' AND expires_at > ?`),
		su.OrgID, su.ProjectID, su.HumanID, su.SetupID, now.UnixMicro(), su.ID, now.UnixMicro())
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrConflict
	}
	return nil
}

// CompleteSignup moves a signup whose card succeeded to complete.
func (db Onboarding) CompleteSignup(ctx context.Context, id string, now time.Time) error {
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE signups SET state = 'complete', completed_at = ? WHERE id = ? AND state = 'pending_card'`), now.UnixMicro(), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrConflict
	}
	return nil
}

// ClaimSignup is the compare-and-set that lets exactly one poll mint the
// key: complete -> claimed. ErrConflict for every other poll.
func (db Onboarding) ClaimSignup(ctx context.Context, id, keyID string, now time.Time) error {
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE signups SET state = 'claimed', key_id = ?, claimed_at = ? WHERE id = ? AND state = 'complete'`), keyID, now.UnixMicro(), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrConflict
	}
	return nil
}

// CreateBillingSetup records a pending card flow.
func (db Onboarding) CreateBillingSetup(ctx context.Context, b BillingSetup) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO billing_setups (id, org_id, secret_hash, reason, signup_id, state, created_at, expires_at) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)`),
		b.ID, b.OrgID, b.SecretHash, b.Reason, nullable(b.SignupID), b.CreatedAt.UnixMicro(), b.ExpiresAt.UnixMicro())
	return err
}

// GetBillingSetup reads a card flow of the organisation.
func (db Onboarding) BillingSetup(ctx context.Context, orgID, id string) (BillingSetup, error) {
	return scanSetup(db.ex.QueryRowContext(ctx, db.q(`SELECT `+setupCols+` FROM billing_setups WHERE id = ? AND org_id = ?`), id, orgID))
}

// LockBillingSetup reads a card flow of the organisation and locks it.
func (db Onboarding) LockBillingSetup(ctx context.Context, orgID, id string) (BillingSetup, error) {
	return scanSetup(db.ex.QueryRowContext(ctx, db.q(`SELECT `+setupCols+` FROM billing_setups WHERE id = ? AND org_id = ?`+db.forUpdate()), id, orgID))
}

// DeclineBillingSetup records a refused card on a flow still open.
func (db Onboarding) DeclineBillingSetup(ctx context.Context, id, code string) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE billing_setups SET state = 'declined', decline_code = ? WHERE id = ? AND state IN ('pending', 'declined')`), code, id)
	return err
}

// CompleteBillingSetup is the compare-and-set that closes a flow with the
// card it added; ErrConflict if it was already complete.
func (db Onboarding) CompleteBillingSetup(ctx context.Context, id, paymentMethodID string, now time.Time) error {
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE billing_setups SET state = 'complete', decline_code = '', payment_method_id = ?, completed_at = ? WHERE id = ? AND state IN ('pending', 'declined')`),
		paymentMethodID, now.UnixMicro(), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrConflict
	}
	return nil
}

// AddPaymentMethod makes a card the organisation's active one, retiring
// the one before it.
func (db Onboarding) AddPaymentMethod(ctx context.Context, pm PaymentMethod) error {
	if _, err := db.ex.ExecContext(ctx, db.q(`UPDATE payment_methods SET state = 'replaced' WHERE org_id = ? AND state = 'active'`), pm.OrgID); err != nil {
		return err
	}
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO payment_methods (id, org_id, brand, last4, exp_month, exp_year, state, created_at) VALUES (?, ?, ?, ?, ?, ?, 'active', ?)`),
		pm.ID, pm.OrgID, pm.Brand, pm.Last4, pm.ExpMonth, pm.ExpYear, pm.CreatedAt.UnixMicro())
	return err
}

// ActivePaymentMethod returns the organisation's card on file.
func (db Onboarding) ActivePaymentMethod(ctx context.Context, orgID string) (PaymentMethod, error) {
	var pm PaymentMethod
	var created int64
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT id, org_id, brand, last4, exp_month, exp_year, state, created_at FROM payment_methods WHERE org_id = ? AND state = 'active' ORDER BY created_at DESC LIMIT 1`), orgID).
		Scan(&pm.ID, &pm.OrgID, &pm.Brand, &pm.Last4, &pm.ExpMonth, &pm.ExpYear, &pm.State, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return pm, ErrNotFound
	}
	pm.CreatedAt = time.UnixMicro(created).UTC()
	return pm, err
}
