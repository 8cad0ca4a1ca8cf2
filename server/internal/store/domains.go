package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/nameindex"
)

type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func domainHolder(ctx context.Context, db rowQuerier, q func(string) string, domain string) (string, bool, error) {
	domain = strings.ToLower(domain)
	var org string
	err := db.QueryRowContext(ctx, q(`SELECT org_id FROM registrar_purchases WHERE domain = ?`), domain).Scan(&org)
	if err == nil {
		return org, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", false, err
	}
	err = db.QueryRowContext(ctx, q(`SELECT org_id FROM domain_claims WHERE domain = ?`), domain).Scan(&org)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, ErrNotFound
	}
	return org, false, err
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

// Purchase is one sale in the sandbox registrar's ledger.
type Purchase struct {
	Ref, Domain, OrgID string
	Years              int
	AmountMicro        money.MicroUSD
	AuthCode           string
	CreatedAt          time.Time
}

// Zone is an authoritative zone; Records is JSON owned by the DNS package.
type Zone struct {
	Domain, OrgID string
	Serial        int64
	Records       string
	UpdatedAt     time.Time
}

// ClaimDomain records that a launch is buying domain; ErrConflict when it
// is sold, or claimed by another task. Claiming again for the same task is
// a no-op.
func (db Domains) Claim(ctx context.Context, domain, orgID, taskID string, now time.Time) error {
	defer db.written()
	domain = strings.ToLower(domain)
	var n int
	if err := db.ex.QueryRowContext(ctx, db.q(`SELECT COUNT(*) FROM registrar_purchases WHERE domain = ?`), domain).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return ErrConflict
	}
	return db.claim(ctx, `INSERT INTO domain_claims (domain, org_id, task_id, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (domain) DO NOTHING`,
		[]any{domain, orgID, taskID, now.UnixMicro()}, `SELECT task_id FROM domain_claims WHERE domain = ?`, domain, taskID)
}

// written bumps the store's domains version, at once outside a
// transaction and when it commits inside one.
func (db Domains) written() {
	if db.tx != nil {
		db.tx.domainsWritten = true
		return
	}
	db.store.domainsVersion.Add(1)
}

// ReleaseDomainClaims drops what a task claimed.
func (db Domains) ReleaseClaims(ctx context.Context, taskID string) error {
	defer db.written()
	_, err := db.ex.ExecContext(ctx, db.q(`DELETE FROM domain_claims WHERE task_id = ?`), taskID)
	return err
}

// DomainHolder reads the holder inside a transaction.
func (db Domains) Holder(ctx context.Context, domain string) (orgID string, sold bool, err error) {
	return domainHolder(ctx, db.ex, db.store.q, domain)
}

// TakenDomains returns which of names are sold or being bought, whoever
// holds them.
func (db Domains) Taken(ctx context.Context, names []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(names) == 0 {
		return out, nil
	}
	ph := strings.TrimSuffix(strings.Repeat("?, ", len(names)), ", ")
	args := make([]any, 0, 2*len(names))
	for _, n := range names {
		args = append(args, strings.ToLower(n))
	}
	args = append(args, args...)
	rows, err := db.ex.QueryContext(ctx, db.q(`SELECT domain FROM registrar_purchases WHERE domain IN (`+ph+`) UNION SELECT domain FROM domain_claims WHERE domain IN (`+ph+`)`), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, err
		}
		out[d] = true
	}
	return out, rows.Err()
}

// ListPurchases lists the domains an organisation bought, newest first.
func (db Domains) ListPurchases(ctx context.Context, orgID string, f Filter) ([]Purchase, error) {
	return collect(ctx, db.ex, scanPurchase, db.q(`SELECT ref, domain, org_id, years, amount_micro, auth_code, created_at FROM registrar_purchases
		WHERE org_id = ? AND `+afterCond("domain")+` ORDER BY created_at DESC, domain LIMIT ?`), append(append([]any{orgID}, f.afterArgs()...), f.limit())...)
}

// RecordPurchase sells a domain once per reference. Calling it again with
// the same reference returns the first sale; another reference for a sold
// domain is ErrConflict. The insert never violates a key (neither the
// reference's nor the domain's), so a PostgreSQL transaction stays usable
// after a refusal, as a SQLite one does.
func (db Domains) RecordPurchase(ctx context.Context, p Purchase) (Purchase, error) {
	defer db.written()
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO registrar_purchases (ref, domain, org_id, years, amount_micro, auth_code, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`), p.Ref, p.Domain, p.OrgID, p.Years, p.AmountMicro, p.AuthCode, p.CreatedAt.UnixMicro())
	if err != nil {
		return p, err
	}
	got, err := db.PurchaseByRef(ctx, p.Ref)
	if errors.Is(err, ErrNotFound) {
		// Not inserted, and no sale under this reference: the domain is
		// sold under another.
		return p, ErrConflict
	}
	if err != nil {
		return p, err
	}
	if got.Domain != p.Domain {
		return got, ErrConflict
	}
	return got, nil
}

// PurchaseByRef looks a sale up by the buyer's reference.
func (db Domains) PurchaseByRef(ctx context.Context, ref string) (Purchase, error) {
	return db.purchaseBy(ctx, `ref = ?`, ref)
}

// PurchaseByDomain looks a sale up by domain.
func (db Domains) PurchaseByDomain(ctx context.Context, domain string) (Purchase, error) {
	return db.purchaseBy(ctx, `domain = ?`, domain)
}

func (db Domains) purchaseBy(ctx context.Context, where string, arg any) (Purchase, error) {
	var p Purchase
	var created int64
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT ref, domain, org_id, years, amount_micro, auth_code, created_at FROM registrar_purchases WHERE `+where), arg).
		Scan(&p.Ref, &p.Domain, &p.OrgID, &p.Years, &p.AmountMicro, &p.AuthCode, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return p, ErrNotFound
	}
	p.CreatedAt = time.UnixMicro(created).UTC()
	return p, err
}

// CountPurchases counts sales of a domain, for tests that prove none
// happened twice.
func (db Domains) CountPurchases(ctx context.Context, domain string) (int, error) {
	var n int
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT COUNT(*) FROM registrar_purchases WHERE domain = ?`), domain).Scan(&n)
	return n, err
}

// PutZone creates or replaces a zone, bumping its serial.
func (db Domains) PutZone(ctx context.Context, z Zone) error {
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO zones (domain, org_id, serial, records, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (domain) DO UPDATE SET serial = excluded.serial, records = excluded.records, updated_at = excluded.updated_at, org_id = excluded.org_id`),
		z.Domain, z.OrgID, z.Serial, z.Records, z.UpdatedAt.UnixMicro())
	return err
}

// GetZone reads a zone.
func (db Domains) Zone(ctx context.Context, domain string) (Zone, error) {
	var z Zone
	var updated int64
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT domain, org_id, serial, records, updated_at FROM zones WHERE domain = ?`), domain).
		Scan(&z.Domain, &z.OrgID, &z.Serial, &z.Records, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return z, ErrNotFound
	}
	z.UpdatedAt = time.UnixMicro(updated).UTC()
	return z, err
}

// DeleteZone removes a zone.
func (db Domains) DeleteZone(ctx context.Context, domain string) error {
	_, err := db.ex.ExecContext(ctx, db.q(`DELETE FROM zones WHERE domain = ?`), domain)
	return err
}

// OrgPurchases lists the domains an organisation bought.
func (db Domains) OrgPurchases(ctx context.Context, orgID string) ([]Purchase, error) {
	rows, err := db.ex.QueryContext(ctx, db.q(`SELECT ref, domain, org_id, years, amount_micro, auth_code, created_at FROM registrar_purchases WHERE org_id = ? ORDER BY created_at, domain`), orgID)
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

// ZonesSince lists the zones written at or after since (microseconds
// since the epoch; 0 lists them all), with when.
func (db Domains) ZonesSince(ctx context.Context, since int64) ([]nameindex.Name, error) {
	return collect(ctx, db.ex, scanNamed, db.q(`SELECT domain, updated_at FROM zones WHERE updated_at >= ?`), since)
}
