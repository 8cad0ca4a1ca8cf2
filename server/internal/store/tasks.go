package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Task is durable work an agent polls.
type Task struct {
	ID, OrgID, ProjectID, Kind, State string
	Steps                             string // JSON
	GateID                            string
	Payload                           string // JSON inputs and provider references
	Result                            string // JSON, may be empty
	CreatedAt, UpdatedAt              time.Time
}

const taskCols = `id, org_id, COALESCE(project_id, ''), kind, state, steps, COALESCE(gate_id, ''), COALESCE(payload, ''), COALESCE(result, ''), created_at, updated_at`

func scanTask(row interface{ Scan(...any) error }) (Task, error) {
	var t Task
	var created, updated int64
	err := row.Scan(&t.ID, &t.OrgID, &t.ProjectID, &t.Kind, &t.State, &t.Steps, &t.GateID, &t.Payload, &t.Result, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return t, ErrNotFound
	}
	t.CreatedAt = time.UnixMicro(created).UTC()
	t.UpdatedAt = time.UnixMicro(updated).UTC()
	return t, err
}

// TasksOnGate lists the tasks waiting on a gate besides the gate's own.
func (db Tasks) OnGate(ctx context.Context, gateID string) ([]Task, error) {
	return collect(ctx, db.ex, scanTask, db.q(`SELECT `+taskCols+` FROM tasks WHERE gate_id = ? AND kind = 'launch' ORDER BY created_at, id`), gateID)
}

// ListTasksFiltered lists an organisation's tasks.
func (db Tasks) ListFiltered(ctx context.Context, orgID string, f Filter) ([]Task, error) {
	return collect(ctx, db.ex, scanTask, db.q(`SELECT `+taskCols+` FROM tasks
		WHERE org_id = ? AND (? = '' OR state = ?) AND (? = '' OR project_id = ?) AND `+afterCond("id")+`
		ORDER BY created_at DESC, id LIMIT ?`), append(append([]any{orgID, f.State, f.State, f.ProjectID, f.ProjectID}, f.afterArgs()...), f.limit())...)
}

// InsertTask records a task.
func (db Tasks) Insert(ctx context.Context, t Task) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO tasks (id, org_id, project_id, kind, state, steps, gate_id, payload, result, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		t.ID, t.OrgID, nullable(t.ProjectID), t.Kind, t.State, t.Steps, nullable(t.GateID), nullable(t.Payload), nullable(t.Result), t.CreatedAt.UnixMicro(), t.UpdatedAt.UnixMicro())
	return err
}

// UpdateTask stores a task's state, steps and result.
func (db Tasks) Update(ctx context.Context, t Task) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE tasks SET state = ?, steps = ?, gate_id = ?, payload = ?, result = ?, updated_at = ? WHERE id = ?`),
		t.State, t.Steps, nullable(t.GateID), nullable(t.Payload), nullable(t.Result), t.UpdatedAt.UnixMicro(), t.ID)
	return err
}

// UnfinishedTasks lists tasks that a runner should be working on: queued or
// running, for re-enqueueing after a restart.
func (db Tasks) Unfinished(ctx context.Context) ([]Task, error) {
	return collect(ctx, db.ex, scanTask, `SELECT `+taskCols+` FROM tasks WHERE state IN ('queued', 'running') ORDER BY created_at`)
}

// GetTaskAnyOrg reads a task by id, for the runner.
func (db Tasks) GetAnyOrg(ctx context.Context, id string) (Task, error) {
	return scanTask(db.ex.QueryRowContext(ctx, db.q(`SELECT `+taskCols+` FROM tasks WHERE id = ?`), id))
}

// LockTask reads a task and locks it.
func (db Tasks) Lock(ctx context.Context, orgID, id string) (Task, error) {
	return scanTask(db.ex.QueryRowContext(ctx, db.q(`SELECT `+taskCols+` FROM tasks WHERE id = ? AND org_id = ?`+db.forUpdate()), id, orgID))
}

// GetTask reads a task of the organisation.
func (db Tasks) Get(ctx context.Context, orgID, id string) (Task, error) {
	return scanTask(db.ex.QueryRowContext(ctx, db.q(`SELECT `+taskCols+` FROM tasks WHERE id = ? AND org_id = ?`), id, orgID))
}

// ListTasks lists an organisation's newest tasks.
func (db Tasks) List(ctx context.Context, orgID string, limit int) ([]Task, error) {
	return collect(ctx, db.ex, scanTask, db.q(`SELECT `+taskCols+` FROM tasks WHERE org_id = ? ORDER BY created_at DESC, id LIMIT ?`), orgID, limit)
}

// AcquireTaskLease gives owner the right to run a task until the lease
// runs out; false when another owner holds a live lease.
func (db Tasks) AcquireLease(ctx context.Context, id, owner string, now time.Time, ttl time.Duration) (bool, error) {
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE tasks SET lease_owner = ?, lease_until = ?
		WHERE id = ? AND (lease_owner IS NULL OR lease_owner = ? OR lease_until < ?)`),
		owner, now.Add(ttl).UnixMicro(), id, owner, now.UnixMicro())
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// ExpiredLeases lists the unfinished tasks whose runner's lease ran out:
// it died while running them.
func (db Tasks) ExpiredLeases(ctx context.Context, now time.Time) ([]Task, error) {
	return collect(ctx, db.ex, scanTask, db.q(`SELECT `+taskCols+` FROM tasks
		WHERE state IN ('queued', 'running') AND lease_owner IS NOT NULL AND lease_until < ? ORDER BY created_at LIMIT 100`), now.UnixMicro())
}

// ReleaseTaskLease gives a lease up.
func (db Tasks) ReleaseLease(ctx context.Context, id, owner string) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE tasks SET lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ?`), id, owner)
	return err
}

// ClearTaskLeases drops every lease. Only a single-host embedded server may
// call it at start, when no other runner can exist.
func (db Tasks) ClearLeases(ctx context.Context) error {
	_, err := db.ex.ExecContext(ctx, `UPDATE tasks SET lease_owner = NULL, lease_until = NULL WHERE lease_owner IS NOT NULL`)
	return err
}
