package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// siteWorkflow quotes a domain and launches a site on it with the quote.
func siteWorkflow(project string, bundle any, domain string) map[string]any {
	return map[string]any{"projectId": project, "steps": []any{
		map[string]any{"id": "q", "tool": "create_quote", "arguments": domainQuote(project, domain, 1)},
		map[string]any{"id": "site", "tool": "launch_service", "arguments": map[string]any{
			"id": project, "name": "www", "target": "edge", "bundleId": bundle, "domain": domain, "quoteId": "${steps.q.quoteId}"}},
	}}
}

func prepare(t *testing.T, ts *testServer, a account, body map[string]any) map[string]any {
	t.Helper()
	r := ts.Client.Do("POST", "/v1/workflows", body, a.header())
	if r.StatusCode != 201 {
		t.Fatalf("prepare: %d %s", r.StatusCode, r.Body)
	}
	return r.JSON()["data"].(map[string]any)
}

func counts(t *testing.T, ts *testServer, a account) string {
	t.Helper()
	spent, held := budget(t, ts, a)
	tasks := ts.Client.Do("GET", "/v1/tasks", nil, a.header()).JSON()["data"].(map[string]any)["tasks"].([]any)
	quotes := ts.Client.Do("GET", "/v1/quotes", nil, a.header()).JSON()["data"].(map[string]any)["quotes"].([]any)
	services := ts.Client.Do("GET", "/v1/services", nil, a.header()).JSON()["data"].(map[string]any)["services"].([]any)
	return fmt.Sprintf("spent=%v held=%v tasks=%d quotes=%d services=%d", spent, held, len(tasks), len(quotes), len(services))
}

func TestWorkflowPrepareReservesNothingAndApplyRunsOnce(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
		domain := availableDomains(1, "dev", "wflow")[0]
		bundle := upload(t, ts, a, siteSaying("planned"))
		before := counts(t, ts, a)

		wf := prepare(t, ts, a, siteWorkflow(a.project, bundle, domain))
		if after := counts(t, ts, a); after != before {
			t.Fatalf("prepare changed something: %s, was %s", after, before)
		}
		if n, _ := ts.Store().Domains().CountPurchases(context.Background(), domain); n != 0 {
			t.Fatal("prepare called the registrar")
		}
		steps := wf["steps"].([]any)
		if wf["totalUsd"] != 12.0 || steps[0].(map[string]any)["priceUsd"] != 12.0 || steps[1].(map[string]any)["irreversible"] != true {
			t.Fatalf("projection: %v", wf)
		}

		// Tampered plan bytes are refused.
		signed := wf["signedPlan"].(string)
		parts := strings.Split(signed, ".")
		tampered := parts[0] + "." + parts[1][:len(parts[1])-2] + "AA." + parts[2]
		r := ts.Client.Do("POST", "/v1/workflows/"+wf["workflowId"].(string)+"/apply", map[string]any{"signedPlan": tampered}, a.header())
		if r.StatusCode != 400 || r.JSON()["blockedBy"] != "plan:signature_invalid" {
			t.Fatalf("tampered: %d %s", r.StatusCode, r.Body)
		}

		// Twenty concurrent applies run one task.
		var mu sync.Mutex
		ids := map[string]int{}
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := ts.Client.Do("POST", "/v1/workflows/"+wf["workflowId"].(string)+"/apply", map[string]any{"signedPlan": signed}, a.header())
				if r.StatusCode != 202 {
					t.Errorf("apply: %d %s", r.StatusCode, r.Body)
					return
				}
				mu.Lock()
				ids[r.JSON()["data"].(map[string]any)["taskId"].(string)]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		if len(ids) != 1 {
			t.Fatalf("concurrent applies made %d tasks: %v", len(ids), ids)
		}
		var task string
		for id := range ids {
			task = id
		}
		done := waitTask(t, ts, a, task, "succeeded")
		if n, _ := ts.Store().Domains().CountPurchases(context.Background(), domain); n != 1 {
			t.Fatalf("purchases %d", n)
		}
		if spent, held := budget(t, ts, a); spent != 12 || held != 0 {
			t.Fatalf("spent %v held %v", spent, held)
		}
		// A second apply replays the first.
		r = ts.Client.Do("POST", "/v1/workflows/"+wf["workflowId"].(string)+"/apply", nil, a.header())
		if r.StatusCode != 202 || r.JSON()["data"].(map[string]any)["taskId"] != task || r.JSON()["replayed"] != true {
			t.Fatalf("second apply: %d %s", r.StatusCode, r.Body)
		}
		_ = done
	})
}
