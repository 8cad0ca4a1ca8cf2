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
