package server_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/ledger"
	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/registrar"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

// account is an organisation with a project and an agent key.
type account struct {
	org, project, key, keyID string
	principal                *auth.Principal
}

func newAccount(t *testing.T, ts *testServer, limitMicro money.MicroUSD, pol service.ProjectPolicy, scopes ...string) account {
	t.Helper()
	ctx := context.Background()
	st, svc := ts.Store(), ts.Service()
	o, err := st.Accounts().CreateOrganization(ctx, auth.ID("org"), "test", svc.Now())
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc.Projects.Create(ctx, service.NewProject{OrgID: o.ID, Name: "site", LimitMicro: limitMicro, Policy: pol, CreatedBy: "human:usr_test"})
	if err != nil {
		t.Fatal(err)
	}
	secret, hash := auth.NewKey()
	k := store.APIKey{ID: auth.ID("key"), OrgID: o.ID, Name: "t", Scopes: scopes, CreatedAt: svc.Now()}
	if err := st.Keys().Create(ctx, k, hash); err != nil {
		t.Fatal(err)
	}
	return account{org: o.ID, project: p.ID, key: secret, keyID: k.ID,
		principal: &auth.Principal{Kind: "agent", OrgID: o.ID, KeyID: k.ID, Scopes: scopes, Caller: "key:" + k.ID}}
}

func (a account) header() http.Header { return http.Header{"Authorization": {"Bearer " + a.key}} }

// availableDomains returns n names the sandbox registrar will sell.
func availableDomains(n int, tld, prefix string) []string {
	t, _ := registrar.Lookup(tld)
	var out []string
	for i := 0; len(out) < n; i++ {
		label := fmt.Sprintf("%s%d", prefix, i)
		if registrar.Check(label, t).Available {
			out = append(out, label+"."+tld)
		}
	}
	return out
}

func domainQuote(project, domain string, years int) map[string]any {
	return map[string]any{"projectId": project, "items": []any{map[string]any{"kind": "domain", "domain": domain, "years": years}}}
}

func TestQuotesHoldAndExpire(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		clock := testserver.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
		ts := start(t, server.Config{DatabaseURL: db, Now: clock.Now})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "read", "quote")
		c := ts.Client
		names := availableDomains(3, "dev", "hold")

		r := c.Do("POST", "/v1/quotes", domainQuote(a.project, names[0], 1), a.header())
		q := r.JSON()["data"].(map[string]any)
		if r.StatusCode != 201 || q["decision"] != "ALLOW" || q["state"] != "held" || q["amountUsd"] != 12.0 || q["budgetRemainingUsd"] != 88.0 {
			t.Fatalf("quote: %d %s", r.StatusCode, r.Body)
		}
		if q["holdExpiresAt"] != "2026-11-21T12:15:00Z" {
			t.Fatalf("hold expires %v", q["holdExpiresAt"])
		}
		if gs := q["gatedSteps"].([]any); len(gs) != 1 || gs[0] != "domain_registration" {
			t.Fatalf("a key without buy_domain is gated: %v", gs)
		}
		undo := q["undo"].(map[string]any)["command"].(map[string]any)
		if undo["tool"] != "release_quote" {
			t.Fatalf("undo %v", undo)
		}
		p := c.Do("GET", "/v1/projects/"+a.project, nil, a.header()).JSON()["data"].(map[string]any)
		if p["heldUsd"] != 12.0 || p["remainingUsd"] != 88.0 || len(p["activeHolds"].([]any)) != 1 {
			t.Fatalf("project %v", p)
		}

		// Fifteen minutes later the hold is gone, and consuming it fails typed.
		clock.Advance(15*time.Minute + time.Second)
		p = c.Do("GET", "/v1/projects/"+a.project, nil, a.header()).JSON()["data"].(map[string]any)
		if p["heldUsd"] != 0.0 || p["remainingUsd"] != 100.0 {
			t.Fatalf("after expiry %v", p)
		}
		err := consume(ts, a, q["quoteId"].(string))
		if code(err) != "budget:hold_expired" {
			t.Fatalf("consume expired: %v", err)
		}

		// A fresh quote is consumed once; a second consume is a conflict.
		q2 := c.Do("POST", "/v1/quotes", domainQuote(a.project, names[1], 2), a.header()).JSON()["data"].(map[string]any)
		if q2["amountUsd"] != 24.0 {
			t.Fatalf("two years: %v", q2["amountUsd"])
		}
		if err := consume(ts, a, q2["quoteId"].(string)); err != nil {
			t.Fatal(err)
		}
		if err := consume(ts, a, q2["quoteId"].(string)); code(err) != "conflict:state" {
			t.Fatalf("second consume: %v", err)
		}
		// Release gives a hold back.
		q3 := c.Do("POST", "/v1/quotes", domainQuote(a.project, names[2], 1), a.header()).JSON()["data"].(map[string]any)
		r = c.Do("POST", "/v1/quotes/"+q3["quoteId"].(string)+"/release", nil, a.header())
		if r.StatusCode != 200 || r.JSON()["data"].(map[string]any)["budgetRemainingUsd"] != 76.0 {
			t.Fatalf("release: %d %s", r.StatusCode, r.Body)
		}
		p = c.Do("GET", "/v1/projects/"+a.project, nil, a.header()).JSON()["data"].(map[string]any)
		if p["spentUsd"] != 24.0 || p["heldUsd"] != 0.0 || p["remainingUsd"] != 76.0 {
			t.Fatalf("books %v", p)
		}
	})
}

func TestQuoteDecisions(t *testing.T) {
	ts := start(t, server.Config{})
	c := ts.Client
	pol := service.DefaultPolicy()
	pol.TLDDenylist = []string{"io"}
	ceiling := money.FromUSD(20)
	pol.MaxFirstYearPrice = &ceiling
	a := newAccount(t, ts, 50_000_000, pol, "quote", "read", "buy_domain")

	deny := func(body map[string]any, want ...string) {
		t.Helper()
		r := c.Do("POST", "/v1/quotes", body, a.header())
		q := r.JSON()["data"].(map[string]any)
		if r.StatusCode != 201 || q["decision"] != "DENY" || q["state"] != "not_held" {
			t.Fatalf("%d %s", r.StatusCode, r.Body)
		}
		got := fmt.Sprint(q["reasons"])
		if got != fmt.Sprint(toAny(want)) {
			t.Fatalf("reasons %s want %v", got, want)
		}
	}
	deny(domainQuote(a.project, availableDomains(1, "io", "deny")[0], 1), "policy:tld_denied", "policy:price_ceiling")
	deny(domainQuote(a.project, availableDomains(1, "dev", "big")[0], 10), "budget:insufficient")
	premium := ""
	for i := 0; premium == ""; i++ {
		l := fmt.Sprintf("%c%c", 'a'+i/26, 'a'+i%26)
		if dev, _ := registrar.Lookup("dev"); registrar.Check(l, dev).Available {
			premium = l + ".dev"
		}
	}

	r := c.Do("POST", "/v1/quotes", domainQuote(a.project, availableDomains(1, "dev", "gate")[0], 1), a.header())
	if gs := r.JSON()["data"].(map[string]any)["gatedSteps"].([]any); len(gs) != 0 {
		t.Fatalf("buy_domain skips the gate: %v", gs)
	}
	// Errors about the request itself are typed errors, not decisions.
	taken := ""
	dev, _ := registrar.Lookup("dev")
	for i := 0; taken == ""; i++ {
		if l := fmt.Sprintf("taken%d", i); !registrar.Check(l, dev).Available {
			taken = l + ".dev"
		}
	}
	for body, want := range map[string]struct {
		body   map[string]any
		status int
		code   string
	}{
		"taken":      {domainQuote(a.project, taken, 1), 409, "plan:domain_unavailable"},
		"premium":    {domainQuote(a.project, premium, 1), 422, "price:unavailable"},
		"no project": {domainQuote("prj_nope", availableDomains(1, "dev", "np")[0], 1), 404, "not_found:resource"},
		"service":    {map[string]any{"projectId": a.project, "items": []any{map[string]any{"kind": "service", "workload": "dynamic_service", "target": "edge"}}}, 422, "plan:target_incapable"},
	} {
		r := c.Do("POST", "/v1/quotes", want.body, a.header())
		if r.StatusCode != want.status || r.JSON()["blockedBy"] != want.code {
			t.Fatalf("%s: %d %s", body, r.StatusCode, r.Body)
		}
	}
	// A key without the quote scope is refused.
	ro := newAccount(t, ts, 1, service.DefaultPolicy(), "read")
	r = c.Do("POST", "/v1/quotes", domainQuote(ro.project, "x.dev", 1), ro.header())
	if r.StatusCode != 403 || r.JSON()["blockedBy"] != "auth:insufficient_scope" {
		t.Fatalf("scope: %d %s", r.StatusCode, r.Body)
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func consume(ts *testServer, a account, quoteID string) error {
	return ts.Store().InTx(context.Background(), func(tx *store.Tx) error {
		_, err := ts.Service().Quotes.Consume(context.Background(), tx, a.principal, a.project, quoteID)
		return err
	})
}

func code(err error) sdk.BlockedBy {
	var e *apierr.Error
	if errors.As(err, &e) {
		return e.Code
	}
	if err != nil {
		return "internal:error"
	}
	return ""
}

// 200 goroutines race quotes and consumes against one budget. Spent plus
// held never passes the limit, and the books balance to the micro-dollar.
func TestNoOverspend(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		const limit = 300_000_000 // 300 USD
		a := newAccount(t, ts, limit, service.DefaultPolicy(), "quote", "read")
		ctx := context.Background()
		names := availableDomains(201, "com", "race")
		// One hold made before the race stays held, so that the books have
		// both a held and a consumed side whatever the race's order.
		if _, err := ts.Service().Quotes.Create(ctx, a.principal, service.QuoteRequest{ProjectID: a.project,
			Items: []service.QuoteItem{{Kind: service.ItemDomain, Domain: names[200], Years: 1}}}); err != nil {
			t.Fatal(err)
		}

		raceQuotesAndConsumes(t, ts, a, names[:200])
		p, err := ts.Store().Projects().Get(ctx, a.org, a.project)
		if err != nil {
			t.Fatal(err)
		}
		totals, err := ts.Store().Quotes().Totals(ctx, a.project)
		if err != nil {
			t.Fatal(err)
		}
		if p.SpentMicro+p.HeldMicro > limit {
			t.Fatalf("overspent: spent %d + held %d > %d", p.SpentMicro, p.HeldMicro, limit)
		}
		if p.SpentMicro != totals["consumed"] || p.HeldMicro != totals["held"] {
			t.Fatalf("books do not balance: project spent %d held %d, quotes consumed %d held %d", p.SpentMicro, p.HeldMicro, totals["consumed"], totals["held"])
		}
		if p.SpentMicro == 0 || totals["held"] == 0 {
			t.Fatalf("the race did not exercise both paths: %v", totals)
		}
		ledgerRecordsEverySpend(t, ts, a, p.SpentMicro)
	})
}

// raceQuotesAndConsumes quotes a name each in 100 goroutines and consumes
// in 100 others: quoters hand ALLOW quotes to consumers as they go, so
// quotes and consumes interleave against the same budget. Some holds stay
// held; some are consumed twice, and the second must lose.
func raceQuotesAndConsumes(t *testing.T, ts *testServer, a account, names []string) {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var failures []error
	fail := func(err error) {
		mu.Lock()
		failures = append(failures, err)
		mu.Unlock()
	}
	held := make(chan string, 200)
	var wg, quoters sync.WaitGroup
	quoters.Add(100)
	go func() { quoters.Wait(); close(held) }()
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i%2 == 0 {
				defer quoters.Done()
				q, err := ts.Service().Quotes.Create(ctx, a.principal, service.QuoteRequest{ProjectID: a.project,
					Items: []service.QuoteItem{{Kind: service.ItemDomain, Domain: names[i], Years: 1 + rand.IntN(3)}}})
				if err != nil {
					fail(err)
					return
				}
				// Some holds stay held; some are consumed twice, and the second must lose.
				if q.Decision == service.QuoteAllow && i%6 != 0 {
					held <- q.ID
					if rand.IntN(2) == 0 {
						held <- q.ID
					}
				}
				return
			}
			if id, ok := <-held; ok {
				if err := consume(ts, a, id); err != nil && code(err) != "conflict:state" {
					fail(err)
				}
			}
		}(i)
	}
	wg.Wait()
	for _, err := range failures {
		t.Errorf("unexpected failure: %v", err)
	}
}

// The ledger recorded every movement, its chain holds, and its charges
// add up to what the project spent.
func ledgerRecordsEverySpend(t *testing.T, ts *testServer, a account, spent money.MicroUSD) {
	t.Helper()
	ctx := context.Background()
	entries, err := ts.Store().Ledger().Entries(ctx, a.org, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if b := ledger.Verify(entries); b != nil {
		t.Fatal(b)
	}
	var ledgerSpent money.MicroUSD
	for _, e := range entries {
		if e.Action == "consume_quote" {
			n, _ := e.Details["amountMicroUsd"].(interface{ Int64() (int64, error) }).Int64()
			ledgerSpent += money.MicroUSD(n)
		}
	}
	if ledgerSpent != spent {
		t.Fatalf("ledger spent %d, project spent %d", ledgerSpent, spent)
	}
}

func TestBudgetRaiseAndApprovals(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		c := ts.Client
		a := newAccount(t, ts, 10_000_000, service.DefaultPolicy(), "quote", "read")
		other := newAccount(t, ts, 10_000_000, service.DefaultPolicy(), "quote", "read")
		ctx := context.Background()

		r := c.Do("POST", "/v1/projects/"+a.project+"/budget-raises", map[string]any{"amountUsd": 40, "reason": "domain for the launch"}, a.header())
		task := r.JSON()["data"].(map[string]any)
		if r.StatusCode != 202 || task["state"] != "input_required" || task["kind"] != "budget_raise" {
			t.Fatalf("raise: %d %s", r.StatusCode, r.Body)
		}
		approval := task["approvalUrl"].(string)
		acts := r.JSON()["actions"].([]any)
		if acts[0].(map[string]any)["kind"] != "url" || acts[0].(map[string]any)["url"] != approval || acts[1].(map[string]any)["tool"] != "get_task" {
			t.Fatalf("actions %v", acts)
		}
		taskID := task["taskId"].(string)
		gateID := approval[len(approval)-len("gat_")-20:]

		// Another organisation sees neither the task nor the gate.
		if r := c.Do("GET", "/v1/tasks/"+taskID, nil, other.header()); r.StatusCode != 404 {
			t.Fatalf("foreign task: %d", r.StatusCode)
		}
		if r := c.Do("GET", "/v1/projects/"+a.project, nil, other.header()); r.StatusCode != 404 {
			t.Fatalf("foreign project: %d", r.StatusCode)
		}
		if err := ts.Service().Approvals.Decide(ctx, service.Human{OrgID: other.org, UserID: "usr_x"}, gateID, true); code(err) != "not_found:resource" {
			t.Fatalf("foreign human decided: %v", err)
		}
		if err := ts.Service().Approvals.Decide(ctx, service.Human{OrgID: a.org, UserID: "usr_a"}, gateID, true); err != nil {
			t.Fatal(err)
		}
		if err := ts.Service().Approvals.Decide(ctx, service.Human{OrgID: a.org, UserID: "usr_a"}, gateID, false); code(err) != "conflict:state" {
			t.Fatalf("second decision: %v", err)
		}
		task = c.Do("GET", "/v1/tasks/"+taskID, nil, a.header()).JSON()["data"].(map[string]any)
		if task["state"] != "succeeded" || task["result"].(map[string]any)["budgetLimitUsd"] != 50.0 {
			t.Fatalf("after approval %v", task)
		}
		p := c.Do("GET", "/v1/projects/"+a.project, nil, a.header()).JSON()["data"].(map[string]any)
		if p["budgetLimitUsd"] != 50.0 {
			t.Fatalf("limit %v", p["budgetLimitUsd"])
		}

		// A denied raise fails the task and leaves the budget.
		r = c.Do("POST", "/v1/projects/"+a.project+"/budget-raises", map[string]any{"amountUsd": 1000, "reason": "more"}, a.header())
		approval = r.JSON()["data"].(map[string]any)["approvalUrl"].(string)
		gateID = approval[len(approval)-len("gat_")-20:]
		if err := ts.Service().Approvals.Decide(ctx, service.Human{OrgID: a.org, UserID: "usr_a"}, gateID, false); err != nil {
			t.Fatal(err)
		}
		task = c.Do("GET", "/v1/tasks/"+r.JSON()["data"].(map[string]any)["taskId"].(string), nil, a.header()).JSON()["data"].(map[string]any)
		if task["state"] != "failed" || task["result"].(map[string]any)["decision"] != "denied" {
			t.Fatalf("denied task %v", task)
		}

		// The ledger read over the API verifies.
		page := c.Do("GET", "/v1/ledger?limit=1000", nil, a.header()).JSON()["data"].(map[string]any)
		if len(page["entries"].([]any)) < 5 {
			t.Fatalf("ledger %v", page)
		}
	})
}

func TestQuoteApprovalRule(t *testing.T) {
	ts := start(t, server.Config{})
	pol := service.DefaultPolicy()
	above := money.FromUSD(10)
	pol.ApprovalRules.ApprovalAbove = &above
	a := newAccount(t, ts, 100_000_000, pol, "quote", "read")
	r := ts.Client.Do("POST", "/v1/quotes", domainQuote(a.project, availableDomains(1, "dev", "appr")[0], 1), a.header())
	env := r.JSON()
	q := env["data"].(map[string]any)
	if q["decision"] != "REQUIRES_APPROVAL" || q["state"] != "not_held" || q["budgetRemainingUsd"] != 100.0 {
		t.Fatalf("quote %s", r.Body)
	}
	u := env["actions"].([]any)[0].(map[string]any)
	if u["kind"] != "url" || u["purpose"] != "approve" || u["actor"] != "human" {
		t.Fatalf("actions %v", env["actions"])
	}
	url := u["url"].(string)
	gateID := url[len(url)-len("gat_")-20:]
	if err := ts.Service().Approvals.Decide(context.Background(), service.Human{OrgID: a.org, UserID: "u"}, gateID, true); err != nil {
		t.Fatal(err)
	}
	p := ts.Client.Do("GET", "/v1/projects/"+a.project, nil, a.header()).JSON()["data"].(map[string]any)
	if p["heldUsd"] != 12.0 {
		t.Fatalf("approved quote holds: %v", p)
	}
}
