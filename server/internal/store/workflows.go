package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Workflow is a prepared plan: its canonical bytes, their digest and
// signature, and the projection shown to a human. TaskID is set once, when
// it is applied.
type Workflow struct {
	ID, OrgID, ProjectID string
	// Caller is who prepared it: the key or grant, as "key:…" or "grant:…".
	Caller     string
	Digest     string
	Plan       string // canonical JSON
	SignedPlan string // compact JWS over Plan
	KeyID      string
	Projection string // JSON
	TaskID     string
	CreatedAt  time.Time
	AppliedAt  *time.Time
}

const workflowCols = `id, org_id, project_id, caller, digest, plan, signed_plan, key_id, projection, COALESCE(task_id, ''), created_at, applied_at`

func scanWorkflow(row interface{ Scan(...any) error }) (Workflow, error) {
	var w Workflow
	var created int64
	var applied sql.NullInt64
	err := row.Scan(&w.ID, &w.OrgID, &w.ProjectID, &w.Caller, &w.Digest, &w.Plan, &w.SignedPlan, &w.KeyID, &w.Projection, &w.TaskID, &created, &applied)
	if errors.Is(err, sql.ErrNoRows) {
		return w, ErrNotFound
	}
	w.CreatedAt = time.UnixMicro(created).UTC()
	if applied.Valid {
		t := time.UnixMicro(applied.Int64).UTC()
		w.AppliedAt = &t
	}
	return w, err
}

// Insert stores a prepared workflow.
func (db Workflows) Insert(ctx context.Context, w Workflow) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO workflows (id, org_id, project_id, caller, digest, plan, signed_plan, key_id, projection, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		w.ID, w.OrgID, w.ProjectID, w.Caller, w.Digest, w.Plan, w.SignedPlan, w.KeyID, w.Projection, w.CreatedAt.UnixMicro())
	return err
}

// Get reads a workflow of the organisation.
func (db Workflows) Get(ctx context.Context, orgID, id string) (Workflow, error) {
	return scanWorkflow(db.ex.QueryRowContext(ctx, db.q(`SELECT `+workflowCols+` FROM workflows WHERE id = ? AND org_id = ?`), id, orgID))
}

// Lock reads a workflow of the organisation and locks it for the rest of
// the transaction.
func (db Workflows) Lock(ctx context.Context, orgID, id string) (Workflow, error) {
	return scanWorkflow(db.ex.QueryRowContext(ctx, db.q(`SELECT `+workflowCols+` FROM workflows WHERE id = ? AND org_id = ?`+db.forUpdate()), id, orgID))
}

// ByTask finds the workflow a task applies.
func (db Workflows) ByTask(ctx context.Context, taskID string) (Workflow, error) {
	return scanWorkflow(db.ex.QueryRowContext(ctx, db.q(`SELECT `+workflowCols+` FROM workflows WHERE task_id = ?`), taskID))
}

// MarkApplied is the compare-and-set that applies a workflow once: it sets
// the task unless one is set, and reports whether this call set it.
func (db Workflows) MarkApplied(ctx context.Context, id, taskID string, now time.Time) (bool, error) {
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE workflows SET task_id = ?, applied_at = ? WHERE id = ? AND task_id IS NULL`), taskID, now.UnixMicro(), id)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// Count counts an organisation's workflows.
func (db Workflows) Count(ctx context.Context, orgID string) (int, error) {
	var n int
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT COUNT(*) FROM workflows WHERE org_id = ?`), orgID).Scan(&n)
	return n, err
}
