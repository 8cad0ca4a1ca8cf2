package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// IdempotencyOutcome says what BeginIdempotent found.
type IdempotencyOutcome int

const (
	// IdempotencyAcquired: the caller owns the key and must execute, then
	// Complete or Abandon it.
	IdempotencyAcquired IdempotencyOutcome = iota
	// IdempotencyReplay: a response is stored; send it again.
	IdempotencyReplay
	// IdempotencyMismatch: the key was used with another request.
	IdempotencyMismatch
	// IdempotencyInFlight: another request holds the key right now.
	IdempotencyInFlight
)

// StoredResponse is a response kept for replay.
type StoredResponse struct {
	Status      int
	ContentType string
	Body        []byte
}

// IdempotencyClaim identifies one request under one key.
type IdempotencyClaim struct {
	Principal   string
	Key         string
	Operation   string
	RequestHash string
}

// BeginIdempotent claims a key for a request, or reports why it cannot.
//
// The primary key on (principal, key) is what makes exactly one of many
// concurrent requests win: the insert either happens or conflicts. An
// in-flight claim whose lease ran out (its server died) may be taken over, and
// an expired record counts as absent.
func (db Idempotency) Begin(ctx context.Context, c IdempotencyClaim, now time.Time, lease, ttl time.Duration) (IdempotencyOutcome, *StoredResponse, error) {
	tx, err := db.begin(ctx)
	if err != nil {
		return 0, nil, err
	}
	defer tx.Rollback()

	res, err := tx.ExecContext(ctx, db.q(`INSERT INTO idempotency_records
		(principal, idem_key, operation, request_hash, state, created_at, locked_until, expires_at)
		VALUES (?, ?, ?, ?, 'in_flight', ?, ?, ?)
		ON CONFLICT (principal, idem_key) DO NOTHING`),
		c.Principal, c.Key, c.Operation, c.RequestHash, now.UnixMicro(), now.Add(lease).UnixMicro(), now.Add(ttl).UnixMicro())
	if err != nil {
		return 0, nil, err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return IdempotencyAcquired, nil, tx.Commit()
	}

	lock := ""
	if db.store.engine == Postgres {
		lock = " FOR UPDATE"
	}
	var (
		op, hash, state  string
		status           sql.NullInt64
		ctype            sql.NullString
		body             []byte
		lockedUntil, exp int64
	)
	err = tx.QueryRowContext(ctx, db.q(`SELECT operation, request_hash, state, status, content_type, body, locked_until, expires_at
		FROM idempotency_records WHERE principal = ? AND idem_key = ?`+lock), c.Principal, c.Key).
		Scan(&op, &hash, &state, &status, &ctype, &body, &lockedUntil, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		// Deleted between our insert and select; the client may simply retry.
		return IdempotencyInFlight, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}

	takeOver := func() (IdempotencyOutcome, *StoredResponse, error) {
		_, err := tx.ExecContext(ctx, db.q(`UPDATE idempotency_records
			SET operation = ?, request_hash = ?, state = 'in_flight', status = NULL, content_type = NULL, body = NULL,
			    created_at = ?, locked_until = ?, expires_at = ?
			WHERE principal = ? AND idem_key = ?`),
			c.Operation, c.RequestHash, now.UnixMicro(), now.Add(lease).UnixMicro(), now.Add(ttl).UnixMicro(), c.Principal, c.Key)
		if err != nil {
			return 0, nil, err
		}
		return IdempotencyAcquired, nil, tx.Commit()
	}

	switch {
	case exp <= now.UnixMicro():
		return takeOver()
	case op != c.Operation || hash != c.RequestHash:
		return IdempotencyMismatch, nil, nil
	case state == "in_flight" && lockedUntil <= now.UnixMicro():
		return takeOver()
	case state == "in_flight":
		return IdempotencyInFlight, nil, nil
	}
	return IdempotencyReplay, &StoredResponse{Status: int(status.Int64), ContentType: ctype.String, Body: body}, nil
}

// CompleteIdempotent stores the response for replay.
func (db Idempotency) Complete(ctx context.Context, c IdempotencyClaim, r StoredResponse) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE idempotency_records SET state = 'done', status = ?, content_type = ?, body = ?
		WHERE principal = ? AND idem_key = ? AND request_hash = ?`),
		r.Status, r.ContentType, r.Body, c.Principal, c.Key, c.RequestHash)
	return err
}

// AbandonIdempotent releases a claim without storing a response, so that
// the same key can be used again (after a validation failure, say).
func (db Idempotency) Abandon(ctx context.Context, c IdempotencyClaim) error {
	_, err := db.ex.ExecContext(ctx, db.q(`DELETE FROM idempotency_records WHERE principal = ? AND idem_key = ? AND state = 'in_flight'`), c.Principal, c.Key)
	return err
}

// PurgeIdempotency deletes expired records and reports how many.
func (db Idempotency) Purge(ctx context.Context, now time.Time) (int64, error) {
	res, err := db.ex.ExecContext(ctx, db.q(`DELETE FROM idempotency_records WHERE expires_at <= ?`), now.UnixMicro())
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
