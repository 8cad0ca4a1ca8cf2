package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// RateLimits are GCRA buckets shared by every replica on the database.
type RateLimits struct{ conn }

// Take spends one request from key's bucket: interval is the time one
// request costs and tolerance how far ahead of now the bucket may run (the
// burst). It answers whether the request is allowed and the bucket's
// theoretical arrival time after it, in one atomic statement.
func (db RateLimits) Take(ctx context.Context, key string, now time.Time, interval, tolerance time.Duration) (allowed bool, tat time.Time, err error) {
	n, iv, tol := now.UnixMicro(), interval.Microseconds(), tolerance.Microseconds()
	var t int64
	err = db.ex.QueryRowContext(ctx, db.q(`INSERT INTO rate_limits (key, tat) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET tat = (CASE WHEN rate_limits.tat > ? THEN rate_limits.tat ELSE ? END) + ?
		WHERE (CASE WHEN rate_limits.tat > ? THEN rate_limits.tat ELSE ? END) - ? <= ?
		RETURNING tat`), key, n+iv, n, n, iv, n, n, n, tol).Scan(&t)
	if errors.Is(err, sql.ErrNoRows) {
		// Over the limit: nothing moved; read where the bucket stands.
		if err := db.ex.QueryRowContext(ctx, db.q(`SELECT tat FROM rate_limits WHERE key = ?`), key).Scan(&t); err != nil {
			return false, time.Time{}, err
		}
		return false, time.UnixMicro(t), nil
	}
	if err != nil {
		return false, time.Time{}, err
	}
	return true, time.UnixMicro(t), nil
}

// Purge drops buckets that have been full for an hour.
func (db RateLimits) Purge(ctx context.Context, now time.Time) error {
	_, err := db.ex.ExecContext(ctx, db.q(`DELETE FROM rate_limits WHERE tat < ?`), now.Add(-time.Hour).UnixMicro())
	return err
}
