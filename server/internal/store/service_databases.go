package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// ServiceDatabase is a service's managed PostgreSQL database and role.
type ServiceDatabase struct {
	ServiceID, OrgID, Name, Password, State, DumpSHA string
	CreatedAt                                        time.Time
}

// InsertDatabase records a service's database before it is created, so a
// retry creates the same one.
func (db Services) InsertDatabase(ctx context.Context, d ServiceDatabase) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO service_databases (service_id, org_id, name, password, state, created_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (service_id) DO NOTHING`), d.ServiceID, d.OrgID, d.Name, d.Password, d.State, d.CreatedAt.UnixMicro())
	return err
}

// Database reads a service's database.
func (db Services) Database(ctx context.Context, serviceID string) (ServiceDatabase, error) {
	var d ServiceDatabase
	var created int64
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT service_id, org_id, name, password, state, COALESCE(dump_sha, ''), created_at FROM service_databases WHERE service_id = ?`), serviceID).
		Scan(&d.ServiceID, &d.OrgID, &d.Name, &d.Password, &d.State, &d.DumpSHA, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return d, ErrNotFound
	}
	d.CreatedAt = time.UnixMicro(created).UTC()
	return d, err
}

// SetDatabaseState moves a database's state, with the dump's hash once
// taken.
func (db Services) SetDatabaseState(ctx context.Context, serviceID, state, dumpSHA string) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE service_databases SET state = ?, dump_sha = COALESCE(?, dump_sha) WHERE service_id = ?`), state, nullable(dumpSHA), serviceID)
	return err
}
