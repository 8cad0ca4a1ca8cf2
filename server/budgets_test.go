package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/contracttest"
	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
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
	spend := func(micro int64) {
		t.Helper()
		if err := ts.Store().InTx(ctx, func(tx *store.Tx) error { return tx.Projects().MoveMoney(ctx, a.project, 0, micro) }); err != nil {
			t.Fatal(err)
		}
		if err := ts.Service().Projects.MeterPass(ctx); err != nil {
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
