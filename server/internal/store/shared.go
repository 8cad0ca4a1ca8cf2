package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/pierhq/pier/server/internal/nameindex"
)

// Shared is a small key-value table for what replicas share outside the
// domain's own tables (ACME challenges and certificates).
type Shared struct{ conn }

// Put sets key to value.
func (db Shared) Put(ctx context.Context, key, value string) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO shared_values (key, value, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`), key, value, time.Now().UnixMicro())
	return err
}

// Get reads key, or ErrNotFound.
func (db Shared) Get(ctx context.Context, key string) (string, error) {
	var v string
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT value FROM shared_values WHERE key = ?`), key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	return v, err
}

// Delete removes key.
func (db Shared) Delete(ctx context.Context, key string) error {
	_, err := db.ex.ExecContext(ctx, db.q(`DELETE FROM shared_values WHERE key = ?`), key)
	return err
}

// scanNamed reads a name with when it was written (microseconds since the
// epoch), as the name indexes take them.
func scanNamed(row interface{ Scan(...any) error }) (nameindex.Name, error) {
	var n nameindex.Name
	err := row.Scan(&n.Name, &n.Added)
	return n, err
}
