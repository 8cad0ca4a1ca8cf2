package store

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"time"

	"github.com/pierhq/pier/server/internal/money"
)

// Project is a billing group with a budget (micro-USD) and a policy (JSON,
// owned by the service layer).
type Project struct {
	ID, OrgID, Name string
	LimitMicro      money.MicroUSD
	SpentMicro      money.MicroUSD
	HeldMicro       money.MicroUSD
	Policy          string
	CreatedAt       time.Time
	// ParentID is the project a child carved its budget from; empty for
	// an organisation's own projects.
	ParentID string
	// DeletedAt is when a deleted project was deleted; Deletion is the
	// deletion's answer (JSON, owned by the service layer).
	DeletedAt *time.Time
	Deletion  string
	// HoldsExpireAt: no held quote of the project expires before it, so
	// there are no lapsed holds to settle until then (the zero time:
	// look now).
	HoldsExpireAt time.Time
}

const projectCols = `id, org_id, name, budget_limit_micro, spent_micro, held_micro, policy, created_at, COALESCE(parent_id, ''), deleted_at, COALESCE(deletion, ''), holds_expire_at`

func scanProject(row interface{ Scan(...any) error }) (Project, error) {
	var p Project
	var created, holdsExpire int64
	var deleted sql.NullInt64
	err := row.Scan(&p.ID, &p.OrgID, &p.Name, &p.LimitMicro, &p.SpentMicro, &p.HeldMicro, &p.Policy, &created, &p.ParentID, &deleted, &p.Deletion, &holdsExpire)
	if errors.Is(err, sql.ErrNoRows) {
		return p, ErrNotFound
	}
	p.CreatedAt = time.UnixMicro(created).UTC()
	p.HoldsExpireAt = time.UnixMicro(holdsExpire).UTC()
	if deleted.Valid {
		t := time.UnixMicro(deleted.Int64).UTC()
		p.DeletedAt = &t
	}
	return p, err
}

// CreateProject inserts a project, a child of p.ParentID when set.
func (db Projects) Create(ctx context.Context, p Project) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO projects (id, org_id, name, budget_limit_micro, spent_micro, held_micro, policy, created_at, parent_id, holds_expire_at)
		VALUES (?, ?, ?, ?, 0, 0, ?, ?, ?, ?)`),
		p.ID, p.OrgID, p.Name, p.LimitMicro, p.Policy, p.CreatedAt.UnixMicro(), nullable(p.ParentID), noHoldExpires)
	return err
}

// Children lists the projects carved from a project that are not
// deleted, oldest first.
func (db Projects) Children(ctx context.Context, orgID, parentID string) ([]Project, error) {
	return collect(ctx, db.ex, scanProject, db.q(`SELECT `+projectCols+` FROM projects
		WHERE org_id = ? AND parent_id = ? AND deleted_at IS NULL ORDER BY created_at, id`), orgID, parentID)
}

// MarkDeleted records a locked project's deletion and its answer;
// ErrConflict when it was deleted already. The row stays, for the
// receipts and ledger entries that name it.
func (db Projects) MarkDeleted(ctx context.Context, projectID, deletion string, now time.Time) error {
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE projects SET deleted_at = ?, deletion = ? WHERE id = ? AND deleted_at IS NULL`),
		now.UnixMicro(), deletion, projectID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrConflict
	}
	return nil
}

// LockProject reads a project of the organisation and locks it for the
// rest of the transaction.
func (db Projects) Lock(ctx context.Context, orgID, id string) (Project, error) {
	return scanProject(db.ex.QueryRowContext(ctx, db.q(`SELECT `+projectCols+` FROM projects WHERE id = ? AND org_id = ?`+db.forUpdate()), id, orgID))
}

// GetProject reads a project of the organisation.
func (db Projects) Get(ctx context.Context, orgID, id string) (Project, error) {
	return scanProject(db.ex.QueryRowContext(ctx, db.q(`SELECT `+projectCols+` FROM projects WHERE id = ? AND org_id = ?`), id, orgID))
}

// ListProjects lists an organisation's projects, oldest first; deleted
// ones are left out.
func (db Projects) List(ctx context.Context, orgID string) ([]Project, error) {
	return collect(ctx, db.ex, scanProject, db.q(`SELECT `+projectCols+` FROM projects WHERE org_id = ? AND deleted_at IS NULL ORDER BY created_at, id`), orgID)
}

// Page lists a page of an organisation's projects, oldest first, after
// f.After; deleted ones are left out.
func (db Projects) Page(ctx context.Context, orgID string, f Filter) ([]Project, error) {
	return collect(ctx, db.ex, scanProject, db.q(`SELECT `+projectCols+` FROM projects
		WHERE org_id = ? AND deleted_at IS NULL AND `+afterCondOldest("id")+` ORDER BY created_at, id LIMIT ?`), append(append([]any{orgID}, f.afterArgs()...), f.limit())...)
}

// MoveMoney changes a locked project's held and spent amounts by the given
// deltas. The database refuses (ErrBudget) a result over the limit.
func (db Projects) MoveMoney(ctx context.Context, projectID string, heldDelta, spentDelta money.MicroUSD) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE projects SET held_micro = held_micro + ?, spent_micro = spent_micro + ? WHERE id = ?`),
		heldDelta, spentDelta, projectID)
	if isCheckViolation(err) {
		return ErrBudget
	}
	return err
}

// Hold moves amount of a locked project's budget into held, for a quote
// whose hold lapses at expires, which the project's HoldsExpireAt then
// does not pass. The database refuses (ErrBudget) a result over the limit.
func (db Projects) Hold(ctx context.Context, projectID string, amount money.MicroUSD, expires time.Time) error {
	least := "MIN"
	if db.store.engine == Postgres {
		least = "LEAST"
	}
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE projects SET held_micro = held_micro + ?, holds_expire_at = `+least+`(holds_expire_at, ?) WHERE id = ?`),
		amount, expires.UnixMicro(), projectID)
	if isCheckViolation(err) {
		return ErrBudget
	}
	return err
}

// noHoldExpires is HoldsExpireAt for a project without held quotes.
const noHoldExpires = int64(math.MaxInt64)

// RecountHoldsExpire sets a locked project's HoldsExpireAt to when its
// first held quote expires (far in the future when none is held), after
// its lapsed holds are settled, and returns it.
func (db Projects) RecountHoldsExpire(ctx context.Context, projectID string) (time.Time, error) {
	var at int64
	err := db.ex.QueryRowContext(ctx, db.q(`UPDATE projects SET holds_expire_at = COALESCE((SELECT MIN(expires_at) FROM quotes WHERE project_id = ? AND state = 'held'), ?)
		WHERE id = ? RETURNING holds_expire_at`), projectID, noHoldExpires, projectID).Scan(&at)
	return time.UnixMicro(at).UTC(), err
}

// SetBudgetLimit changes a locked project's limit; ErrBudget when below
// what is spent and held.
func (db Projects) SetBudgetLimit(ctx context.Context, projectID string, limit money.MicroUSD) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE projects SET budget_limit_micro = ? WHERE id = ?`), limit, projectID)
	if isCheckViolation(err) {
		return ErrBudget
	}
	return err
}
