package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// SandboxReleaseFile is one file of a reference release.
type SandboxReleaseFile struct {
	Path        string
	ContentType string
	SHA256      string
	Body        []byte
}

// SandboxRelease is one immutable reference release.
type SandboxRelease struct {
	// ID is the SHA-256 of the manifest, so a release is named by what it
	// says.
	ID        string
	ProofID   string
	Manifest  []byte
	CreatedAt time.Time
	Files     []SandboxReleaseFile
}

// SandboxKey returns a stored private key by name (PostgreSQL keeps the
// sandbox's keys in the database so that replicas share them).
func (db SandboxReleases) Key(ctx context.Context, name string) (string, error) {
	var jwk string
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT private_jwk FROM sandbox_keys WHERE name = ?`), name).Scan(&jwk)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	return jwk, err
}

// PutSandboxKeyIfAbsent stores a key under name unless one is there already;
// of replicas racing to create it, one wins and all read the winner's.
func (db SandboxReleases) PutKeyIfAbsent(ctx context.Context, name, privateJWK string, now time.Time) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO sandbox_keys (name, private_jwk, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`),
		name, privateJWK, now.UnixMicro())
	return err
}

// WriteSandboxRelease writes a release's files and manifest. Writing the
// same release again changes nothing. It does not publish the release.
func (db SandboxReleases) Write(ctx context.Context, r SandboxRelease) error {
	tx, err := db.begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, f := range r.Files {
		if _, err := tx.ExecContext(ctx, db.q(`INSERT INTO sandbox_release_files (release_id, path, content_type, sha256, body)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (release_id, path) DO NOTHING`), r.ID, f.Path, f.ContentType, f.SHA256, f.Body); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, db.q(`INSERT INTO sandbox_releases (id, proof_id, manifest, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`), r.ID, r.ProofID, r.Manifest, r.CreatedAt.UnixMicro()); err != nil {
		return err
	}
	return tx.Commit()
}

// PublishSandboxRelease points the public hosts at a written release, after
// checking that every one of want's paths is stored with its hash. Unless
// replace is set, an existing publication is kept and its id returned.
func (db SandboxReleases) Publish(ctx context.Context, id string, want map[string]string, replace bool, now time.Time) (string, error) {
	tx, err := db.begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, db.q(`SELECT path, sha256 FROM sandbox_release_files WHERE release_id = ?`), id)
	if err != nil {
		return "", err
	}
	have := map[string]string{}
	for rows.Next() {
		var p, h string
		if err := rows.Scan(&p, &h); err != nil {
			rows.Close()
			return "", err
		}
		have[p] = h
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", err
	}
	for p, h := range want {
		if have[p] != h {
			return "", fmt.Errorf("store: release %s: %s is not in place", id, p)
		}
	}
	var n int
	if err := tx.QueryRowContext(ctx, db.q(`SELECT COUNT(*) FROM sandbox_releases WHERE id = ?`), id).Scan(&n); err != nil || n != 1 {
		return "", fmt.Errorf("store: release %s has no manifest: %v", id, err)
	}
	if replace {
		_, err = tx.ExecContext(ctx, db.q(`INSERT INTO sandbox_reference (singleton, release_id, published_at) VALUES (1, ?, ?)
			ON CONFLICT (singleton) DO UPDATE SET release_id = excluded.release_id, published_at = excluded.published_at`), id, now.UnixMicro())
	} else {
		_, err = tx.ExecContext(ctx, db.q(`INSERT INTO sandbox_reference (singleton, release_id, published_at) VALUES (1, ?, ?)
			ON CONFLICT (singleton) DO NOTHING`), id, now.UnixMicro())
	}
	if err != nil {
		return "", err
	}
	var current string
	if err := tx.QueryRowContext(ctx, `SELECT release_id FROM sandbox_reference WHERE singleton = 1`).Scan(&current); err != nil {
		return "", err
	}
	return current, tx.Commit()
}

// CurrentSandboxRelease is the id of the published release.
func (db SandboxReleases) Current(ctx context.Context) (string, error) {
	var id string
	err := db.ex.QueryRowContext(ctx, `SELECT release_id FROM sandbox_reference WHERE singleton = 1`).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	return id, err
}

// GetSandboxRelease reads a release with its files.
func (db SandboxReleases) Get(ctx context.Context, id string) (SandboxRelease, error) {
	r := SandboxRelease{ID: id}
	var created int64
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT proof_id, manifest, created_at FROM sandbox_releases WHERE id = ?`), id).
		Scan(&r.ProofID, &r.Manifest, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	if err != nil {
		return r, err
	}
	r.CreatedAt = time.UnixMicro(created).UTC()
	rows, err := db.ex.QueryContext(ctx, db.q(`SELECT path, content_type, sha256, body FROM sandbox_release_files WHERE release_id = ? ORDER BY path`), id)
	if err != nil {
		return r, err
	}
	defer rows.Close()
	for rows.Next() {
		var f SandboxReleaseFile
		if err := rows.Scan(&f.Path, &f.ContentType, &f.SHA256, &f.Body); err != nil {
			return r, err
		}
		r.Files = append(r.Files, f)
	}
	return r, rows.Err()
}

// DeleteSandboxRelease removes a written release that was never published
// (the loser of two replicas publishing at once).
func (db SandboxReleases) Delete(ctx context.Context, id string) error {
	tx, err := db.begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, db.q(`SELECT COUNT(*) FROM sandbox_reference WHERE release_id = ?`), id).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("store: release %s is published", id)
	}
	if _, err := tx.ExecContext(ctx, db.q(`DELETE FROM sandbox_releases WHERE id = ?`), id); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, db.q(`DELETE FROM sandbox_release_files WHERE release_id = ?`), id); err != nil {
		return err
	}
	return tx.Commit()
}
