package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// ServiceVersion is one immutable, numbered version of a service.
type ServiceVersion struct {
	ServiceID, OrgID string
	Number           int
	BundleID         string
	// Spec is the version's command, variables, health check and add-ons
	// as JSON.
	Spec      string
	State     string // starting, live, superseded, failed
	TaskID    string
	Detail    string
	CreatedAt time.Time
}

const versionCols = `service_id, org_id, number, COALESCE(bundle_id, ''), spec, state, COALESCE(task_id, ''), COALESCE(detail, ''), created_at`

func scanVersion(row interface{ Scan(...any) error }) (ServiceVersion, error) {
	var v ServiceVersion
	var created int64
	err := row.Scan(&v.ServiceID, &v.OrgID, &v.Number, &v.BundleID, &v.Spec, &v.State, &v.TaskID, &v.Detail, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return v, ErrNotFound
	}
	v.CreatedAt = time.UnixMicro(created).UTC()
	return v, err
}

// Insert records a version; ErrConflict when its number is taken (and the
// caller's transaction, on either engine, goes on).
func (db ServiceVersions) Insert(ctx context.Context, v ServiceVersion) error {
	return insertedOne(db.ex.ExecContext(ctx, db.q(`INSERT INTO service_versions (service_id, org_id, number, bundle_id, spec, state, task_id, detail, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`), v.ServiceID, v.OrgID, v.Number, nullable(v.BundleID), v.Spec, v.State, nullable(v.TaskID), nullable(v.Detail), v.CreatedAt.UnixMicro()))
}

// Next is the number the service's next version takes.
func (db ServiceVersions) Next(ctx context.Context, serviceID string) (int, error) {
	var n sql.NullInt64
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT MAX(number) FROM service_versions WHERE service_id = ?`), serviceID).Scan(&n)
	return int(n.Int64) + 1, err
}

// Get reads one version of a service.
func (db ServiceVersions) Get(ctx context.Context, serviceID string, number int) (ServiceVersion, error) {
	return scanVersion(db.ex.QueryRowContext(ctx, db.q(`SELECT `+versionCols+` FROM service_versions WHERE service_id = ? AND number = ?`), serviceID, number))
}

// List lists a service's versions, newest first, at most limit.
func (db ServiceVersions) List(ctx context.Context, serviceID string, limit int) ([]ServiceVersion, error) {
	return collect(ctx, db.ex, scanVersion, db.q(`SELECT `+versionCols+` FROM service_versions WHERE service_id = ? ORDER BY number DESC LIMIT ?`), serviceID, limit)
}

// SetState moves a version's state, with a detail when it failed.
func (db ServiceVersions) SetState(ctx context.Context, serviceID string, number int, state, detail string) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE service_versions SET state = ?, detail = ? WHERE service_id = ? AND number = ?`), state, nullable(detail), serviceID, number)
	return err
}
