package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/contracttest"
	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

// The human sees the budget's thresholds on the dashboard and chooses the
// budget's period and what happens at 100 % there; an agent that tries to
// spend from an exhausted budget gets budget:exhausted with the way to a
// raise, and get_project shows the period, spent, held and the forecast.
func TestBudgetPeriodsOnTheDashboardAndTheAPI(t *testing.T) {
	clock := testserver.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	ts := start(t, server.Config{Now: clock.Now, MeterInterval: -1})
	a := newAccount(t, ts, 10_000_000, service.DefaultPolicy(), "read", "quote")
	ctx := context.Background()
	spend := func(micro money.MicroUSD) {
		t.Helper()
		if err := ts.Store().InTx(ctx, func(tx *store.Tx) error { return tx.Projects().MoveMoney(ctx, a.project, 0, micro) }); err != nil {
			t.Fatal(err)
		}
		if err := ts.Service().Metering().MeterPass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	spend(8_000_000)

	link, _, err := ts.Service().Accounts.LocalOperatorSignIn(ctx, a.org, "")
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, ts)
	confirm := b.get(link)
	b.post(link, url.Values{"csrf": {csrfOf(t, confirm)}})
	dash := b.get("/dashboard")
	if dash.status != 200 || !strings.Contains(dash.body, "50 % of the budget spent") || !strings.Contains(dash.body, "80 % of the budget spent") || !strings.Contains(dash.body, "This month (2026-11)") {
		t.Fatalf("dashboard %d:\n%s", dash.status, dash.body)
	}
	if p := b.post("/projects/"+a.project+"/budget-policy", url.Values{"csrf": {csrfOf(t, dash)}, "budgetPeriod": {"lifetime"}, "onBudgetExhausted": {"stop_spending"}}); p.status != 303 {
		t.Fatalf("setting the budget policy: %d %s", p.status, p.body)
	}

	c := &contracttest.Client{T: t, BaseURL: ts.URL}
	proj := c.Do("GET", "/v1/projects/"+a.project, nil, a.header()).JSON()["data"].(map[string]any)
	period := proj["period"].(map[string]any)
	if proj["policy"].(map[string]any)["budgetPeriod"] != "lifetime" || period["kind"] != "lifetime" || period["spentUsd"] != 8.0 || period["forecastUsd"] != 8.0 {
		t.Fatalf("project %v", proj)
	}

	spend(2_000_000)
	r := c.Do("POST", "/v1/quotes", map[string]any{"projectId": a.project, "items": []any{map[string]any{"kind": "service", "workload": "dynamic_service", "months": 1}}}, a.header())
	if r.StatusCode != http.StatusPaymentRequired || r.JSON()["blockedBy"] != "budget:exhausted" || r.JSON()["retryable"] != false || !strings.Contains(string(r.Body), "request_budget_raise") {
		t.Fatalf("quote on an exhausted budget: %d %s", r.StatusCode, r.Body)
	}
	if dash := b.get("/dashboard"); !strings.Contains(dash.body, "100 % of the budget spent") {
		t.Fatalf("dashboard after 100 %%:\n%s", dash.body)
	}
}

// Two replicas on one PostgreSQL each run the meter's loop every 20 ms
// while the clock crosses two month boundaries: every (service, month) is
// charged once, and the money moves once.
func TestMeterLoopsOnTwoReplicasChargeOnce(t *testing.T) {
	db := testpg.NewDatabase(t)
	clock := testserver.NewClock(time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC))
	a := start(t, server.Config{DatabaseURL: db, Now: clock.Now, MeterInterval: 20 * time.Millisecond})
	b := start(t, server.Config{DatabaseURL: db, Now: clock.Now, MeterInterval: 20 * time.Millisecond})
	acct := newAccount(t, a, 100_000_000, service.DefaultPolicy(), "read")
	ctx := context.Background()
	st := a.Store()
	for _, name := range []string{"one", "two"} {
		if err := st.Services().Insert(ctx, store.Service{ID: "svc_" + name, OrgID: acct.org, ProjectID: acct.project, Name: name, Target: "worker",
			PreviewHost: name + ".localhost", State: "tearing_down", TaskID: "tsk_none", CreatedAt: clock.Now(), UpdatedAt: clock.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := st.Meters().Start(ctx, store.Meter{ServiceID: "svc_" + name, OrgID: acct.org, ProjectID: acct.project, StartedAt: clock.Now()},
			store.MeterSegment{MonthlyMicro: 5_000_000, Lines: "[]", StartedAt: clock.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	// The loops run while the clock goes to 2026-12-02 (November is
	// charged and closed), 2026-12-18 (nothing due) and 2027-01-02.
	for range 2 {
		clock.Advance(16 * 24 * time.Hour)
		time.Sleep(300 * time.Millisecond)
	}
	clock.Advance(15 * 24 * time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cs, _ := b.Store().Meters().Charges(ctx, acct.project); len(cs) == 4 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // more passes on both
	cs, err := st.Meters().Charges(ctx, acct.project)
	if err != nil || len(cs) != 4 {
		t.Fatalf("charges %+v, %v; want 2 services × 2 months", cs, err)
	}
	// 360 of November's 720 hours and all of December's. The budget is
	// monthly: each month's charges count in that month, which closes
	// right after, so January starts from zero.
	var nov, dec money.MicroUSD
	for _, c := range cs {
		switch c.Period {
		case "2026-11":
			nov += c.AmountMicro
		case "2026-12":
			dec += c.AmountMicro
		}
	}
	if nov != 2*2_500_000 || dec != 2*5_000_000 {
		t.Fatalf("November %d, December %d", nov, dec)
	}
	p, _ := st.Projects().Get(ctx, acct.org, acct.project)
	if p.SpentMicro != 0 {
		t.Fatalf("January starts with %d spent", p.SpentMicro)
	}
	entries, _ := st.Ledger().Entries(ctx, acct.org, 0, 1000)
	closed := 0
	for _, e := range entries {
		if e.Action == "budget_period_closed" {
			closed++
			if e.Details["period"] == "2026-12" && e.Details["spentMicroUsd"] != json.Number("10000000") {
				t.Fatalf("December closed with %v", e.Details)
			}
		}
	}
	if closed != 2 {
		t.Fatalf("%d periods closed, want November and December", closed)
	}
}
