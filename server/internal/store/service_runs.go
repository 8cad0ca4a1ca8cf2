package store

import (
	"context"
	"time"
)

// Serve switches a service's traffic to a version: its bundle, where it
// answers, its state. The version before it, if live, is superseded.
func (db ServiceRuns) Serve(ctx context.Context, id string, version int, bundleID, upstream, runner string, now time.Time) error {
	return db.atomically(ctx, func(tx *Tx) error {
		c := tx.ServiceRuns()
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
func (db ServiceRuns) SetUpstream(ctx context.Context, id, upstream, runner string, now time.Time) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE services SET upstream = ?, runner = ?, runner_seen = ?, updated_at = ? WHERE id = ?`),
		nullable(upstream), nullable(runner), now.UnixMicro(), now.UnixMicro(), id)
	return err
}

// SetHealth records the serving version's health, and the state it puts
// the service in (live, crashed) when state is not empty.
func (db ServiceRuns) SetHealth(ctx context.Context, id, health, state string, now time.Time) error {
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
func (db ServiceRuns) Adopt(ctx context.Context, runner string, stale, now time.Time) ([]Service, error) {
	if _, err := db.ex.ExecContext(ctx, db.q(`UPDATE services SET runner = ?, runner_seen = ?
		WHERE target IN ('process', 'worker') AND state = 'live' AND version > 0 AND (runner IS NULL OR runner = ? OR runner_seen < ?)`),
		runner, now.UnixMicro(), runner, stale.UnixMicro()); err != nil {
		return nil, err
	}
	return collect(ctx, db.ex, scanService, db.q(`SELECT `+serviceCols+` FROM services WHERE runner = ? AND state = 'live' AND target IN ('process', 'worker')`), runner)
}

// Heartbeat says runner still supervises what it holds.
func (db ServiceRuns) Heartbeat(ctx context.Context, runner string, now time.Time) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE services SET runner_seen = ? WHERE runner = ?`), now.UnixMicro(), runner)
	return err
}
