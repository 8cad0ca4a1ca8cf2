package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Filter narrows a listing; empty fields match everything. Listings are
// newest first and at most Limit long.
type Filter struct {
	ProjectID, State string
	Limit            int
}

func (f Filter) limit() int {
	if f.Limit <= 0 || f.Limit > 500 {
		return 100
	}
	return f.Limit
}

// ListServices lists an organisation's services.
func (s *Store) ListServices(ctx context.Context, orgID string, f Filter) ([]Service, error) {
	return collect(ctx, s.db, scanService, s.q(`SELECT `+serviceCols+` FROM services
		WHERE org_id = ? AND (? = '' OR project_id = ?) AND (? = '' OR state = ?)
		ORDER BY created_at DESC, id LIMIT ?`), orgID, f.ProjectID, f.ProjectID, f.State, f.State, f.limit())
}

// ListTasksFiltered lists an organisation's tasks.
func (s *Store) ListTasksFiltered(ctx context.Context, orgID string, f Filter) ([]Task, error) {
	return collect(ctx, s.db, scanTask, s.q(`SELECT `+taskCols+` FROM tasks
		WHERE org_id = ? AND (? = '' OR state = ?) AND (? = '' OR project_id = ?)
		ORDER BY created_at DESC, id LIMIT ?`), orgID, f.State, f.State, f.ProjectID, f.ProjectID, f.limit())
}

func scanBundleSummary(row interface{ Scan(...any) error }) (Bundle, error) {
	var b Bundle
	var created int64
	err := row.Scan(&b.ID, &b.OrgID, &b.SHA256, &b.FileCount, &b.TotalBytes, &created)
	b.CreatedAt = time.UnixMicro(created).UTC()
	return b, err
}

// ListBundles lists an organisation's bundles without their manifests.
func (s *Store) ListBundles(ctx context.Context, orgID string, f Filter) ([]Bundle, error) {
	return collect(ctx, s.db, scanBundleSummary, s.q(`SELECT id, org_id, sha256, file_count, total_bytes, created_at FROM bundles
		WHERE org_id = ? ORDER BY created_at DESC, id LIMIT ?`), orgID, f.limit())
}

func scanPurchase(row interface{ Scan(...any) error }) (Purchase, error) {
	var p Purchase
	var created int64
	err := row.Scan(&p.Ref, &p.Domain, &p.OrgID, &p.Years, &p.AmountMicro, &p.AuthCode, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return p, ErrNotFound
	}
	p.CreatedAt = time.UnixMicro(created).UTC()
	return p, err
}

// ListPurchases lists the domains an organisation bought, newest first.
func (s *Store) ListPurchases(ctx context.Context, orgID string, f Filter) ([]Purchase, error) {
	return collect(ctx, s.db, scanPurchase, s.q(`SELECT ref, domain, org_id, years, amount_micro, auth_code, created_at FROM registrar_purchases
		WHERE org_id = ? ORDER BY created_at DESC, domain LIMIT ?`), orgID, f.limit())
}

// LiveServiceForDomain finds the live service of an organisation that
// serves a domain.
func (s *Store) LiveServiceForDomain(ctx context.Context, orgID, domain string) (Service, error) {
	return scanService(s.db.QueryRowContext(ctx, s.q(`SELECT `+serviceCols+` FROM services
		WHERE org_id = ? AND domain = ? AND state = 'live' ORDER BY updated_at DESC LIMIT 1`), orgID, domain))
}

// ListQuotes lists an organisation's quotes.
func (s *Store) ListQuotes(ctx context.Context, orgID string, f Filter) ([]Quote, error) {
	return collect(ctx, s.db, scanQuote, s.q(`SELECT `+quoteCols+` FROM quotes
		WHERE org_id = ? AND (? = '' OR project_id = ?) AND (? = '' OR state = ?)
		ORDER BY created_at DESC, id LIMIT ?`), orgID, f.ProjectID, f.ProjectID, f.State, f.State, f.limit())
}

// GetQuote reads one quote of an organisation.
func (s *Store) GetQuote(ctx context.Context, orgID, id string) (Quote, error) {
	return scanQuote(s.db.QueryRowContext(ctx, s.q(`SELECT `+quoteCols+` FROM quotes WHERE org_id = ? AND id = ?`), orgID, id))
}
