package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// quoteDomain asks for a one-year domain quote and returns the answer.
func quoteDomain(t *testing.T, ts *testServer, a account, project, domain string) (int, map[string]any) {
	t.Helper()
	r := ts.Client.Do("POST", "/v1/quotes", domainQuote(project, domain, 1), a.header())
	return r.StatusCode, r.JSON()
}

func setCap(t *testing.T, b *browser, keyID, usd, period string) page {
	t.Helper()
	token := csrfOf(t, b.get("/keys"))
	return b.post("/keys/"+keyID+"/cap", url.Values{"csrf": {token}, "cap_usd": {usd}, "period": {period}})
}

func spendCap(t *testing.T, ts *testServer, a account) map[string]any {
	t.Helper()
	key := ts.Client.Do("GET", "/v1/whoami", nil, a.header()).JSON()["data"].(map[string]any)["key"].(map[string]any)
	c, _ := key["spendCap"].(map[string]any)
	return c
}

// TestKeySpendCaps: a person caps a key on the keys page; the key's quotes
// stop at the cap with budget:key_cap and the page to raise it; a release
// gives the room back; whoami shows the cap; a new month starts afresh.
func TestKeySpendCaps(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		clock := testserver.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
		ts := start(t, server.Config{DatabaseURL: db, Now: clock.Now})
		a := newAccount(t, ts, 1000_000_000, service.DefaultPolicy(), "read", "quote", "buy_domain")
		b := signIn(t, ts, a.org)
		names := availableDomains(4, "dev", "capped")

		_, first := quoteDomain(t, ts, a, a.project, names[0])
		price := first["data"].(map[string]any)["amountUsd"].(float64)
		if p := setCap(t, b, a.keyID, formatUSD(price*1.5), "month"); p.status != 200 || !strings.Contains(p.body, "Capped "+a.keyID) {
			t.Fatalf("set cap: %d %s", p.status, p.body)
		}
		if c := spendCap(t, ts, a); c == nil || c["period"] != "month" || c["spentUsd"].(float64) != price {
			t.Fatalf("whoami's cap after one held quote of %v: %v", price, c)
		}
		proj := ts.Client.Do("GET", "/v1/projects/"+a.project, nil, a.header()).JSON()["data"].(map[string]any)
		if caps, _ := proj["keyCaps"].([]any); len(caps) != 1 || caps[0].(map[string]any)["keyId"] != a.keyID || caps[0].(map[string]any)["spentUsd"].(float64) != price {
			t.Fatalf("get_project's key caps: %v", proj["keyCaps"])
		}
		status, refused := quoteDomain(t, ts, a, a.project, names[1])
		if status != 402 || refused["blockedBy"] != "budget:key_cap" {
			t.Fatalf("a quote past the cap: %d %v", status, refused)
		}
		acts := refused["actions"].([]any)
		if u := acts[0].(map[string]any); u["kind"] != "url" || u["actor"] != "human" || !strings.HasSuffix(u["url"].(string), "/keys") {
			t.Fatalf("the refusal names the keys page for a person: %v", acts)
		}
		// Releasing the held quote gives its room back.
		id := first["data"].(map[string]any)["quoteId"].(string)
		if r := ts.Client.Do("POST", "/v1/quotes/"+id+"/release", nil, a.header()); r.StatusCode != 200 {
			t.Fatalf("release: %d", r.StatusCode)
		}
		if status, q := quoteDomain(t, ts, a, a.project, names[1]); status != 201 {
			t.Fatalf("within the cap after a release: %d %v", status, q)
		}
		// A new month starts afresh (the held quote's hold lapses too).
		clock.Advance(40 * 24 * time.Hour)
		if status, q := quoteDomain(t, ts, a, a.project, names[2]); status != 201 {
			t.Fatalf("next month: %d %v", status, q)
		}
		// A lifetime cap counts every month; an empty amount removes it.
		b = signIn(t, ts, a.org)
		if p := setCap(t, b, a.keyID, "0", "lifetime"); p.status != 200 {
			t.Fatalf("lifetime cap: %d", p.status)
		}
		if status, _ := quoteDomain(t, ts, a, a.project, names[3]); status != 402 {
			t.Fatalf("a zero lifetime cap refuses: %d", status)
		}
		if p := setCap(t, b, a.keyID, "", "month"); p.status != 200 || spendCap(t, ts, a) != nil {
			t.Fatalf("removing the cap: %d %v", p.status, spendCap(t, ts, a))
		}
	})
}

// TestKeyCapCountsWhatIsHeld: a key's quotes count against its cap while
// their holds last. A lapsed hold stops counting (and the project's next
// write settles it), a released one gives its room back, and quotes
// within the cap go on passing: the running count the quotes keep never
// lets one past the cap, nor refuses one the cap has room for.
func TestKeyCapCountsWhatIsHeld(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		clock := testserver.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
		ts := start(t, server.Config{DatabaseURL: db, Now: clock.Now})
		a := newAccount(t, ts, 1000_000_000, service.DefaultPolicy(), "read", "quote", "buy_domain")
		names := availableDomains(5, "dev", "lapse")
		_, first := quoteDomain(t, ts, a, a.project, names[0])
		price := first["data"].(map[string]any)["amountUsd"].(float64)
		if p := setCap(t, signIn(t, ts, a.org), a.keyID, formatUSD(price*2.5), "month"); p.status != 200 {
			t.Fatalf("set cap: %d", p.status)
		}
		if status, q := quoteDomain(t, ts, a, a.project, names[1]); status != 201 {
			t.Fatalf("the second quote, within the cap: %d %v", status, q)
		}
		if status, q := quoteDomain(t, ts, a, a.project, names[2]); status != 402 || q["blockedBy"] != "budget:key_cap" {
			t.Fatalf("the third quote, past the cap: %d %v", status, q)
		}
		// Both holds lapse: their room comes back.
		clock.Advance(service.HoldDuration + time.Minute)
		for i, name := range names[2:4] {
			if status, q := quoteDomain(t, ts, a, a.project, name); status != 201 {
				t.Fatalf("quote %d after the holds lapsed: %d %v", i+3, status, q)
			}
		}
		proj := ts.Client.Do("GET", "/v1/projects/"+a.project, nil, a.header()).JSON()["data"].(map[string]any)
		if holds := proj["activeHolds"].([]any); len(holds) != 2 {
			t.Fatalf("the lapsed holds still hold: %v", holds)
		}
		if spent := spendCap(t, ts, a)["spentUsd"].(float64); spent != 2*price {
			t.Fatalf("whoami's spend %v, want %v", spent, 2*price)
		}
		if status, _ := quoteDomain(t, ts, a, a.project, names[4]); status != 402 {
			t.Fatalf("a fifth quote past the cap: %d", status)
		}
	})
}

func formatUSD(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// TestNoAgentRaisesItsCap: the cap is written only by a signed-in person
// of the key's organisation. The key itself, another organisation's
// person, and the API all fail, and the cap stays.
func TestNoAgentRaisesItsCap(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 1000_000_000, service.DefaultPolicy(), "read", "quote", "launch", "buy_domain")
	b := signIn(t, ts, a.org)
	if p := setCap(t, b, a.keyID, "1", "month"); p.status != 200 {
		t.Fatalf("set cap: %d", p.status)
	}
	form := url.Values{"cap_usd": {"1000000"}, "period": {"month"}}.Encode()
	for _, h := range []http.Header{a.header(), {"Cookie": {"pier_session=" + a.key}}, nil} {
		if status, body := rawDo(t, ts.Client.BaseURL, "POST", "/keys/"+a.keyID+"/cap", "application/x-www-form-urlencoded", form, h); status == 200 {
			t.Fatalf("an agent's request set the cap: %d %s", status, body)
		}
	}
	other := newAccount(t, ts, 1, service.DefaultPolicy(), "read")
	ob := signIn(t, ts, other.org)
	if p := setCap(t, ob, a.keyID, "1000000", "month"); p.status != 404 {
		t.Fatalf("another organisation's person: %d", p.status)
	}
	for _, path := range []string{"/v1/keys/" + a.keyID + "/cap", "/v1/keys/" + a.keyID} {
		if r := ts.Client.Do("POST", path, map[string]any{"capUsd": 1000000}, a.header()); r.StatusCode < 400 {
			t.Fatalf("POST %s: %d", path, r.StatusCode)
		}
	}
	if c := spendCap(t, ts, a); c == nil || c["capUsd"].(float64) != 1 {
		t.Fatalf("the cap moved: %v", c)
	}
}

// TestKeyCapHoldsUnderConcurrency: quotes of one key racing in two
// projects never commit past its cap.
func TestKeyCapHoldsUnderConcurrency(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 1000_000_000, service.DefaultPolicy(), "read", "quote", "buy_domain")
		second, err := ts.Service().Projects.Create(context.Background(), service.NewProject{OrgID: a.org, Name: "second",
			LimitMicro: 1000_000_000, Policy: service.DefaultPolicy(), CreatedBy: "human:usr_test"})
		if err != nil {
			t.Fatal(err)
		}
		names := availableDomains(9, "dev", "race")
		_, first := quoteDomain(t, ts, a, a.project, names[8])
		price := first["data"].(map[string]any)["amountUsd"].(float64)
		// Room for three more quotes beside the first.
		if p := setCap(t, signIn(t, ts, a.org), a.keyID, formatUSD(price*4+0.01), "month"); p.status != 200 {
			t.Fatalf("set cap: %d", p.status)
		}
		var mu sync.Mutex
		held := 0
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				project := a.project
				if i%2 == 1 {
					project = second.ID
				}
				r := ts.Client.Do("POST", "/v1/quotes", domainQuote(project, names[i], 1), a.header())
				if r.StatusCode == 201 {
					mu.Lock()
					held++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if held != 3 {
			t.Fatalf("%d quotes held; the cap leaves room for 3", held)
		}
	})
}
