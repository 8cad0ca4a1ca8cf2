package store

import (
	"context"
	"database/sql"
	"errors"
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
}

const projectCols = `id, org_id, name, budget_limit_micro, spent_micro, held_micro, policy, created_at`

func scanProject(row interface{ Scan(...any) error }) (Project, error) {
	var p Project
	var created int64
	err := row.Scan(&p.ID, &p.OrgID, &p.Name, &p.LimitMicro, &p.SpentMicro, &p.HeldMicro, &p.Policy, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return p, ErrNotFound
	}
	p.CreatedAt = time.UnixMicro(created).UTC()
	return p, err
}

// CreateProject inserts a project.
func (db Projects) Create(ctx context.Context, p Project) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO projects (`+projectCols+`) VALUES (?, ?, ?, ?, 0, 0, ?, ?)`),
		p.ID, p.OrgID, p.Name, p.LimitMicro, p.Policy, p.CreatedAt.UnixMicro())
	return err
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

// ListProjects lists an organisation's projects, oldest first.
func (db Projects) List(ctx context.Context, orgID string) ([]Project, error) {
	return collect(ctx, db.ex, scanProject, db.q(`SELECT `+projectCols+` FROM projects WHERE org_id = ? ORDER BY created_at, id`), orgID)
}

// Page lists a page of an organisation's projects, oldest first, after
// f.After.
func (db Projects) Page(ctx context.Context, orgID string, f Filter) ([]Project, error) {
	return collect(ctx, db.ex, scanProject, db.q(`SELECT `+projectCols+` FROM projects
		WHERE org_id = ? AND `+afterCondOldest("id")+` ORDER BY created_at, id LIMIT ?`), append(append([]any{orgID}, f.afterArgs()...), f.limit())...)
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

// SetBudgetLimit changes a locked project's limit; ErrBudget when below
// what is spent and held.
func (db Projects) SetBudgetLimit(ctx context.Context, projectID string, limit money.MicroUSD) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE projects SET budget_limit_micro = ? WHERE id = ?`), limit, projectID)
	if isCheckViolation(err) {
		return ErrBudget
	}
	return err
}
