package server_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// TestAttackSweepChildBudgetsUnderRaces: an agent races to carve more
// children out of its project than its budget holds, then to delete a
// child many times at once and to spend in it while it goes. The parent
// never hands out more than it has, and a child's budget comes back once.
func TestAttackSweepChildBudgetsUnderRaces(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db, RateLimits: attackRates})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
		c := ts.Client
		remaining := func(id string) float64 {
			return c.Do("GET", "/v1/projects/"+id, nil, a.header()).JSON()["data"].(map[string]any)["remainingUsd"].(float64)
		}
		race := func(n int, call func(i int) *http.Response) []int {
			var wg sync.WaitGroup
			codes := make([]int, n)
			for i := range n {
				wg.Go(func() { codes[i] = call(i).StatusCode })
			}
			wg.Wait()
			return codes
		}
		var mu sync.Mutex
		var children []string
		codes := race(8, func(i int) *http.Response {
			h := a.header()
			h.Set("Idempotency-Key", fmt.Sprintf("child-%d", i))
			r := c.Do("POST", "/v1/projects", map[string]any{"name": fmt.Sprintf("child%d", i), "parentProjectId": a.project, "budgetUsd": 40}, h)
			if r.StatusCode == 201 {
				mu.Lock()
				children = append(children, r.JSON()["data"].(map[string]any)["project"].(map[string]any)["id"].(string))
				mu.Unlock()
			}
			return r.Response
		})
		if len(children) != 2 || remaining(a.project) != 20 {
			t.Fatalf("8 children of $40 from $100: %v created %d, the parent has $%v left", codes, len(children), remaining(a.project))
		}
		// Spend in the first child while it is deleted, many times at once.
		child := children[0]
		names := availableDomains(8, "dev", "race")
		race(8, func(i int) *http.Response {
			if i%2 == 0 {
				return c.Do("POST", "/v1/quotes", domainQuote(child, names[i], 1), a.header()).Response
			}
			return c.Do("DELETE", "/v1/projects/"+child, nil, a.header()).Response
		})
		if got := remaining(a.project); got != 60 {
			t.Fatalf("after the child's deletion the parent has $%v, want $60", got)
		}
		if r := c.Do("POST", "/v1/quotes", map[string]any{"projectId": child, "items": []any{map[string]any{"kind": "service", "target": "edge", "workload": "static_site", "name": "late"}}}, a.header()); r.StatusCode != 404 {
			t.Fatalf("a quote in the deleted child: %d %s", r.StatusCode, r.Body)
		}
	})
}
