package server_test

import (
	"context"
	"encoding/base64"
	"github.com/pierhq/pier/server/internal/money"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/contracttest"
	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

// addKey gives an account's organisation another key with other scopes.
func addKey(t *testing.T, ts *testServer, a account, scopes ...string) http.Header {
	t.Helper()
	secret, hash := auth.NewKey()
	k := store.APIKey{ID: auth.ID("key"), OrgID: a.org, Name: "t2", Scopes: scopes, CreatedAt: ts.Service().Now()}
	if err := ts.Store().Keys().Create(context.Background(), k, hash); err != nil {
		t.Fatal(err)
	}
	return http.Header{"Authorization": {"Bearer " + secret}}
}

func siteSaying(words string) map[string]string {
	return map[string]string{"index.html": "<!doctype html><h1>" + words + "</h1>"}
}

func upload(t *testing.T, ts *testServer, a account, files map[string]string) any {
	t.Helper()
	r := ts.Client.Do("POST", "/v1/bundles", uploadBody(a.project, files), a.header())
	if r.StatusCode != 201 {
		t.Fatalf("upload: %d %s", r.StatusCode, r.Body)
	}
	return r.JSON()["data"].(map[string]any)["bundleId"]
}

func gateOf(task map[string]any) string {
	u := task["approvalUrl"].(string)
	return u[strings.LastIndex(u, "/")+1:]
}

func budget(t *testing.T, ts *testServer, a account) (spent, held float64) {
	t.Helper()
	p := ts.Client.Do("GET", "/v1/projects/"+a.project, nil, a.header()).JSON()["data"].(map[string]any)
	return p["spentUsd"].(float64), p["heldUsd"].(float64)
}

func searchAvailable(t *testing.T, ts *testServer, domain string) bool {
	t.Helper()
	r := ts.Client.Do("GET", "/v1/domains/search?q="+domain, nil, nil)
	for _, c := range r.JSON()["data"].(map[string]any)["candidates"].([]any) {
		c := c.(map[string]any)
		if c["domain"] == domain {
			return c["available"].(bool)
		}
	}
	t.Fatalf("%s not in the search result: %s", domain, r.Body)
	return false
}

// hostBody fetches / for host over plain HTTP and over the TLS listener.
func hostBody(t *testing.T, ts *testServer, host string) (httpBody, httpsBody string, httpsErr error) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+ts.Addr()+"/", nil)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	httpBody = string(b)
	resp, httpsErr = httpsClient(ts).Get("https://" + host + "/")
	if httpsErr == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		httpsBody = string(b)
	}
	return
}

// A domain another organisation bought is unavailable to search, refused to
// a quote, refused to a launch without a quote and to one with an older
// quote, whose hold is released.
func TestDomainOwnershipIsAFact(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
		b := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
		c := ts.Client
		domain := availableDomains(1, "dev", "fact")[0]
		if !searchAvailable(t, ts, domain) {
			t.Fatal("a free name shows taken")
		}
		// B quotes first; A buys.
		bq := c.Do("POST", "/v1/quotes", domainQuote(b.project, domain, 1), b.header()).JSON()["data"].(map[string]any)
		aq := c.Do("POST", "/v1/quotes", domainQuote(a.project, domain, 1), a.header()).JSON()["data"].(map[string]any)
		r := c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": upload(t, ts, a, siteSaying("A")), "domain": domain, "quoteId": aq["quoteId"]}, a.header())
		waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")

		if searchAvailable(t, ts, domain) {
			t.Fatal("search shows a sold name available")
		}
		r = c.Do("POST", "/v1/quotes", domainQuote(b.project, domain, 1), b.header())
		if r.StatusCode != 409 || r.JSON()["blockedBy"] != "plan:domain_unavailable" {
			t.Fatalf("quote for a sold name: %d %s", r.StatusCode, r.Body)
		}
		bundle := upload(t, ts, b, siteSaying("B"))
		r = c.Do("POST", "/v1/projects/"+b.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": bundle, "domain": domain}, b.header())
		if r.StatusCode != 409 || r.JSON()["blockedBy"] != "plan:domain_unavailable" {
			t.Fatalf("launch without quote on a sold name: %d %s", r.StatusCode, r.Body)
		}
		r = c.Do("POST", "/v1/projects/"+b.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": bundle, "domain": domain, "quoteId": bq["quoteId"]}, b.header())
		if r.StatusCode != 409 || r.JSON()["blockedBy"] != "plan:domain_unavailable" {
			t.Fatalf("launch with an older quote on a sold name: %d %s", r.StatusCode, r.Body)
		}
		if spent, held := budget(t, ts, b); spent != 0 || held != 0 {
			t.Fatalf("B charged %v, held %v", spent, held)
		}
		if n, _ := ts.Store().Domains().CountPurchases(context.Background(), domain); n != 1 {
			t.Fatalf("purchases %d", n)
		}
		// A's own quote for its own name is refused too, pointing at a
		// launch that needs no purchase; that launch attaches the domain.
		r = c.Do("POST", "/v1/quotes", domainQuote(a.project, domain, 1), a.header())
		if r.StatusCode != 409 || r.JSON()["blockedBy"] != "plan:domain_unavailable" {
			t.Fatalf("own quote: %d %s", r.StatusCode, r.Body)
		}
	})
}

// Two organisations, one name: B's human denies B's purchase, then both
// race to buy it. Exactly one purchase; the loser is refused or fails with
// a typed error and pays nothing; the edge over HTTP and the TLS listener
// serve only the owner's content for the name.
func TestTakeoverScenario(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
		b := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
		bBuyer := addKey(t, ts, b, "launch", "read", "quote", "buy_domain")
		domain := availableDomains(1, "dev", "takeover")[0]
		aBundle, bBundle := upload(t, ts, a, siteSaying("Owner A")), upload(t, ts, b, siteSaying("Intruder B"))

		deniedPurchaseTakesNothing(t, ts, a, b, domain, bBundle)
		ra, rb := raceForTheDomain(t, ts, a, b, bBuyer, domain, aBundle, bBundle)
		oa, ob := raceOutcome(t, ts, a, ra), raceOutcome(t, ts, b, rb)
		if n, _ := ts.Store().Domains().CountPurchases(context.Background(), domain); n != 1 {
			t.Fatalf("purchases after the race: %d", n)
		}
		if (oa == "won") == (ob == "won") {
			t.Fatalf("race outcomes %s %s", oa, ob)
		}
		owner, loser, want, not := a, b, "Owner A", "Intruder B"
		if ob == "won" {
			owner, loser, want, not = b, a, "Intruder B", "Owner A"
		}
		if spent, held := budget(t, ts, loser); held != 0 || spent != 0 {
			t.Fatalf("the loser was charged %v, holds %v", spent, held)
		}
		if spent, _ := budget(t, ts, owner); spent != 12.0 {
			t.Fatalf("the owner was charged %v", spent)
		}
		for _, host := range []string{domain, "www." + domain} {
			h, s, err := hostBody(t, ts, host)
			if err != nil || !strings.Contains(h, want) || !strings.Contains(s, want) || strings.Contains(h+s, not) {
				t.Fatalf("%s serves http %q https %q (%v)", host, h, s, err)
			}
		}
	})
}

// B launches with the name; its own human denies the purchase. While it
// is in flight the name is taken for everyone; after the denial B is
// charged nothing and the domain serves nothing.
func deniedPurchaseTakesNothing(t *testing.T, ts *testServer, a, b account, domain string, bBundle any) {
	t.Helper()
	c := ts.Client
	bq := c.Do("POST", "/v1/quotes", domainQuote(b.project, domain, 1), b.header()).JSON()["data"].(map[string]any)
	r := c.Do("POST", "/v1/projects/"+b.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": bBundle, "domain": domain, "quoteId": bq["quoteId"]}, b.header())
	if r.StatusCode != 202 {
		t.Fatalf("B launch: %d %s", r.StatusCode, r.Body)
	}
	bTask := r.JSON()["data"].(map[string]any)["taskId"].(string)
	waiting := waitTask(t, ts, b, bTask, "input_required")
	// While B's purchase is in flight, the name is taken for everyone.
	if searchAvailable(t, ts, domain) {
		t.Fatal("a name being bought shows available")
	}
	if r := c.Do("POST", "/v1/quotes", domainQuote(a.project, domain, 1), a.header()); r.StatusCode != 409 {
		t.Fatalf("quote during B's purchase: %d %s", r.StatusCode, r.Body)
	}
	if err := ts.Service().Approvals.Decide(context.Background(), service.Human{OrgID: b.org, UserID: "usr_b"}, gateOf(waiting), false); err != nil {
		t.Fatal(err)
	}
	done := waitTask(t, ts, b, bTask, "succeeded")
	if done["domainUrl"] != nil || done["httpsReady"].(map[string]any)["domain"] != false {
		t.Fatalf("denied domain reported ready: %v", done)
	}
	for _, st := range done["steps"].([]any) {
		st := st.(map[string]any)
		if st["name"] == service.StepRegister && st["state"] != "denied" {
			t.Fatalf("register step after a denial: %v", st)
		}
	}
	rc := done["receipt"].(map[string]any)
	if rc["totalUsd"] != 0.0 || rc["costs"].([]any)[0].(map[string]any)["amountUsd"] != 0.0 {
		t.Fatalf("receipt after a denial: %v", rc)
	}
	if done["undo"].(map[string]any)["irreversible"] != false {
		t.Fatalf("undo after a denial: %v", done["undo"])
	}
	svc, err := ts.Store().Services().Get(context.Background(), b.org, done["serviceId"].(string))
	if err != nil || svc.Domain != "" {
		t.Fatalf("denied service keeps domain %q (%v)", svc.Domain, err)
	}
	if spent, _ := budget(t, ts, b); spent != 0 {
		t.Fatalf("B charged %v after a denial", spent)
	}
	if h, _, err := hostBody(t, ts, domain); strings.Contains(h, "Intruder") || err == nil {
		t.Fatalf("denied domain served: %q %v", h, err)
	}
}

// The race: both hold quotes, both launch with buy_domain at once. It
// answers the two launches' responses.
func raceForTheDomain(t *testing.T, ts *testServer, a, b account, bBuyer http.Header, domain string, aBundle, bBundle any) (ra, rb *contracttest.Response) {
	t.Helper()
	c := ts.Client
	aq := c.Do("POST", "/v1/quotes", domainQuote(a.project, domain, 1), a.header()).JSON()["data"].(map[string]any)
	bq2 := c.Do("POST", "/v1/quotes", domainQuote(b.project, domain, 1), bBuyer).JSON()["data"].(map[string]any)
	if aq["decision"] != "ALLOW" || bq2["decision"] != "ALLOW" {
		t.Fatalf("quotes %v %v", aq, bq2)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		ra = c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": aBundle, "domain": domain, "quoteId": aq["quoteId"]}, a.header())
	}()
	go func() {
		defer wg.Done()
		rb = c.Do("POST", "/v1/projects/"+b.project+"/launch", map[string]any{"name": "web", "target": "edge", "bundleId": bBundle, "domain": domain, "quoteId": bq2["quoteId"]}, bBuyer)
	}()
	wg.Wait()
	return ra, rb
}

// raceOutcome answers how a launch of the race ended: refused at once,
// won, or failed for want of the domain and charged nothing.
func raceOutcome(t *testing.T, ts *testServer, acc account, r *contracttest.Response) string {
	t.Helper()
	if r.StatusCode == 409 {
		if r.JSON()["blockedBy"] != "plan:domain_unavailable" {
			t.Fatalf("loser refused with %s", r.Body)
		}
		return "refused"
	}
	if r.StatusCode != 202 {
		t.Fatalf("launch: %d %s", r.StatusCode, r.Body)
	}
	id := r.JSON()["data"].(map[string]any)["taskId"].(string)
	for {
		task := ts.Client.Do("GET", "/v1/tasks/"+id, nil, acc.header()).JSON()["data"].(map[string]any)
		switch task["state"] {
		case "succeeded":
			return "won"
		case "failed":
			res := task["result"].(map[string]any)
			if res["blockedBy"] != "plan:domain_unavailable" || res["chargedUsd"] != 0.0 {
				t.Fatalf("loser's task: %v", res)
			}
			return "failed"
		}
	}
}

// A name sold elsewhere between the quote and the purchase ends the launch
// failed with a typed error, everything refunded and the name free again.
func TestLaunchFailsAndRefundsWhenNameSold(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
		c := ts.Client
		domain := availableDomains(1, "dev", "soldaway")[0]
		bundle := upload(t, ts, a, siteFiles)
		q := c.Do("POST", "/v1/quotes", domainQuote(a.project, domain, 1), a.header()).JSON()["data"].(map[string]any)
		r := c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": bundle, "domain": domain, "quoteId": q["quoteId"]}, a.header())
		taskID := r.JSON()["data"].(map[string]any)["taskId"].(string)
		waiting := waitTask(t, ts, a, taskID, "input_required")
		// The registrar sells the name to someone outside Pier meanwhile.
		if _, err := ts.Store().Domains().RecordPurchase(context.Background(), store.Purchase{Ref: "elsewhere", Domain: domain, OrgID: "org_elsewhere", Years: 1, AuthCode: "x", CreatedAt: ts.Service().Now()}); err != nil {
			t.Fatal(err)
		}
		if err := ts.Service().Approvals.Decide(context.Background(), service.Human{OrgID: a.org, UserID: "u"}, gateOf(waiting), true); err != nil {
			t.Fatal(err)
		}
		failed := waitTask(t, ts, a, taskID, "failed")
		res := failed["result"].(map[string]any)
		if res["blockedBy"] != "plan:domain_unavailable" || res["retryable"] != false || res["refundedUsd"] != 12.0 || res["chargedUsd"] != 0.0 {
			t.Fatalf("failed result %v", res)
		}
		if failed["receipt"].(map[string]any)["totalUsd"] != 0.0 {
			t.Fatalf("receipt %v", failed["receipt"])
		}
		if spent, held := budget(t, ts, a); spent != 0 || held != 0 {
			t.Fatalf("charged %v held %v", spent, held)
		}
		page := c.Do("GET", "/v1/ledger?limit=1000", nil, a.header()).JSON()["data"].(map[string]any)
		refunds := 0
		for _, e := range page["entries"].([]any) {
			if e.(map[string]any)["action"] == "refund" {
				refunds++
			}
		}
		if refunds != 1 {
			t.Fatalf("%d refunds", refunds)
		}
		// The name is free in the project again.
		r = c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": bundle}, a.header())
		if r.StatusCode != 202 {
			t.Fatalf("relaunch: %d %s", r.StatusCode, r.Body)
		}
		waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	})
}

// A launch whose step keeps failing transiently is retried a bounded number
// of times; then the task fails with provider:failed, and what the launch
// charged and did not get is refunded.
func TestLaunchGivesUpOnTransientFailure(t *testing.T) {
	retries := server.TaskRetries{MaxAttempts: 3, Backoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Poll: 50 * time.Millisecond}
	// Every run hangs right after the charge until its job times out:
	// nothing is bought, so the domain's price comes back.
	t.Run("step_hangs", func(t *testing.T) {
		engines(t, func(t *testing.T, db string) {
			ts := start(t, server.Config{DatabaseURL: db, TaskRetries: retries, TaskJobTimeout: 300 * time.Millisecond,
				StepPause: service.StepPause{After: service.StepCharge}})
			a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
			c := ts.Client
			bundle := upload(t, ts, a, siteFiles)
			domain := availableDomains(1, "dev", "hang")[0]
			q := c.Do("POST", "/v1/quotes", domainQuote(a.project, domain, 1), a.header()).JSON()["data"].(map[string]any)
			r := c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": bundle, "domain": domain, "quoteId": q["quoteId"]}, a.header())
			if r.StatusCode != 202 {
				t.Fatalf("launch: %d %s", r.StatusCode, r.Body)
			}
			if spent, _ := budget(t, ts, a); spent != 12 {
				t.Fatalf("the launch charged %v, want 12", spent)
			}
			failed := waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "failed")
			res := failed["result"].(map[string]any)
			if res["blockedBy"] != "provider:failed" || res["retryable"] != false || res["refundedUsd"] != 12.0 || res["chargedUsd"] != 0.0 {
				t.Fatalf("failed result %v", res)
			}
			if spent, held := budget(t, ts, a); spent != 0 || held != 0 {
				t.Fatalf("after the failure: spent %v held %v", spent, held)
			}
			if !searchAvailable(t, ts, domain) {
				t.Fatalf("%s stays taken after a launch that never bought it", domain)
			}
		})
	})
	// The ACME server is down: no certificate ever comes.
	t.Run("acme_down", func(t *testing.T) {
		engines(t, func(t *testing.T, db string) {
			ts := start(t, server.Config{DatabaseURL: db, TaskRetries: retries, ACMEDirectory: "http://127.0.0.1:1/directory"})
			a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
			r := ts.Client.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": upload(t, ts, a, siteFiles)}, a.header())
			if r.StatusCode != 202 {
				t.Fatalf("launch: %d %s", r.StatusCode, r.Body)
			}
			failed := waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "failed")
			if res := failed["result"].(map[string]any); res["blockedBy"] != "provider:failed" || !strings.Contains(res["message"].(string), "certificate") {
				t.Fatalf("failed result %v", res)
			}
		})
	})
}

// A quote prices one launch: its target, its service name and its domain.
func TestQuoteMustMatchLaunch(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
		c := ts.Client
		bundle := upload(t, ts, a, siteFiles)
		domain := availableDomains(1, "dev", "match")[0]
		refused := func(body map[string]any) map[string]any {
			t.Helper()
			r := c.Do("POST", "/v1/projects/"+a.project+"/launch", body, a.header())
			if r.StatusCode != 409 || r.JSON()["blockedBy"] != "conflict:quote_mismatch" {
				t.Fatalf("mismatch launch: %d %s", r.StatusCode, r.Body)
			}
			return r.JSON()
		}
		// A domain quote launched without the domain.
		dq := c.Do("POST", "/v1/quotes", domainQuote(a.project, domain, 1), a.header()).JSON()["data"].(map[string]any)
		env := refused(map[string]any{"name": "site", "target": "edge", "bundleId": bundle, "quoteId": dq["quoteId"]})
		// A process quote launched as edge.
		pq := c.Do("POST", "/v1/quotes", map[string]any{"projectId": a.project, "items": []any{map[string]any{"kind": "service", "workload": "static_site", "target": "process", "name": "site"}}}, a.header()).JSON()["data"].(map[string]any)
		refused(map[string]any{"name": "site", "target": "edge", "bundleId": bundle, "quoteId": pq["quoteId"]})
		// A quote for another service name.
		nq := c.Do("POST", "/v1/quotes", map[string]any{"projectId": a.project, "items": []any{map[string]any{"kind": "service", "workload": "static_site", "target": "edge", "name": "blog"}}}, a.header()).JSON()["data"].(map[string]any)
		refused(map[string]any{"name": "site", "target": "edge", "bundleId": bundle, "quoteId": nq["quoteId"]})
		if spent, _ := budget(t, ts, a); spent != 0 {
			t.Fatalf("a refused launch charged %v", spent)
		}
		// The refusal's action re-quotes with complete arguments, and the new
		// quote launches.
		act := env["actions"].([]any)[0].(map[string]any)
		if act["tool"] != "launch_service" && act["tool"] != "create_quote" {
			t.Fatalf("first action %v", act)
		}
		// Launching the domain quote with its domain works.
		r := c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": bundle, "domain": domain, "quoteId": dq["quoteId"]}, a.header())
		if r.StatusCode != 202 {
			t.Fatalf("matching launch: %d %s", r.StatusCode, r.Body)
		}
		data := r.JSON()["data"].(map[string]any)
		undo := data["undo"].(map[string]any)
		if undo["irreversible"] != true || !strings.Contains(strings.Join(toStrings(undo["notReversed"]), ","), "domain_registration:"+domain) {
			t.Fatalf("undo of a purchase: %v", undo)
		}
		waitTask(t, ts, a, data["taskId"].(string), "succeeded")
		// A quote whose service item names edge and this service launches.
		eq := c.Do("POST", "/v1/quotes", map[string]any{"projectId": a.project, "items": []any{map[string]any{"kind": "service", "workload": "static_site", "target": "edge", "name": "blog"}}}, a.header()).JSON()["data"].(map[string]any)
		r = c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "blog", "target": "edge", "bundleId": bundle, "quoteId": eq["quoteId"]}, a.header())
		if r.StatusCode != 202 {
			t.Fatalf("service quote launch: %d %s", r.StatusCode, r.Body)
		}
	})
}

// A launch never sets up mail (setup_email does), so a quote holding the
// mail add-on does not launch: the launch is refused with nothing consumed,
// and the quote's own envelope offers setup_email, not launch_service.
func TestQuoteWithMailDoesNotLaunch(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		m := &mailQuotes{t: t, ts: ts, a: newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")}
		m.bundle = upload(t, ts, m.a, siteFiles)
		m.domain = availableDomains(1, "dev", "mailq")[0]
		email := map[string]any{"kind": "email", "domain": m.domain}

		// An email-only quote: its envelope offers setup_email, and a launch
		// without a domain is refused rather than charged for mail.
		mq := m.quote(email)
		if got := toolActions(mq); len(got) == 0 || got[0] != "setup_email" || slices.Contains(got, "launch_service") {
			t.Fatalf("an email-only quote offers %v", got)
		}
		mid := mq["data"].(map[string]any)["quoteId"]
		if got := toolActions(ts.Client.Do("GET", "/v1/quotes/"+mid.(string), nil, m.a.header()).JSON()); len(got) == 0 || got[0] != "setup_email" {
			t.Fatalf("get_quote of an email-only quote offers %v", got)
		}
		env := m.refused(map[string]any{"name": "site", "target": "edge", "bundleId": m.bundle, "quoteId": mid})
		if got := toolActions(env); !slices.Contains(got, "release_quote") {
			t.Fatalf("refusal offers %v", got)
		}
		m.held(mid)

		m.domainWithMailIsRequotedAlone(email)
	})
}

// toolActions answers the tools an envelope's actions name, in order.
func toolActions(env map[string]any) []string {
	var out []string
	for _, x := range env["actions"].([]any) {
		act := x.(map[string]any)
		if act["kind"] == "tool" {
			out = append(out, act["tool"].(string))
		}
	}
	return out
}

// mailQuotes is an account with a site to launch and a domain to quote
// mail for.
type mailQuotes struct {
	t      *testing.T
	ts     *testServer
	a      account
	bundle any
	domain string
}

// quote holds a quote for items and answers its envelope.
func (m *mailQuotes) quote(items ...any) map[string]any {
	m.t.Helper()
	r := m.ts.Client.Do("POST", "/v1/quotes", map[string]any{"projectId": m.a.project, "items": items}, m.a.header())
	if r.StatusCode != 201 || r.JSON()["data"].(map[string]any)["state"] != "held" {
		m.t.Fatalf("quote: %d %s", r.StatusCode, r.Body)
	}
	return r.JSON()
}

// refused wants the launch refused for a quote that does not match it.
func (m *mailQuotes) refused(body map[string]any) map[string]any {
	m.t.Helper()
	r := m.ts.Client.Do("POST", "/v1/projects/"+m.a.project+"/launch", body, m.a.header())
	if r.StatusCode != 409 || r.JSON()["blockedBy"] != "conflict:quote_mismatch" {
		m.t.Fatalf("launch with a mail quote: %d %s", r.StatusCode, r.Body)
	}
	return r.JSON()
}

// held wants the quote still held after a refused launch.
func (m *mailQuotes) held(id any) {
	m.t.Helper()
	q := m.ts.Client.Do("GET", "/v1/quotes/"+id.(string), nil, m.a.header()).JSON()["data"].(map[string]any)
	if q["state"] != "held" {
		m.t.Fatalf("quote %v after a refused launch: %v", id, q["state"])
	}
}

// A domain quote with mail for it: the launch that buys the domain is
// refused, and the re-quote prices the domain alone.
func (m *mailQuotes) domainWithMailIsRequotedAlone(email map[string]any) {
	t, ts, a, c := m.t, m.ts, m.a, m.ts.Client
	t.Helper()
	dm := m.quote(map[string]any{"kind": "domain", "domain": m.domain, "years": 1}, email)
	did := dm["data"].(map[string]any)["quoteId"]
	if got := toolActions(dm); slices.Contains(got, "launch_service") {
		t.Fatalf("a quote holding mail offers %v", got)
	}
	env := m.refused(map[string]any{"name": "site", "target": "edge", "bundleId": m.bundle, "domain": m.domain, "quoteId": did})
	m.held(did)
	if spent, _ := budget(t, ts, a); spent != 0 {
		t.Fatalf("refused launches charged %v", spent)
	}
	noLoop(t, ts, a.header(), env)
	act := env["actions"].([]any)[0].(map[string]any)
	if act["tool"] != "create_quote" {
		t.Fatalf("first action %v", act)
	}
	for _, it := range act["arguments"].(map[string]any)["items"].([]any) {
		if it.(map[string]any)["kind"] == "email" {
			t.Fatalf("the re-quote still prices mail: %v", act)
		}
	}
	// noLoop created the re-quote; launch with a fresh one like it.
	rq := c.Do("POST", "/v1/quotes", act["arguments"], a.header()).JSON()["data"].(map[string]any)
	r := c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": m.bundle, "domain": m.domain, "quoteId": rq["quoteId"]}, a.header())
	if r.StatusCode != 202 {
		t.Fatalf("launch with the re-quote: %d %s", r.StatusCode, r.Body)
	}
	waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	if spent, _ := budget(t, ts, a); spent != 12 {
		t.Fatalf("the launch charged %v, want the domain's 12", spent)
	}
}

func toStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// follow calls a typed tool action over REST: its method and path, with
// the arguments that are not in the path as the body.
func follow(t *testing.T, ts *testServer, h http.Header, act map[string]any) *contracttest.Response {
	t.Helper()
	hp := act["http"].(map[string]any)
	path := hp["path"].(string)
	args, _ := act["arguments"].(map[string]any)
	body := map[string]any{}
	for k, v := range args {
		if s, ok := v.(string); ok && strings.Contains(path, "/"+s) {
			continue
		}
		body[k] = v
	}
	method := hp["method"].(string)
	if method == "GET" {
		q := []string{}
		for k, v := range body {
			if s, ok := v.(string); ok {
				q = append(q, k+"="+s)
			}
		}
		if len(q) > 0 {
			path += "?" + strings.Join(q, "&")
		}
		return ts.Client.Do("GET", path, nil, h)
	}
	return ts.Client.Do(method, path, body, h)
}

// noLoop follows every tool action of an error envelope and fails when one
// answers with the same error.
func noLoop(t *testing.T, ts *testServer, h http.Header, env map[string]any) {
	t.Helper()
	code := env["blockedBy"]
	for _, a := range env["actions"].([]any) {
		act := a.(map[string]any)
		if act["kind"] != "tool" {
			continue
		}
		r := follow(t, ts, h, act)
		if r.JSON()["blockedBy"] == code {
			t.Fatalf("action %v leads back to %s: %s", act, code, r.Body)
		}
	}
}

// Over the approval threshold a launch waits for the human on the quote's
// own gate and finishes on approval, with no new quote; a budget raise the
// human approves lets the blocked launch through; no action offered on the
// way leads back to the error that offered it.
func TestApprovalsFinish(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		pol := service.DefaultPolicy()
		five := money.FromUSD(5)
		pol.ApprovalRules.ApprovalAbove = &five
		a := newAccount(t, ts, 100_000_000, pol, "launch", "read", "quote", "buy_domain")
		c := ts.Client
		bundle := upload(t, ts, a, siteFiles)
		names := availableDomains(3, "dev", "approve")

		// Launch first, approve after.
		q := c.Do("POST", "/v1/quotes", domainQuote(a.project, names[0], 1), a.header()).JSON()["data"].(map[string]any)
		if q["decision"] != "REQUIRES_APPROVAL" {
			t.Fatalf("quote %v", q)
		}
		r := c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "one", "target": "edge", "bundleId": bundle, "domain": names[0], "quoteId": q["quoteId"]}, a.header())
		if r.StatusCode != 202 {
			t.Fatalf("launch on an unapproved quote: %d %s", r.StatusCode, r.Body)
		}
		task := r.JSON()["data"].(map[string]any)
		if task["state"] != "input_required" || task["approvalUrl"] == nil {
			t.Fatalf("launch should wait for the human: %v", task)
		}
		if err := ts.Service().Approvals.Decide(context.Background(), service.Human{OrgID: a.org, UserID: "u"}, gateOf(task), true); err != nil {
			t.Fatal(err)
		}
		waitTask(t, ts, a, task["taskId"].(string), "succeeded")

		// Approve first, launch after: the approved quote is consumable.
		q = c.Do("POST", "/v1/quotes", domainQuote(a.project, names[1], 1), a.header()).JSON()
		gate := ""
		for _, x := range q["actions"].([]any) {
			if u, ok := x.(map[string]any)["url"].(string); ok {
				gate = u[strings.LastIndex(u, "/")+1:]
			}
		}
		if err := ts.Service().Approvals.Decide(context.Background(), service.Human{OrgID: a.org, UserID: "u"}, gate, true); err != nil {
			t.Fatal(err)
		}
		r = c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "two", "target": "edge", "bundleId": bundle, "domain": names[1], "quoteId": q["data"].(map[string]any)["quoteId"]}, a.header())
		if r.StatusCode != 202 {
			t.Fatalf("launch on an approved quote: %d %s", r.StatusCode, r.Body)
		}
		waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")

		b, bb := raiseLetsADeniedDomainThrough(t, ts, names[2])

		// The other refusals of this issue offer no way back to themselves.
		other := availableDomains(4, "dev", "approve")[3]
		// b spent its whole budget: the quote itself is refused
		// (budget:exhausted), or, were there room, the launch with it.
		if env := c.Do("POST", "/v1/quotes", domainQuote(b.project, other, 1), b.header()).JSON(); env["blockedBy"] != nil {
			noLoop(t, ts, b.header(), env)
		} else {
			mq := env["data"].(map[string]any)
			mm := c.Do("POST", "/v1/projects/"+b.project+"/launch", map[string]any{"name": "x", "target": "edge", "bundleId": bb, "quoteId": mq["quoteId"]}, b.header())
			noLoop(t, ts, b.header(), mm.JSON())
		}
		taken := c.Do("POST", "/v1/quotes", domainQuote(a.project, names[2], 1), a.header())
		noLoop(t, ts, a.header(), taken.JSON())
	})
}

// A budget too small: the quote is denied, the launch with it is blocked,
// the raise the human approves lets a new quote through. It answers the
// account and its bundle.
func raiseLetsADeniedDomainThrough(t *testing.T, ts *testServer, domain string) (account, any) {
	t.Helper()
	c := ts.Client
	b := newAccount(t, ts, 5_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	bb := upload(t, ts, b, siteFiles)
	denied := c.Do("POST", "/v1/quotes", domainQuote(b.project, domain, 1), b.header()).JSON()
	if denied["data"].(map[string]any)["decision"] != "DENY" {
		t.Fatalf("quote %v", denied)
	}
	blocked := c.Do("POST", "/v1/projects/"+b.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": bb, "domain": domain, "quoteId": denied["data"].(map[string]any)["quoteId"]}, b.header())
	if blocked.StatusCode < 400 {
		t.Fatalf("launch on a denied quote: %d %s", blocked.StatusCode, blocked.Body)
	}
	noLoop(t, ts, b.header(), blocked.JSON())
	var raise map[string]any
	for _, x := range denied["actions"].([]any) {
		if x.(map[string]any)["tool"] == "request_budget_raise" {
			raise = x.(map[string]any)
		}
	}
	rr := follow(t, ts, b.header(), raise)
	if rr.StatusCode != 202 {
		t.Fatalf("raise: %d %s", rr.StatusCode, rr.Body)
	}
	if err := ts.Service().Approvals.Decide(context.Background(), service.Human{OrgID: b.org, UserID: "u"}, gateOf(rr.JSON()["data"].(map[string]any)), true); err != nil {
		t.Fatal(err)
	}
	q2 := c.Do("POST", "/v1/quotes", domainQuote(b.project, domain, 1), b.header()).JSON()["data"].(map[string]any)
	if q2["decision"] != "ALLOW" {
		t.Fatalf("after the raise: %v", q2)
	}
	r := c.Do("POST", "/v1/projects/"+b.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": bb, "domain": domain, "quoteId": q2["quoteId"]}, b.header())
	if r.StatusCode != 202 {
		t.Fatalf("launch after the raise: %d %s", r.StatusCode, r.Body)
	}
	waitTask(t, ts, b, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	return b, bb
}

// Teardown gives back the name, the hosts and a launch's hold: a torn-down
// name launches again, and a launch waiting for a human is canceled and
// refunded, its domain free.
func TestTeardownReleasesNameHoldAndHost(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
		c := ts.Client
		bundle := upload(t, ts, a, siteSaying("first"))
		r := c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": bundle}, a.header())
		done := waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
		td := c.Do("POST", "/v1/services/"+done["serviceId"].(string)+"/teardown", nil, a.header())
		waitTask(t, ts, a, td.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
		second := upload(t, ts, a, siteSaying("second"))
		r = c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": second}, a.header())
		if r.StatusCode != 202 {
			t.Fatalf("a torn-down name: %d %s", r.StatusCode, r.Body)
		}
		again := waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
		host := strings.Split(strings.TrimPrefix(again["previewUrl"].(string), "https://"), ":")[0]
		if h, s, err := hostBody(t, ts, host); !strings.Contains(h, "second") || !strings.Contains(s, "second") {
			t.Fatalf("relaunched name serves %q %q %v", h, s, err)
		}

		// A launch waiting for the human is torn down: canceled, refunded,
		// the name and the domain free.
		domain := availableDomains(1, "dev", "teardown")[0]
		q := c.Do("POST", "/v1/quotes", domainQuote(a.project, domain, 1), a.header()).JSON()["data"].(map[string]any)
		r = c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "shop", "target": "edge", "bundleId": bundle, "domain": domain, "quoteId": q["quoteId"]}, a.header())
		lt := r.JSON()["data"].(map[string]any)
		waitTask(t, ts, a, lt["taskId"].(string), "input_required")
		td = c.Do("POST", "/v1/services/"+lt["serviceId"].(string)+"/teardown", nil, a.header())
		if td.StatusCode != 202 {
			t.Fatalf("teardown of a waiting launch: %d %s", td.StatusCode, td.Body)
		}
		waitTask(t, ts, a, td.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
		canceled := c.Do("GET", "/v1/tasks/"+lt["taskId"].(string), nil, a.header()).JSON()["data"].(map[string]any)
		if canceled["state"] != "canceled" || canceled["result"].(map[string]any)["refundedUsd"] != 12.0 {
			t.Fatalf("waiting launch after teardown: %v", canceled)
		}
		if spent, held := budget(t, ts, a); spent != 0 || held != 0 {
			t.Fatalf("charged %v held %v", spent, held)
		}
		if !searchAvailable(t, ts, domain) {
			t.Fatal("the torn-down launch still holds the domain")
		}
		if n, _ := ts.Store().Domains().CountPurchases(context.Background(), domain); n != 0 {
			t.Fatal("bought")
		}
	})
}

var _ = base64.StdEncoding
var _ sdk.BlockedBy

// A domain the organisation bought stays its own after the service that
// bought it is torn down: a later launch attaches it without a quote, a
// purchase or a charge, and serves on it.
func TestOwnedDomainAttachesWithoutBuyingAgain(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
		c := ts.Client
		domain := availableDomains(1, "dev", "owned")[0]
		q := c.Do("POST", "/v1/quotes", domainQuote(a.project, domain, 1), a.header()).JSON()["data"].(map[string]any)
		r := c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "first", "target": "edge",
			"bundleId": upload(t, ts, a, siteSaying("first")), "domain": domain, "quoteId": q["quoteId"]}, a.header())
		done := waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
		td := c.Do("POST", "/v1/services/"+done["serviceId"].(string)+"/teardown", nil, a.header())
		waitTask(t, ts, a, td.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
		spentBefore, _ := budget(t, ts, a)

		r = c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "second", "target": "edge",
			"bundleId": upload(t, ts, a, siteSaying("second on its own domain")), "domain": domain}, a.header())
		if r.StatusCode != 202 {
			t.Fatalf("launch on an owned domain without a quote: %d %s", r.StatusCode, r.Body)
		}
		again := waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
		if spent, held := budget(t, ts, a); spent != spentBefore || held != 0 {
			t.Fatalf("attaching an owned domain charged %v (held %v), was %v", spent, held, spentBefore)
		}
		if n, _ := ts.Store().Domains().CountPurchases(context.Background(), domain); n != 1 {
			t.Fatalf("the registrar sold %s %d times", domain, n)
		}
		if steps := toJSON(again["steps"]); !strings.Contains(steps, "already yours") {
			t.Fatalf("the registration step does not say nothing was bought: %s", steps)
		}
		if h, s, err := hostBody(t, ts, domain); !strings.Contains(h, "second on its own domain") || !strings.Contains(s, "second on its own domain") {
			t.Fatalf("the owned domain serves %q %q %v", h, s, err)
		}
	})
}
