package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

// TestSpendSince: the dashboard's spend reads the quotes consumed and the
// meter charges made since the period began, and only the organisation's.
func TestSpendSince(t *testing.T) {
	suite(t, func(t *testing.T, open func() *store.Store) {
		w := newWorld(t, open(), "org_s")
		quotes := w.st.Quotes()
		for _, id := range []string{"quo_before", "quo_after", "quo_held"} {
			w.quote(t, id, "ALLOW", "held", 10, t0.Add(-72*time.Hour), t0.Add(time.Hour))
		}
		must(t, quotes.Settle(ctx, "quo_before", "consumed", t0.Add(-48*time.Hour)))
		must(t, quotes.Settle(ctx, "quo_after", "consumed", t0.Add(2*time.Hour)))
		got, err := quotes.SpentSince(ctx, w.org, t0)
		if err != nil || !slices.Equal(quoteIDs(got), []string{"quo_after"}) {
			t.Fatalf("spent since: %v, %v", quoteIDs(got), err)
		}
		if other, err := quotes.SpentSince(ctx, "org_other", t0); err != nil || len(other) != 0 {
			t.Fatalf("another organisation's spend: %v, %v", other, err)
		}
		sv := w.service(t, "svc_s")
		m := w.st.Meters()
		for i, at := range []time.Time{t0.Add(-time.Hour), t0.Add(time.Hour)} {
			must(t, m.Charge(ctx, store.MeterCharge{ServiceID: sv.ID, Period: []string{"2026-10", "2026-11"}[i], OrgID: w.org, ProjectID: w.proj,
				UsageMicro: 5, AmountMicro: 5, ReceiptID: "rcp", ChargedAt: at}))
		}
		cs, err := m.ChargedSince(ctx, w.org, t0)
		if err != nil || len(cs) != 1 || cs[0].Period != "2026-11" {
			t.Fatalf("charged since: %+v, %v", cs, err)
		}
		rn := w.st.DomainRenewals()
		must(t, rn.AddRenewal(ctx, store.DomainRenewal{Domain: "s.dev", Term: 1, OrgID: w.org, ProjectID: w.proj, State: "renewed", AmountMicro: 9, DecidedBy: "system", CreatedAt: t0.Add(-time.Hour)}))
		must(t, rn.AddRenewal(ctx, store.DomainRenewal{Domain: "s.dev", Term: 2, OrgID: w.org, ProjectID: w.proj, State: "renewed", AmountMicro: 9, DecidedBy: "system", CreatedAt: t0.Add(time.Hour)}))
		must(t, rn.AddRenewal(ctx, store.DomainRenewal{Domain: "s.dev", Term: 3, OrgID: w.org, ProjectID: w.proj, State: "lapsed", DecidedBy: "system", CreatedAt: t0.Add(time.Hour)}))
		rs, err := rn.RenewedSince(ctx, w.org, t0)
		if err != nil || len(rs) != 1 || rs[0].Term != 2 {
			t.Fatalf("renewed since: %+v, %v", rs, err)
		}
	})
}
