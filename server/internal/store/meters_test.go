package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

// A meter starts once, a service's period is charged once and draws its
// credit once, a period closes once and a notice is recorded and mailed
// once, on both engines.
func TestMetersChargeEachPeriodOnce(t *testing.T) {
	suite(t, func(t *testing.T, open func() *store.Store) {
		ctx := context.Background()
		w := newWorld(t, open(), "org_m")
		sv := w.service(t, "svc_m")
		m := w.st.Meters()
		meter := store.Meter{ServiceID: sv.ID, OrgID: w.org, ProjectID: w.proj, CreditMicro: 30, StartedAt: t0}
		if err := m.Start(ctx, meter, store.MeterSegment{MonthlyMicro: 70, Lines: "[]", StartedAt: t0}); err != nil {
			t.Fatal(err)
		}
		if err := m.Start(ctx, meter, store.MeterSegment{MonthlyMicro: 70, Lines: "[]", StartedAt: t0}); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("second start: %v", err)
		}
		c := store.MeterCharge{ServiceID: sv.ID, Period: "2026-11", OrgID: w.org, ProjectID: w.proj, Hours: 10, UsageMicro: 50, CreditMicro: 30, AmountMicro: 20, ReceiptID: "rcp_1", ChargedAt: t0}
		if err := m.Charge(ctx, c); err != nil {
			t.Fatal(err)
		}
		if err := m.Charge(ctx, c); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("second charge: %v", err)
		}
		if got, _ := m.Get(ctx, sv.ID); got.CreditMicro != 0 {
			t.Fatalf("credit %d after one draw of 30", got.CreditMicro)
		}
		if err := m.Resize(ctx, sv.ID, t0.Add(time.Hour), 140, "[]"); err != nil {
			t.Fatal(err)
		}
		if err := m.Stop(ctx, sv.ID, t0.Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		segs, err := m.Segments(ctx, sv.ID)
		if err != nil || len(segs) != 2 || segs[0].EndedAt == nil || !segs[0].EndedAt.Equal(t0.Add(time.Hour)) || segs[1].EndedAt == nil || !segs[1].EndedAt.Equal(t0.Add(2*time.Hour)) {
			t.Fatalf("segments %+v, %v", segs, err)
		}
		if err := m.ClosePeriod(ctx, w.proj, "2026-11", 100, 20, t0); err != nil {
			t.Fatal(err)
		}
		if err := m.ClosePeriod(ctx, w.proj, "2026-11", 100, 20, t0); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("second close: %v", err)
		}
		if last, err := m.LastClosedPeriod(ctx, w.proj); err != nil || last != "2026-11" {
			t.Fatalf("last closed %q, %v", last, err)
		}
		n := store.BudgetNotice{ProjectID: w.proj, Period: "2026-11", OrgID: w.org, Percent: 50, SpentMicro: 50, LimitMicro: 100, CreatedAt: t0}
		for i, want := range []bool{true, false} {
			if added, err := m.AddNotice(ctx, n); err != nil || added != want {
				t.Fatalf("notice %d: added %v, %v", i, added, err)
			}
		}
		for i, want := range []bool{true, false} {
			if ok, err := m.MarkMailed(ctx, w.proj, "2026-11", 50, t0); err != nil || ok != want {
				t.Fatalf("mail claim %d: %v, %v", i, ok, err)
			}
		}
		if un, err := m.Unmailed(ctx); err != nil || len(un) != 0 {
			t.Fatalf("unmailed %+v, %v", un, err)
		}
	})
}
