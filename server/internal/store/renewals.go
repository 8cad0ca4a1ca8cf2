package store

import (
	"context"
	"time"

	"github.com/pierhq/pier/server/internal/money"
)

// DomainRenewals holds domain renewals and the expiry notices sent ahead
// of them.
type DomainRenewals struct{ conn }

// DomainRenewals reaches the renewal tables.
func (n nouns) DomainRenewals() DomainRenewals { return DomainRenewals{n.c} }

// DomainRenewal is one term of a domain after its first registration.
type DomainRenewal struct {
	Domain           string
	Term             int
	OrgID, ProjectID string
	State            string // renewed, lapsed
	AmountMicro      money.MicroUSD
	DecidedBy        string
	CreatedAt        time.Time
}

// DomainNotice is an expiry notice sent ahead of a term's end.
type DomainNotice struct {
	Domain    string
	Term      int
	Days      int
	OrgID     string
	ExpiresAt time.Time
	CreatedAt time.Time
}

// Renewals lists a domain's renewal rows in term order.
func (db DomainRenewals) Renewals(ctx context.Context, domain string) ([]DomainRenewal, error) {
	return collect(ctx, db.ex, func(row interface{ Scan(...any) error }) (DomainRenewal, error) {
		var r DomainRenewal
		var at int64
		err := row.Scan(&r.Domain, &r.Term, &r.OrgID, &r.ProjectID, &r.State, &r.AmountMicro, &r.DecidedBy, &at)
		r.CreatedAt = microTime(at)
		return r, err
	}, db.q(`SELECT domain, term, org_id, project_id, state, amount_micro, decided_by, created_at FROM domain_renewals WHERE domain = ? ORDER BY term`), domain)
}

// AddRenewal records a term renewed or lapsed; ErrConflict when the term
// is decided already.
func (db DomainRenewals) AddRenewal(ctx context.Context, r DomainRenewal) error {
	res, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO domain_renewals (domain, term, org_id, project_id, state, amount_micro, decided_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (domain, term) DO NOTHING`),
		r.Domain, r.Term, r.OrgID, r.ProjectID, r.State, r.AmountMicro, r.DecidedBy, r.CreatedAt.UnixMicro())
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrConflict
	}
	return nil
}

// AddDomainNotice records an expiry notice; false when it was recorded
// before.
func (db DomainRenewals) AddDomainNotice(ctx context.Context, n DomainNotice) (bool, error) {
	res, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO domain_notices (domain, term, days, org_id, expires_at, created_at, mailed_at) VALUES (?, ?, ?, ?, ?, ?, NULL) ON CONFLICT (domain, term, days) DO NOTHING`),
		n.Domain, n.Term, n.Days, n.OrgID, n.ExpiresAt.UnixMicro(), n.CreatedAt.UnixMicro())
	if err != nil {
		return false, err
	}
	k, _ := res.RowsAffected()
	return k == 1, nil
}

// DomainNotices lists a domain's expiry notices, oldest first.
func (db DomainRenewals) DomainNotices(ctx context.Context, domain string) ([]DomainNotice, error) {
	return collect(ctx, db.ex, func(row interface{ Scan(...any) error }) (DomainNotice, error) {
		var n DomainNotice
		var exp, at int64
		err := row.Scan(&n.Domain, &n.Term, &n.Days, &n.OrgID, &exp, &at)
		n.ExpiresAt, n.CreatedAt = microTime(exp), microTime(at)
		return n, err
	}, db.q(`SELECT domain, term, days, org_id, expires_at, created_at FROM domain_notices WHERE domain = ? ORDER BY term, days DESC`), domain)
}

// AllPurchases lists every registration, for the renewal pass.
func (db DomainRenewals) AllPurchases(ctx context.Context) ([]Purchase, error) {
	return collect(ctx, db.ex, func(row interface{ Scan(...any) error }) (Purchase, error) {
		var p Purchase
		var at int64
		err := row.Scan(&p.Ref, &p.Domain, &p.OrgID, &p.Years, &p.AmountMicro, &at)
		p.CreatedAt = microTime(at)
		return p, err
	}, db.q(`SELECT ref, domain, org_id, years, amount_micro, created_at FROM registrar_purchases ORDER BY domain`))
}
