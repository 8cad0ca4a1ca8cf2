package store

import (
	"context"
	"time"
)

// SpentSince lists an organisation's quotes consumed at or after since, for
// the dashboard's spend.
func (db Quotes) SpentSince(ctx context.Context, orgID string, since time.Time) ([]Quote, error) {
	return collect(ctx, db.ex, scanQuote, db.q(`SELECT `+quoteCols+` FROM quotes
		WHERE org_id = ? AND state = 'consumed' AND settled_at >= ? ORDER BY settled_at, id`), orgID, since.UnixMicro())
}

// ChargedSince lists an organisation's meter charges made at or after
// since, for the dashboard's spend.
func (db Meters) ChargedSince(ctx context.Context, orgID string, since time.Time) ([]MeterCharge, error) {
	return collect(ctx, db.ex, scanCharge, db.q(`SELECT `+chargeCols+` FROM meter_charges
		WHERE org_id = ? AND charged_at >= ? ORDER BY charged_at, service_id`), orgID, since.UnixMicro())
}

// RenewedSince lists an organisation's domain terms renewed at or after
// since, for the dashboard's spend.
func (db DomainRenewals) RenewedSince(ctx context.Context, orgID string, since time.Time) ([]DomainRenewal, error) {
	return collect(ctx, db.ex, func(row interface{ Scan(...any) error }) (DomainRenewal, error) {
		var r DomainRenewal
		var at int64
		err := row.Scan(&r.Domain, &r.Term, &r.OrgID, &r.ProjectID, &r.State, &r.AmountMicro, &r.DecidedBy, &at)
		r.CreatedAt = microTime(at)
		return r, err
	}, db.q(`SELECT domain, term, org_id, project_id, state, amount_micro, decided_by, created_at FROM domain_renewals
		WHERE org_id = ? AND state = 'renewed' AND created_at >= ? ORDER BY created_at, domain`), orgID, since.UnixMicro())
}
