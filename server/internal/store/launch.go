package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"
)

// PutBlob stores content under its SHA-256 once; storing it again is a
// no-op.
func (s *Store) PutBlob(ctx context.Context, sha string, data []byte, now time.Time) error {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO blobs (sha256, size, data, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (sha256) DO NOTHING`),
		sha, len(data), data, now.UnixMicro())
	return err
}

// Blob reads content by its SHA-256.
func (s *Store) Blob(ctx context.Context, sha string) ([]byte, error) {
	var b []byte
	err := s.db.QueryRowContext(ctx, s.q(`SELECT data FROM blobs WHERE sha256 = ?`), sha).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return b, err
}

// HasBlob reports whether content is stored.
func (s *Store) HasBlob(ctx context.Context, sha string) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM blobs WHERE sha256 = ?`), sha).Scan(&n)
	return n > 0, err
}

// Bundle is an uploaded set of files; Manifest is JSON.
type Bundle struct {
	ID, OrgID, SHA256 string
	FileCount         int
	TotalBytes        int64
	Manifest          string
	CreatedAt         time.Time
}

// PutBundle stores a bundle, or returns the organisation's existing bundle
// with the same content.
func (s *Store) PutBundle(ctx context.Context, b Bundle) (Bundle, bool, error) {
	res, err := s.db.ExecContext(ctx, s.q(`INSERT INTO bundles (id, org_id, sha256, file_count, total_bytes, manifest, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (org_id, sha256) DO NOTHING`), b.ID, b.OrgID, b.SHA256, b.FileCount, b.TotalBytes, b.Manifest, b.CreatedAt.UnixMicro())
	if err != nil {
		return b, false, err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return b, true, nil
	}
	existing, err := s.bundleBy(ctx, `org_id = ? AND sha256 = ?`, b.OrgID, b.SHA256)
	return existing, false, err
}

// GetBundle reads a bundle of the organisation.
func (s *Store) GetBundle(ctx context.Context, orgID, id string) (Bundle, error) {
	return s.bundleBy(ctx, `org_id = ? AND id = ?`, orgID, id)
}

func (s *Store) bundleBy(ctx context.Context, where string, args ...any) (Bundle, error) {
	var b Bundle
	var created int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT id, org_id, sha256, file_count, total_bytes, manifest, created_at FROM bundles WHERE `+where), args...).
		Scan(&b.ID, &b.OrgID, &b.SHA256, &b.FileCount, &b.TotalBytes, &b.Manifest, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return b, ErrNotFound
	}
	b.CreatedAt = time.UnixMicro(created).UTC()
	return b, err
}

// Service is a named running thing with its own preview host.
type Service struct {
	ID, OrgID, ProjectID, Name, Target, PreviewHost string
	Domain, BundleID                                string
	State                                           string // launching, live, failed, tearing_down, torn_down
	TaskID                                          string
	CreatedAt, UpdatedAt                            time.Time
}

const serviceCols = `id, org_id, project_id, name, target, preview_host, COALESCE(domain, ''), COALESCE(bundle_id, ''), state, task_id, created_at, updated_at`

// serviceColsS is serviceCols for a query that names services s.
const serviceColsS = `s.id, s.org_id, s.project_id, s.name, s.target, s.preview_host, COALESCE(s.domain, ''), COALESCE(s.bundle_id, ''), s.state, s.task_id, s.created_at, s.updated_at`

func scanService(row interface{ Scan(...any) error }) (Service, error) {
	var v Service
	var created, updated int64
	err := row.Scan(&v.ID, &v.OrgID, &v.ProjectID, &v.Name, &v.Target, &v.PreviewHost, &v.Domain, &v.BundleID, &v.State, &v.TaskID, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return v, ErrNotFound
	}
	v.CreatedAt, v.UpdatedAt = time.UnixMicro(created).UTC(), time.UnixMicro(updated).UTC()
	return v, err
}

// InsertService records a service; ErrConflict when the project already has
// a live service of that name or the preview host is taken.
func (tx *Tx) InsertService(ctx context.Context, v Service) error {
	_, err := tx.tx.ExecContext(ctx, tx.s.q(`INSERT INTO services (id, org_id, project_id, name, target, preview_host, domain, bundle_id, state, task_id, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		v.ID, v.OrgID, v.ProjectID, v.Name, v.Target, v.PreviewHost, nullable(v.Domain), nullable(v.BundleID), v.State, v.TaskID, v.CreatedAt.UnixMicro(), v.UpdatedAt.UnixMicro())
	if isUniqueViolation(err) {
		return ErrConflict
	}
	return err
}

// SetServiceState updates a service's state.
func (s *Store) SetServiceState(ctx context.Context, id, state string, now time.Time) error {
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE services SET state = ?, updated_at = ? WHERE id = ?`), state, now.UnixMicro(), id)
	return err
}

// SetServiceTask points a service at the task now acting on it.
func (tx *Tx) SetServiceTask(ctx context.Context, id, taskID, state string, now time.Time) error {
	_, err := tx.tx.ExecContext(ctx, tx.s.q(`UPDATE services SET task_id = ?, state = ?, updated_at = ? WHERE id = ?`), taskID, state, now.UnixMicro(), id)
	return err
}

// GetService reads a service of the organisation.
func (s *Store) GetService(ctx context.Context, orgID, id string) (Service, error) {
	return scanService(s.db.QueryRowContext(ctx, s.q(`SELECT `+serviceCols+` FROM services WHERE id = ? AND org_id = ?`), id, orgID))
}

// LockService reads a service and locks it.
func (tx *Tx) LockService(ctx context.Context, orgID, id string) (Service, error) {
	return scanService(tx.tx.QueryRowContext(ctx, tx.s.q(`SELECT `+serviceCols+` FROM services WHERE id = ? AND org_id = ?`+tx.forUpdate()), id, orgID))
}

// ServiceByHost finds the live service a Host header names: the one
// service holding the host (its preview host, its domain or www. under it)
// in service_hosts. No other service answers for it, whichever is newer.
func (s *Store) ServiceByHost(ctx context.Context, host string) (Service, error) {
	return scanService(s.db.QueryRowContext(ctx, s.q(`SELECT `+serviceColsS+` FROM service_hosts h JOIN services s ON s.id = h.service_id
		WHERE h.host = ? AND s.state = 'live'`), strings.ToLower(host)))
}

// ProjectServices lists a project's services.
func (s *Store) ProjectServices(ctx context.Context, orgID, projectID string) ([]Service, error) {
	return collect(ctx, s.db, scanService, s.q(`SELECT `+serviceCols+` FROM services WHERE org_id = ? AND project_id = ? ORDER BY created_at, id`), orgID, projectID)
}

// Purchase is one sale in the sandbox registrar's ledger.
type Purchase struct {
	Ref, Domain, OrgID string
	Years              int
	AmountMicro        int64
	AuthCode           string
	CreatedAt          time.Time
}

// RecordPurchase sells a domain once per reference. Calling it again with
// the same reference returns the first sale; another reference for a sold
// domain is ErrConflict.
func (s *Store) RecordPurchase(ctx context.Context, p Purchase) (Purchase, error) {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO registrar_purchases (ref, domain, org_id, years, amount_micro, auth_code, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (ref) DO NOTHING`), p.Ref, p.Domain, p.OrgID, p.Years, p.AmountMicro, p.AuthCode, p.CreatedAt.UnixMicro())
	if isUniqueViolation(err) {
		return p, ErrConflict
	}
	if err != nil {
		return p, err
	}
	got, err := s.PurchaseByRef(ctx, p.Ref)
	if err != nil {
		return p, err
	}
	if got.Domain != p.Domain {
		return got, ErrConflict
	}
	return got, nil
}

// PurchaseByRef looks a sale up by the buyer's reference.
func (s *Store) PurchaseByRef(ctx context.Context, ref string) (Purchase, error) {
	return s.purchaseBy(ctx, `ref = ?`, ref)
}

// PurchaseByDomain looks a sale up by domain.
func (s *Store) PurchaseByDomain(ctx context.Context, domain string) (Purchase, error) {
	return s.purchaseBy(ctx, `domain = ?`, domain)
}

func (s *Store) purchaseBy(ctx context.Context, where string, arg any) (Purchase, error) {
	var p Purchase
	var created int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT ref, domain, org_id, years, amount_micro, auth_code, created_at FROM registrar_purchases WHERE `+where), arg).
		Scan(&p.Ref, &p.Domain, &p.OrgID, &p.Years, &p.AmountMicro, &p.AuthCode, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return p, ErrNotFound
	}
	p.CreatedAt = time.UnixMicro(created).UTC()
	return p, err
}

// CountPurchases counts sales of a domain, for tests that prove none
// happened twice.
func (s *Store) CountPurchases(ctx context.Context, domain string) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM registrar_purchases WHERE domain = ?`), domain).Scan(&n)
	return n, err
}

// Zone is an authoritative zone; Records is JSON owned by the DNS package.
type Zone struct {
	Domain, OrgID string
	Serial        int64
	Records       string
	UpdatedAt     time.Time
}

// PutZone creates or replaces a zone, bumping its serial.
func (s *Store) PutZone(ctx context.Context, z Zone) error {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO zones (domain, org_id, serial, records, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (domain) DO UPDATE SET serial = excluded.serial, records = excluded.records, updated_at = excluded.updated_at, org_id = excluded.org_id`),
		z.Domain, z.OrgID, z.Serial, z.Records, z.UpdatedAt.UnixMicro())
	return err
}

// GetZone reads a zone.
func (s *Store) GetZone(ctx context.Context, domain string) (Zone, error) {
	var z Zone
	var updated int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT domain, org_id, serial, records, updated_at FROM zones WHERE domain = ?`), domain).
		Scan(&z.Domain, &z.OrgID, &z.Serial, &z.Records, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return z, ErrNotFound
	}
	z.UpdatedAt = time.UnixMicro(updated).UTC()
	return z, err
}

// DeleteZone removes a zone.
func (s *Store) DeleteZone(ctx context.Context, domain string) error {
	_, err := s.db.ExecContext(ctx, s.q(`DELETE FROM zones WHERE domain = ?`), domain)
	return err
}

// OrgPurchases lists the domains an organisation bought.
func (s *Store) OrgPurchases(ctx context.Context, orgID string) ([]Purchase, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT ref, domain, org_id, years, amount_micro, auth_code, created_at FROM registrar_purchases WHERE org_id = ? ORDER BY created_at, domain`), orgID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Purchase
	for rows.Next() {
		var p Purchase
		var created int64
		if err := rows.Scan(&p.Ref, &p.Domain, &p.OrgID, &p.Years, &p.AmountMicro, &p.AuthCode, &created); err != nil {
			return nil, err
		}
		p.CreatedAt = time.UnixMicro(created).UTC()
		out = append(out, p)
	}
	return out, rows.Err()
}
