package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
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

// InsertVersion records a version; ErrConflict when its number is taken.
func (db Services) InsertVersion(ctx context.Context, v ServiceVersion) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO service_versions (service_id, org_id, number, bundle_id, spec, state, task_id, detail, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`), v.ServiceID, v.OrgID, v.Number, nullable(v.BundleID), v.Spec, v.State, nullable(v.TaskID), nullable(v.Detail), v.CreatedAt.UnixMicro())
	if isUniqueViolation(err) {
		return ErrConflict
	}
	return err
}

// NextVersion is the number the service's next version takes.
func (db Services) NextVersion(ctx context.Context, serviceID string) (int, error) {
	var n sql.NullInt64
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT MAX(number) FROM service_versions WHERE service_id = ?`), serviceID).Scan(&n)
	return int(n.Int64) + 1, err
}

// Version reads one version of a service.
func (db Services) Version(ctx context.Context, serviceID string, number int) (ServiceVersion, error) {
	return scanVersion(db.ex.QueryRowContext(ctx, db.q(`SELECT `+versionCols+` FROM service_versions WHERE service_id = ? AND number = ?`), serviceID, number))
}

// Versions lists a service's versions, newest first, at most limit.
func (db Services) Versions(ctx context.Context, serviceID string, limit int) ([]ServiceVersion, error) {
	return collect(ctx, db.ex, scanVersion, db.q(`SELECT `+versionCols+` FROM service_versions WHERE service_id = ? ORDER BY number DESC LIMIT ?`), serviceID, limit)
}

// SetVersionState moves a version's state, with a detail when it failed.
func (db Services) SetVersionState(ctx context.Context, serviceID string, number int, state, detail string) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE service_versions SET state = ?, detail = ? WHERE service_id = ? AND number = ?`), state, nullable(detail), serviceID, number)
	return err
}

// Serve switches a service's traffic to a version: its bundle, where it
// answers, its state. The version before it, if live, is superseded.
func (db Services) Serve(ctx context.Context, id string, version int, bundleID, upstream, runner string, now time.Time) error {
	return db.atomically(ctx, func(tx *Tx) error {
		c := tx.Services()
		if _, err := c.ex.ExecContext(ctx, c.q(`UPDATE service_versions SET state = 'superseded' WHERE service_id = ? AND state = 'live' AND number <> ?`), id, version); err != nil {
			return err
		}
		if _, err := c.ex.ExecContext(ctx, c.q(`UPDATE service_versions SET state = 'live', detail = NULL WHERE service_id = ? AND number = ?`), id, version); err != nil {
			return err
		}
		_, err := c.ex.ExecContext(ctx, c.q(`UPDATE services SET version = ?, bundle_id = ?, upstream = ?, runner = ?, runner_seen = ?, state = 'live', updated_at = ? WHERE id = ?`),
			version, nullable(bundleID), nullable(upstream), nullable(runner), now.UnixMicro(), now.UnixMicro(), id)
		return err
	})
}

// SetUpstream records where a service's serving version answers now (after
// it was started again, on a new port) and which replica runs it.
func (db Services) SetUpstream(ctx context.Context, id, upstream, runner string, now time.Time) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE services SET upstream = ?, runner = ?, runner_seen = ?, updated_at = ? WHERE id = ?`),
		nullable(upstream), nullable(runner), now.UnixMicro(), now.UnixMicro(), id)
	return err
}

// SetHealth records the serving version's health, and the state it puts
// the service in (live, crashed) when state is not empty.
func (db Services) SetHealth(ctx context.Context, id, health, state string, now time.Time) error {
	if state == "" {
		_, err := db.ex.ExecContext(ctx, db.q(`UPDATE services SET health = ? WHERE id = ?`), health, id)
		return err
	}
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE services SET health = ?, state = ?, updated_at = ? WHERE id = ? AND state IN ('live', 'crashed')`),
		health, state, now.UnixMicro(), id)
	return err
}

// Adopt gives runner the live process and worker services no replica
// supervises: those with no runner, those runner had before it restarted,
// and those whose runner was last seen before stale. It returns every
// service runner now holds.
func (db Services) Adopt(ctx context.Context, runner string, stale, now time.Time) ([]Service, error) {
	if _, err := db.ex.ExecContext(ctx, db.q(`UPDATE services SET runner = ?, runner_seen = ?
		WHERE target IN ('process', 'worker') AND state = 'live' AND version > 0 AND (runner IS NULL OR runner = ? OR runner_seen < ?)`),
		runner, now.UnixMicro(), runner, stale.UnixMicro()); err != nil {
		return nil, err
	}
	return collect(ctx, db.ex, scanService, db.q(`SELECT `+serviceCols+` FROM services WHERE runner = ? AND state = 'live' AND target IN ('process', 'worker')`), runner)
}

// Heartbeat says runner still supervises what it holds.
func (db Services) Heartbeat(ctx context.Context, runner string, now time.Time) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE services SET runner_seen = ? WHERE runner = ?`), now.UnixMicro(), runner)
	return err
}

// LogLine is one line of a service's log.
type LogLine struct {
	ServiceID string
	Seq       int64
	At        time.Time
	Stream    string
	Version   int
	Text      string
}

// LogQuery selects log lines: after a sequence number, since a time, of a
// version; Limit lines at most, the newest when Tail.
type LogQuery struct {
	After   int64
	Since   time.Time
	Version int
	Limit   int
	Tail    bool
}

// AppendLogs writes log lines.
func (db Services) AppendLogs(ctx context.Context, lines []LogLine) error {
	if len(lines) == 0 {
		return nil
	}
	return db.atomically(ctx, func(tx *Tx) error {
		c := tx.Services()
		var b strings.Builder
		b.WriteString(`INSERT INTO service_logs (service_id, seq, at, stream, version, text) VALUES `)
		args := make([]any, 0, len(lines)*6)
		for i, l := range lines {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?, ?)")
			args = append(args, l.ServiceID, l.Seq, l.At.UnixMicro(), l.Stream, l.Version, l.Text)
		}
		b.WriteString(` ON CONFLICT (service_id, seq) DO NOTHING`)
		query := b.String()
		if c.store.engine == Postgres {
			// Not kept in the rewrite table: the statement's length varies.
			query = dollarPlaceholders(query)
		}
		_, err := c.ex.ExecContext(ctx, query, args...)
		return err
	})
}

// LastLogSeq is the highest sequence number of a service's lines.
func (db Services) LastLogSeq(ctx context.Context, serviceID string) (int64, error) {
	var n sql.NullInt64
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT MAX(seq) FROM service_logs WHERE service_id = ?`), serviceID).Scan(&n)
	return n.Int64, err
}

// TrimLogs keeps a service's newest keep lines.
func (db Services) TrimLogs(ctx context.Context, serviceID string, keep int64) error {
	last, err := db.LastLogSeq(ctx, serviceID)
	if err != nil || last <= keep {
		return err
	}
	_, err = db.ex.ExecContext(ctx, db.q(`DELETE FROM service_logs WHERE service_id = ? AND seq <= ?`), serviceID, last-keep)
	return err
}

// DeleteLogs removes a service's lines.
func (db Services) DeleteLogs(ctx context.Context, serviceID string) error {
	_, err := db.ex.ExecContext(ctx, db.q(`DELETE FROM service_logs WHERE service_id = ?`), serviceID)
	return err
}

// Logs reads a service's lines, oldest first.
func (db Services) Logs(ctx context.Context, serviceID string, q LogQuery) ([]LogLine, error) {
	order := "ASC"
	if q.Tail {
		order = "DESC"
	}
	if q.Limit <= 0 || q.Limit > 5000 {
		q.Limit = 200
	}
	var since int64
	if !q.Since.IsZero() {
		since = q.Since.UnixMicro()
	}
	out, err := collect(ctx, db.ex, func(r interface{ Scan(...any) error }) (LogLine, error) {
		var l LogLine
		var at int64
		err := r.Scan(&l.ServiceID, &l.Seq, &at, &l.Stream, &l.Version, &l.Text)
		l.At = time.UnixMicro(at).UTC()
		return l, err
	}, db.q(`SELECT service_id, seq, at, stream, version, text FROM service_logs
		WHERE service_id = ? AND seq > ? AND at >= ? AND (? = 0 OR version = ?) ORDER BY seq `+order+` LIMIT ?`),
		serviceID, q.After, since, q.Version, q.Version, q.Limit)
	if q.Tail {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out, err
}

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

// OrgDatabases lists an organisation's databases (for its leave package).
func (db Services) OrgDatabases(ctx context.Context, orgID string) ([]ServiceDatabase, error) {
	return collect(ctx, db.ex, func(r interface{ Scan(...any) error }) (ServiceDatabase, error) {
		var d ServiceDatabase
		var created int64
		err := r.Scan(&d.ServiceID, &d.OrgID, &d.Name, &d.Password, &d.State, &d.DumpSHA, &created)
		d.CreatedAt = time.UnixMicro(created).UTC()
		return d, err
	}, db.q(`SELECT service_id, org_id, name, password, state, COALESCE(dump_sha, ''), created_at FROM service_databases WHERE org_id = ? ORDER BY created_at`), orgID)
}

// SetDatabaseState moves a database's state, with the dump's hash once
// taken.
func (db Services) SetDatabaseState(ctx context.Context, serviceID, state, dumpSHA string) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE service_databases SET state = ?, dump_sha = COALESCE(?, dump_sha) WHERE service_id = ?`), state, nullable(dumpSHA), serviceID)
	return err
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
