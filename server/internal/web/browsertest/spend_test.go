package browsertest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

// TestSpendChartInBrowser: two keys spend on two projects this period and
// one service runs; the dashboard in Chromium draws each project's and
// each key's bars, lists the service with its URL, state and cost, and
// fits a phone.
func TestSpendChartInBrowser(t *testing.T) {
	tl := need(t)
	s := start(t, "")
	ctx := context.Background()
	svc, st := s.Service(), s.Store()
	now := svc.Now()
	o, err := st.Accounts().CreateOrganization(ctx, auth.ID("org"), "Noether", now)
	if err != nil {
		t.Fatal(err)
	}
	var projectIDs []string
	for _, name := range []string{"rings", "invariants"} {
		p, err := svc.Projects.Create(ctx, service.NewProject{OrgID: o.ID, Name: name, LimitMicro: 500_000_000, Policy: service.DefaultPolicy(), CreatedBy: "system"})
		if err != nil {
			t.Fatal(err)
		}
		projectIDs = append(projectIDs, p.ID)
	}
	keyIDs := map[string]string{}
	for _, name := range []string{"deployer", "researcher"} {
		_, hash := auth.NewKey()
		keyIDs[name] = auth.ID("key")
		if err := st.Keys().Create(ctx, store.APIKey{ID: keyIDs[name], OrgID: o.ID, Name: name, Scopes: []string{"read", "quote"}, CreatedAt: now}, hash); err != nil {
			t.Fatal(err)
		}
	}
	spend := func(projectID, keyID string, amount int64) {
		t.Helper()
		q := store.Quote{ID: auth.ID("quote"), OrgID: o.ID, ProjectID: projectID, KeyID: keyID, Decision: "ALLOW", State: "held",
			AmountMicro: money.MicroUSD(amount), Items: "[]", Reasons: "[]", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
		if err := st.Quotes().Insert(ctx, q); err != nil {
			t.Fatal(err)
		}
		if err := st.Quotes().Settle(ctx, q.ID, "consumed", now); err != nil {
			t.Fatal(err)
		}
	}
	spend(projectIDs[0], keyIDs["deployer"], 12_000_000)
	spend(projectIDs[1], keyIDs["researcher"], 3_500_000)
	v := store.Service{ID: auth.ID("svc"), OrgID: o.ID, ProjectID: projectIDs[0], Name: "ring-api", Target: "process-small",
		PreviewHost: "ring-api-noether.preview.test", State: "live", TaskID: auth.ID("task"), CreatedAt: now.Add(-3 * time.Hour), UpdatedAt: now}
	if err := st.Services().Insert(ctx, v); err != nil {
		t.Fatal(err)
	}
	started := now.Add(-3 * time.Hour)
	if err := st.Meters().Start(ctx, store.Meter{ServiceID: v.ID, OrgID: o.ID, ProjectID: v.ProjectID, StartedAt: started},
		store.MeterSegment{MonthlyMicro: 7_200_000, Lines: "[]", StartedAt: started}); err != nil {
		t.Fatal(err)
	}
	link, _, err := svc.Accounts.LocalOperatorSignIn(ctx, o.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	names := func(v ...string) string { b, _ := json.Marshal(v); return string(b) }
	out := script(t, tl, "spend.mjs", map[string]string{"PIER_BASE_URL": s.base, "PIER_ARTIFACTS": artifacts(t), "PIER_SIGNIN_URL": link,
		"PIER_PROJECTS": names("rings", "invariants"), "PIER_KEYS": names("deployer", "researcher"), "PIER_SERVICE": "ring-api"})
	t.Logf("bars: %v", out["bars"])
}
