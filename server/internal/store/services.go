package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/nameindex"
)

// Service is a named running thing with its own preview host.
type Service struct {
	ID, OrgID, ProjectID, Name, Target, PreviewHost string
	Domain, BundleID                                string
	State                                           string // launching, live, failed, tearing_down, torn_down
	TaskID                                          string
	CreatedAt, UpdatedAt                            time.Time
	// Version is the version serving traffic (0 before the first is live).
	Version int
	// Upstream is where a process's serving version answers (host:port).
	Upstream string
	// Runner is the replica supervising the service's processes, and
	// RunnerSeen when it last said so.
	Runner     string
	RunnerSeen time.Time
	// Health is the serving version's health as JSON.
	Health string
}

const serviceCols = `id, org_id, project_id, name, target, preview_host, COALESCE(domain, ''), COALESCE(bundle_id, ''), state, task_id, created_at, updated_at,
	version, COALESCE(upstream, ''), COALESCE(runner, ''), runner_seen, COALESCE(health, '')`

// serviceColsS is serviceCols for a query that names services s.
const serviceColsS = `s.id, s.org_id, s.project_id, s.name, s.target, s.preview_host, COALESCE(s.domain, ''), COALESCE(s.bundle_id, ''), s.state, s.task_id, s.created_at, s.updated_at,
	s.version, COALESCE(s.upstream, ''), COALESCE(s.runner, ''), s.runner_seen, COALESCE(s.health, '')`

func scanService(row interface{ Scan(...any) error }) (Service, error) {
	var v Service
	var created, updated, seen int64
	err := row.Scan(&v.ID, &v.OrgID, &v.ProjectID, &v.Name, &v.Target, &v.PreviewHost, &v.Domain, &v.BundleID, &v.State, &v.TaskID, &created, &updated,
		&v.Version, &v.Upstream, &v.Runner, &seen, &v.Health)
	if errors.Is(err, sql.ErrNoRows) {
		return v, ErrNotFound
	}
	v.CreatedAt, v.UpdatedAt, v.RunnerSeen = time.UnixMicro(created).UTC(), time.UnixMicro(updated).UTC(), time.UnixMicro(seen).UTC()
	return v, err
}

// ClaimHost gives host to a service; ErrConflict when another service holds
// it. Claiming a host the service already holds is a no-op. The insert never
// violates the key, so a PostgreSQL transaction stays usable after a refusal.
func (db Services) ClaimHost(ctx context.Context, host, serviceID, orgID string, now time.Time) error {
	host = strings.ToLower(host)
	return db.claim(ctx, `INSERT INTO service_hosts (host, service_id, org_id, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (host) DO NOTHING`,
		[]any{host, serviceID, orgID, now.UnixMicro()}, `SELECT service_id FROM service_hosts WHERE host = ?`, host, serviceID)
}

// ReleaseHost gives one host of a service back.
func (db Services) ReleaseHost(ctx context.Context, serviceID, host string) error {
	_, err := db.ex.ExecContext(ctx, db.q(`DELETE FROM service_hosts WHERE service_id = ? AND host = ?`), serviceID, strings.ToLower(host))
	return err
}

// ReleaseHosts gives every host of a service back.
func (db Services) ReleaseHosts(ctx context.Context, serviceID string) error {
	_, err := db.ex.ExecContext(ctx, db.q(`DELETE FROM service_hosts WHERE service_id = ?`), serviceID)
	return err
}

// HostOwner is the service and organisation holding host.
func (db Services) HostOwner(ctx context.Context, host string) (serviceID, orgID string, err error) {
	err = db.ex.QueryRowContext(ctx, db.q(`SELECT service_id, org_id FROM service_hosts WHERE host = ?`), strings.ToLower(host)).Scan(&serviceID, &orgID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", ErrNotFound
	}
	return serviceID, orgID, err
}

// ServiceHosts lists the hosts a service holds.
func (db Services) Hosts(ctx context.Context, serviceID string) ([]string, error) {
	return collect(ctx, db.ex, func(r interface{ Scan(...any) error }) (string, error) {
		var h string
		return h, r.Scan(&h)
	}, db.q(`SELECT host FROM service_hosts WHERE service_id = ? ORDER BY host`), serviceID)
}

// RetireService is RetireService inside a transaction.
func (db Services) Retire(ctx context.Context, id, state string, now time.Time) error {
	return db.atomically(ctx, func(tx *Tx) error {
		if _, err := tx.tx.ExecContext(ctx, db.q(`UPDATE services SET state = ?, updated_at = ? WHERE id = ?`), state, now.UnixMicro(), id); err != nil {
			return err
		}
		return tx.Services().ReleaseHosts(ctx, id)
	})
}

// DetachDomain takes a domain off a service: the service keeps its preview
// host and answers for the domain no more.
func (db Services) DetachDomain(ctx context.Context, serviceID, domain string, now time.Time) error {
	if _, err := db.ex.ExecContext(ctx, db.q(`UPDATE services SET domain = NULL, updated_at = ? WHERE id = ?`), now.UnixMicro(), serviceID); err != nil {
		return err
	}
	if err := db.ReleaseHost(ctx, serviceID, domain); err != nil {
		return err
	}
	return db.ReleaseHost(ctx, serviceID, "www."+domain)
}

// AttachDomain puts a domain on a service: it claims the domain and www.
// under it (ErrConflict when another service holds either) and records
// the domain as the service's.
func (db Services) AttachDomain(ctx context.Context, serviceID, orgID, domain string, now time.Time) error {
	for _, h := range []string{domain, "www." + domain} {
		if err := db.ClaimHost(ctx, h, serviceID, orgID, now); err != nil {
			return err
		}
	}
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE services SET domain = ?, updated_at = ? WHERE id = ?`), domain, now.UnixMicro(), serviceID)
	return err
}

// ListServices lists an organisation's services.
func (db Services) List(ctx context.Context, orgID string, f Filter) ([]Service, error) {
	return collect(ctx, db.ex, scanService, db.q(`SELECT `+serviceCols+` FROM services
		WHERE org_id = ? AND (? = '' OR project_id = ?) AND (? = '' OR state = ?) AND `+afterCond("id")+`
		ORDER BY created_at DESC, id LIMIT ?`), append(append([]any{orgID, f.ProjectID, f.ProjectID, f.State, f.State}, f.afterArgs()...), f.limit())...)
}

// LiveServiceForDomain finds the live service of an organisation that
// serves a domain.
func (db Services) LiveForDomain(ctx context.Context, orgID, domain string) (Service, error) {
	return scanService(db.ex.QueryRowContext(ctx, db.q(`SELECT `+serviceCols+` FROM services
		WHERE org_id = ? AND domain = ? AND state = 'live' ORDER BY updated_at DESC LIMIT 1`), orgID, domain))
}

// InsertService records a service; ErrConflict when the project already has
// a live service of that name or the id is taken. The insert never
// violates a key, so a PostgreSQL transaction stays usable after a
// refusal, as a SQLite one does.
func (db Services) Insert(ctx context.Context, v Service) error {
	res, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO services (id, org_id, project_id, name, target, preview_host, domain, bundle_id, state, task_id, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`),
		v.ID, v.OrgID, v.ProjectID, v.Name, v.Target, v.PreviewHost, nullable(v.Domain), nullable(v.BundleID), v.State, v.TaskID, v.CreatedAt.UnixMicro(), v.UpdatedAt.UnixMicro())
	return insertedOne(res, err)
}

// insertedOne is the answer of an INSERT … ON CONFLICT DO NOTHING of one
// row: ErrConflict when a key kept it out.
func insertedOne(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return errors.Join(ErrConflict, err)
	}
	return nil
}

// SetServiceState updates a service's state.
func (db Services) SetState(ctx context.Context, id, state string, now time.Time) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE services SET state = ?, updated_at = ? WHERE id = ?`), state, now.UnixMicro(), id)
	return err
}

// SetServiceTask points a service at the task now acting on it.
func (db Services) SetTask(ctx context.Context, id, taskID, state string, now time.Time) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE services SET task_id = ?, state = ?, updated_at = ? WHERE id = ?`), taskID, state, now.UnixMicro(), id)
	return err
}

// GetService reads a service of the organisation.
func (db Services) Get(ctx context.Context, orgID, id string) (Service, error) {
	return scanService(db.ex.QueryRowContext(ctx, db.q(`SELECT `+serviceCols+` FROM services WHERE id = ? AND org_id = ?`), id, orgID))
}

// LockService reads a service and locks it.
func (db Services) Lock(ctx context.Context, orgID, id string) (Service, error) {
	return scanService(db.ex.QueryRowContext(ctx, db.q(`SELECT `+serviceCols+` FROM services WHERE id = ? AND org_id = ?`+db.forUpdate()), id, orgID))
}

// ServiceByHost finds the live service a Host header names: the one
// service holding the host (its preview host, its domain or www. under it)
// in service_hosts. No other service answers for it, whichever is newer.
func (db Services) ByHost(ctx context.Context, host string) (Service, error) {
	return scanService(db.ex.QueryRowContext(ctx, db.q(`SELECT `+serviceColsS+` FROM service_hosts h JOIN services s ON s.id = h.service_id
		WHERE h.host = ? AND s.state IN ('live', 'crashed')`), strings.ToLower(host)))
}

// PreviewHostUsed reports whether a service, live or gone, has or had
// host as its preview host.
func (db Services) PreviewHostUsed(ctx context.Context, host string) (bool, error) {
	var one int
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT 1 FROM services WHERE preview_host = ? LIMIT 1`), strings.ToLower(host)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// ProjectServices lists a project's services.
func (db Services) InProject(ctx context.Context, orgID, projectID string) ([]Service, error) {
	return collect(ctx, db.ex, scanService, db.q(`SELECT `+serviceCols+` FROM services WHERE org_id = ? AND project_id = ? ORDER BY created_at, id`), orgID, projectID)
}

// ByName finds the project's service of that name that still holds it
// (not torn down or failed).
func (db Services) ByName(ctx context.Context, orgID, projectID, name string) (Service, error) {
	return scanService(db.ex.QueryRowContext(ctx, db.q(`SELECT `+serviceCols+` FROM services
		WHERE org_id = ? AND project_id = ? AND name = ? AND state NOT IN ('torn_down', 'failed')`+db.forUpdate()), orgID, projectID, name))
}

// GetAnyOrg reads a service whatever its organisation, for the runner.
func (db Services) GetAnyOrg(ctx context.Context, id string) (Service, error) {
	return scanService(db.ex.QueryRowContext(ctx, db.q(`SELECT `+serviceCols+` FROM services WHERE id = ?`), id))
}

// HostsSince lists the hosts services hold that were claimed at or after
// since (microseconds since the epoch; 0 lists them all), with when.
func (db Services) HostsSince(ctx context.Context, since int64) ([]nameindex.Name, error) {
	return collect(ctx, db.ex, scanNamed, db.q(`SELECT host, created_at FROM service_hosts WHERE created_at >= ?`), since)
}
