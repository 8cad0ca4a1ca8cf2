package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

func scanBundleSummary(row interface{ Scan(...any) error }) (Bundle, error) {
	var b Bundle
	var created int64
	err := row.Scan(&b.ID, &b.OrgID, &b.SHA256, &b.FileCount, &b.TotalBytes, &created)
	b.CreatedAt = time.UnixMicro(created).UTC()
	return b, err
}

// Bundle is an uploaded set of files; Manifest is JSON.
type Bundle struct {
	ID, OrgID, SHA256 string
	FileCount         int
	TotalBytes        int64
	Manifest          string
	CreatedAt         time.Time
}

// ListBundles lists an organisation's bundles without their manifests.
func (db Bundles) List(ctx context.Context, orgID string, f Filter) ([]Bundle, error) {
	return collect(ctx, db.ex, scanBundleSummary, db.q(`SELECT id, org_id, sha256, file_count, total_bytes, created_at FROM bundles
		WHERE org_id = ? ORDER BY created_at DESC, id LIMIT ?`), orgID, f.limit())
}

// PutBlob stores content under its SHA-256 once; storing it again is a
// no-op.
func (db Bundles) PutBlob(ctx context.Context, sha string, data []byte, now time.Time) error {
	body := data
	if o := db.store.objects; o != nil && len(data) > 0 {
		// The body goes to the object store first; the row, which says
		// the blob exists, comes after, so a row never names a missing body.
		if err := o.Put(ctx, sha, data); err != nil {
			return err
		}
		body = []byte{}
	}
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO blobs (sha256, size, data, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (sha256) DO NOTHING`),
		sha, len(data), body, now.UnixMicro())
	return err
}

// Blob reads content by its SHA-256.
func (db Bundles) Blob(ctx context.Context, sha string) ([]byte, error) {
	var b []byte
	var size int64
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT data, size FROM blobs WHERE sha256 = ?`), sha).Scan(&b, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err == nil && int64(len(b)) != size {
		// Kept in the object store.
		if db.store.objects == nil {
			return nil, errors.New("store: blob " + sha + " is in an object store this server is not configured with")
		}
		return db.store.objects.Get(ctx, sha)
	}
	return b, err
}

// HasBlob reports whether content is stored.
func (db Bundles) HasBlob(ctx context.Context, sha string) (bool, error) {
	var n int
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT COUNT(*) FROM blobs WHERE sha256 = ?`), sha).Scan(&n)
	return n > 0, err
}

// PutBundle stores a bundle, or returns the organisation's existing bundle
// with the same content.
func (db Bundles) Put(ctx context.Context, b Bundle) (Bundle, bool, error) {
	res, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO bundles (id, org_id, sha256, file_count, total_bytes, manifest, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (org_id, sha256) DO NOTHING`), b.ID, b.OrgID, b.SHA256, b.FileCount, b.TotalBytes, b.Manifest, b.CreatedAt.UnixMicro())
	if err != nil {
		return b, false, err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return b, true, nil
	}
	existing, err := db.by(ctx, `org_id = ? AND sha256 = ?`, b.OrgID, b.SHA256)
	return existing, false, err
}

// GetBundle reads a bundle of the organisation.
func (db Bundles) Get(ctx context.Context, orgID, id string) (Bundle, error) {
	return db.by(ctx, `org_id = ? AND id = ?`, orgID, id)
}

func (db Bundles) by(ctx context.Context, where string, args ...any) (Bundle, error) {
	var b Bundle
	var created int64
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT id, org_id, sha256, file_count, total_bytes, manifest, created_at FROM bundles WHERE `+where), args...).
		Scan(&b.ID, &b.OrgID, &b.SHA256, &b.FileCount, &b.TotalBytes, &b.Manifest, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return b, ErrNotFound
	}
	b.CreatedAt = time.UnixMicro(created).UTC()
	return b, err
}
