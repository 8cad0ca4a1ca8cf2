package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Gate waits for one human decision.
type Gate struct {
	ID, OrgID, TaskID, Kind string
	Payload                 string // JSON
	State                   string // pending, approved, denied
	DecidedBy               string
	DecidedAt               *time.Time
	CreatedAt               time.Time
}

const gateCols = `id, org_id, task_id, kind, payload, state, COALESCE(decided_by, ''), decided_at, created_at`

func scanGate(row interface{ Scan(...any) error }) (Gate, error) {
	var g Gate
	var created int64
	var decided sql.NullInt64
	err := row.Scan(&g.ID, &g.OrgID, &g.TaskID, &g.Kind, &g.Payload, &g.State, &g.DecidedBy, &decided, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return g, ErrNotFound
	}
	g.CreatedAt = time.UnixMicro(created).UTC()
	if decided.Valid {
		t := time.UnixMicro(decided.Int64).UTC()
		g.DecidedAt = &t
	}
	return g, err
}

// InsertGate records a pending gate.
func (db Gates) Insert(ctx context.Context, g Gate) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO gates (id, org_id, task_id, kind, payload, state, created_at) VALUES (?, ?, ?, ?, ?, 'pending', ?)`),
		g.ID, g.OrgID, g.TaskID, g.Kind, g.Payload, g.CreatedAt.UnixMicro())
	return err
}

// DecideGate is the compare-and-set: it moves a pending gate of the
// organisation to approved or denied; ErrConflict if already decided.
func (db Gates) Decide(ctx context.Context, orgID, id, state, decidedBy string, now time.Time) error {
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE gates SET state = ?, decided_by = ?, decided_at = ? WHERE id = ? AND org_id = ? AND state = 'pending'`),
		state, decidedBy, now.UnixMicro(), id, orgID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrConflict
	}
	return nil
}

// GetGate reads a gate of the organisation.
func (db Gates) Get(ctx context.Context, orgID, id string) (Gate, error) {
	return scanGate(db.ex.QueryRowContext(ctx, db.q(`SELECT `+gateCols+` FROM gates WHERE id = ? AND org_id = ?`), id, orgID))
}

// PendingGates lists an organisation's undecided gates.
func (db Gates) Pending(ctx context.Context, orgID string) ([]Gate, error) {
	return collect(ctx, db.ex, scanGate, db.q(`SELECT `+gateCols+` FROM gates WHERE org_id = ? AND state = 'pending' ORDER BY created_at, id`), orgID)
}

// LockGate reads a gate of the organisation and locks it.
func (db Gates) Lock(ctx context.Context, orgID, id string) (Gate, error) {
	return scanGate(db.ex.QueryRowContext(ctx, db.q(`SELECT `+gateCols+` FROM gates WHERE id = ? AND org_id = ?`+db.forUpdate()), id, orgID))
}

// PendingInProject lists the undecided gates whose tasks belong to a
// project of the organisation, oldest first.
func (db Gates) PendingInProject(ctx context.Context, orgID, projectID string) ([]Gate, error) {
	return collect(ctx, db.ex, scanGate, db.q(`SELECT g.id, g.org_id, g.task_id, g.kind, g.payload, g.state, COALESCE(g.decided_by, ''), g.decided_at, g.created_at FROM gates g JOIN tasks t ON t.id = g.task_id
		WHERE g.org_id = ? AND t.org_id = g.org_id AND t.project_id = ? AND g.state = 'pending' ORDER BY g.created_at, g.id`), orgID, projectID)
}
