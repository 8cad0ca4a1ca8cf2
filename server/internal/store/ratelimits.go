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

// TakeUpTo takes as many of want tokens as the bucket has, in one atomic
// statement: it answers how many it took (0 when none is there) and the
// bucket's theoretical arrival time after it. Replicas lease tokens so,
// a batch per write (package ratelimit).
func (db RateLimits) TakeUpTo(ctx context.Context, key string, now time.Time, interval, tolerance time.Duration, want int) (taken int, tat time.Time, err error) {
	n, iv, tol, w := now.UnixMicro(), interval.Microseconds(), tolerance.Microseconds(), int64(want)
	if iv <= 0 || w <= 0 {
		return 0, time.Time{}, errors.New("store: TakeUpTo wants a positive interval and count")
	}
	first := min(w, tol/iv+1) // a new bucket is full
	// base is where the bucket stands now, room how many tokens it has.
	// Parameters in arithmetic are typed: PostgreSQL cannot add two
	// parameters of unknown type.
	const p = `CAST(? AS BIGINT)`
	base := `(CASE WHEN rate_limits.tat > ` + p + ` THEN rate_limits.tat ELSE ` + p + ` END)`
	room := `(CASE WHEN ` + base + ` > ` + p + ` THEN 0 ELSE (` + p + ` - ` + base + `) / ` + p + ` + 1 END)`
	k := `(CASE WHEN ` + room + ` < ` + p + ` THEN ` + room + ` ELSE ` + p + ` END)`
	roomArgs := []any{n, n, n + tol, n + tol, n, n, iv}
	kArgs := append(append(append(append([]any{}, roomArgs...), w), roomArgs...), w)
	args := []any{key, n + first*iv, first}
	args = append(append(append(append(args, n, n), kArgs...), iv), kArgs...)
	var got, at int64
	err = db.ex.QueryRowContext(ctx, db.q(`INSERT INTO rate_limits (key, tat, taken) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET tat = `+base+` + `+k+` * `+p+`, taken = `+k+`
		RETURNING tat, taken`), args...).Scan(&at, &got)
	return int(got), time.UnixMicro(at), err
}

// Purge drops buckets that have been full for an hour.
func (db RateLimits) Purge(ctx context.Context, now time.Time) error {
	_, err := db.ex.ExecContext(ctx, db.q(`DELETE FROM rate_limits WHERE tat < ?`), now.Add(-time.Hour).UnixMicro())
	return err
}
