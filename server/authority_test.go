package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// rawDo sends one request with no cookie jar and no redirects: what an
// agent, a script or a leaked link can do.
func rawDo(t *testing.T, base, method, path, contentType, body string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestNoAgentCanApprove: no anonymous request, agent key or sandbox
// capability approves a gate, by any path or method; a human of another
// organisation cannot either; a leaked approval URL gives nothing without
// a session. Only a signed-in human of the same organisation decides.
func TestNoAgentCanApprove(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		ctx := context.Background()
		base := ts.Client.BaseURL
		a := newAccount(t, ts, 10_000_000, service.DefaultPolicy(), "read", "quote", "launch", "buy_domain")
		other := newAccount(t, ts, 10_000_000, service.DefaultPolicy(), "read", "quote", "launch", "buy_domain")

		r := ts.Client.Do("POST", "/v1/projects/"+a.project+"/budget-raises", map[string]any{"amountUsd": 40, "reason": "launch week"}, a.header())
		task := r.JSON()["data"].(map[string]any)
		taskID, approval := task["taskId"].(string), task["approvalUrl"].(string)
		u, _ := url.Parse(approval)
		approvalPath := u.Path
		gateID := strings.TrimPrefix(approvalPath, "/approvals/")
		stillPending := func(when string) {
			t.Helper()
			g, err := ts.Store().Gates().Get(ctx, a.org, gateID)
			if err != nil || g.State != "pending" {
				t.Fatalf("%s: gate %s is %q (%v)", when, gateID, g.State, err)
			}
			tk, _ := ts.Store().Tasks().Get(ctx, a.org, taskID)
			p, _ := ts.Store().Projects().Get(ctx, a.org, a.project)
			if tk.State != "input_required" || p.LimitMicro != 10_000_000 {
				t.Fatalf("%s: task %s, limit %d", when, tk.State, p.LimitMicro)
			}
		}
		// What the page would reveal: none of it may show without a session.
		// (The gate id is the caller's own input; routing errors echo it.)
		secrets := []string{a.project, "launch week", "$40", "Budget raise", taskID}

		creds := map[string]http.Header{
			"anonymous":          {},
			"agent key":          {"Authorization": {"Bearer " + a.key}},
			"other org's key":    {"Authorization": {"Bearer " + other.key}},
			"sandbox capability": {"Authorization": {"Sandbox sbx_cap_not_a_key"}},
			"forged key":         {"Authorization": {"Bearer agk_forged"}},
		}
		form := url.Values{"decision": {"approve"}, "csrf": {"guess"}, "approve": {"1"}}.Encode()
		jsonBody := fmt.Sprintf(`{"decision":"approve","approve":true,"gateId":%q,"state":"approved"}`, gateID)
		methods := []string{"GET", "POST", "PUT", "PATCH", "DELETE"}

		for name, h := range creds {
			for _, m := range methods {
				for _, path := range []string{approvalPath, approvalPath + "/approve", approvalPath + "?decision=approve", "/v1/approvals/" + gateID, "/v1/gates/" + gateID + "/decision"} {
					for _, body := range []struct{ ct, b string }{{"application/x-www-form-urlencoded", form}, {"application/json", jsonBody}} {
						st, resp := rawDo(t, base, m, path, body.ct, body.b, h)
						if st < 400 {
							t.Errorf("%s %s %s (%s): %d", name, m, path, body.ct, st)
						}
						for _, s := range secrets {
							if strings.Contains(resp, s) {
								t.Errorf("%s %s %s revealed %q: %s", name, m, path, s, resp)
							}
						}
					}
				}
			}
			// Every REST operation, its path filled with the gate's id.
			for _, op := range sdk.Operations {
				path := op.Path
				for _, p := range []string{"{id}", "{gateId}", "{proofId}", "{domain}"} {
					path = strings.ReplaceAll(path, p, gateID)
				}
				st, _ := rawDo(t, base, op.Method, path, "application/json", jsonBody, h)
				if st == http.StatusOK && op.ID != "mcp" && strings.Contains(op.Path, "{") {
					t.Logf("%s %s %s: %d", name, op.Method, path, st)
				}
			}
			// And every MCP tool, with the gate's id in every argument slot.
			for _, op := range sdk.Operations {
				call := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":{"id":%q,"gateId":%q,"decision":"approve"}}}`, op.ID, gateID, gateID)
				rawDo(t, base, "POST", "/mcp", "application/json", call, http.Header{"Accept": {"application/json, text/event-stream"}, "Authorization": h["Authorization"]})
			}
			stillPending(name)
		}

		// A leaked URL without a session: the page is the same for this gate
		// and for a gate that does not exist.
		_, leaked := rawDo(t, base, "GET", approvalPath, "", "", nil)
		_, missing := rawDo(t, base, "GET", "/approvals/gat_doesnotexist0000000", "", "", nil)
		if leaked != missing {
			t.Fatalf("the sign-in page differs for a real gate:\n%s\n---\n%s", leaked, missing)
		}

		// A human of another organisation: not found, by GET and by POST.
		hb := signIn(t, ts, other.org)
		p := hb.get(approvalPath)
		if p.status != 404 {
			t.Fatalf("other org's human: %d", p.status)
		}
		for _, s := range secrets {
			if strings.Contains(p.body, s) {
				t.Fatalf("other org's human sees %q", s)
			}
		}
		tokenB := csrfOf(t, hb.get("/dashboard"))
		if p := hb.post(approvalPath, url.Values{"csrf": {tokenB}, "decision": {"approve"}}); p.status != 404 {
			t.Fatalf("other org's human decided: %d", p.status)
		}
		stillPending("other org's human")

		// The right human, but without the form token, from another site,
		// or carrying an agent key: refused.
		ha := signIn(t, ts, a.org)
		page := ha.get(approvalPath)
		if page.status != 200 || !strings.Contains(page.body, "$40.00") || !strings.Contains(page.body, "launch week") {
			t.Fatalf("own human's approval page: %d", page.status)
		}
		tokenA := csrfOf(t, page)
		if p := ha.post(approvalPath, url.Values{"decision": {"approve"}}); p.status != 403 {
			t.Fatalf("no form token: %d", p.status)
		}
		if p := ha.post(approvalPath, url.Values{"csrf": {tokenB}, "decision": {"approve"}}); p.status != 403 {
			t.Fatalf("another session's form token: %d", p.status)
		}
		if p := ha.do("POST", approvalPath, url.Values{"csrf": {tokenA}, "decision": {"approve"}}, http.Header{"Origin": {"https://evil.example"}}); p.status != 403 {
			t.Fatalf("cross-site post: %d", p.status)
		}
		if p := ha.do("POST", approvalPath, url.Values{"csrf": {tokenA}, "decision": {"approve"}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}); p.status != 403 {
			t.Fatalf("cross-site post by fetch metadata: %d", p.status)
		}
		if p := ha.do("POST", approvalPath, url.Values{"csrf": {tokenA}, "decision": {"approve"}}, http.Header{"Authorization": {"Bearer " + a.key}}); p.status != 403 {
			t.Fatalf("a human request carrying an agent key: %d", p.status)
		}
		stillPending("refused human requests")

		// The signed-in human of the organisation decides, once.
		if p := ha.post(approvalPath, url.Values{"csrf": {tokenA}, "decision": {"approve"}}); p.status != 303 {
			t.Fatalf("approve: %d %s", p.status, p.body)
		}
		if p := ha.post(approvalPath, url.Values{"csrf": {tokenA}, "decision": {"deny"}}); p.status != 409 {
			t.Fatalf("second decision: %d", p.status)
		}
		got := ts.Client.Do("GET", "/v1/tasks/"+taskID, nil, a.header()).JSON()["data"].(map[string]any)
		if got["state"] != "succeeded" {
			t.Fatalf("task after approval: %v", got)
		}
	})
}

// TestOtherOrganisationsIDsAreNotFound: every object route answers 404 for
// another organisation's ids, over REST and on the human pages.
func TestOtherOrganisationsIDsAreNotFound(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "read", "quote", "launch", "buy_domain")
		other := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "read", "quote", "launch", "buy_domain")
		c := ts.Client

		q := c.Do("POST", "/v1/quotes", domainQuote(a.project, availableDomains(1, "dev", "iso")[0], 1), a.header()).JSON()["data"].(map[string]any)
		quoteID := q["quoteId"].(string)
		rr := c.Do("POST", "/v1/projects/"+a.project+"/budget-raises", map[string]any{"amountUsd": 5, "reason": "more"}, a.header())
		if rr.StatusCode != 202 {
			t.Fatalf("raise: %d %s", rr.StatusCode, rr.Body)
		}
		raise := rr.JSON()["data"].(map[string]any)
		taskID := raise["taskId"].(string)
		setup := c.Do("POST", "/v1/billing/setup-link", nil, a.header()).JSON()["data"].(map[string]any)

		for _, tc := range []struct {
			method, path string
			body         any
		}{
			{"GET", "/v1/projects/" + a.project, nil},
			{"POST", "/v1/projects/" + a.project + "/budget-raises", map[string]any{"amountUsd": 1, "reason": "more"}},
			{"POST", "/v1/quotes", domainQuote(a.project, availableDomains(2, "dev", "iso")[1], 1)},
			{"POST", "/v1/quotes/" + quoteID + "/release", nil},
			{"GET", "/v1/tasks/" + taskID, nil},
			{"POST", "/v1/billing/poll", map[string]any{"setupSessionId": setup["setupSessionId"], "pollSecret": setup["pollSecret"]}},
		} {
			r := c.Do(tc.method, tc.path, tc.body, other.header())
			if r.StatusCode != 404 || r.JSON()["blockedBy"] != "not_found:resource" {
				t.Errorf("%s %s with another organisation's key: %d %s", tc.method, tc.path, r.StatusCode, r.Body)
			}
		}
		// Launch and export take a project id too: once served, they must
		// not find another organisation's project.
		for _, path := range []string{"/v1/projects/" + a.project + "/launch", "/v1/projects/" + a.project + "/export"} {
			st, body := rawDo(t, c.BaseURL, "POST", path, "application/json", `{"name":"site","target":"edge","bundleId":"bnd_x"}`, other.header())
			if st < 400 || st != 404 && st != 501 && st != 400 {
				t.Errorf("POST %s with another organisation's key: %d %s", path, st, body)
			}
		}
		// The ledger is per organisation.
		chain := c.Do("GET", "/v1/ledger?limit=1000", nil, other.header()).JSON()["data"].(map[string]any)
		raw, _ := json.Marshal(chain)
		for _, id := range []string{a.project, quoteID, taskID, a.org} {
			if strings.Contains(string(raw), id) {
				t.Errorf("another organisation's ledger mentions %s", id)
			}
		}
		// The human pages, as a human of the other organisation.
		hb := signIn(t, ts, other.org)
		token := csrfOf(t, hb.get("/dashboard"))
		gate := strings.TrimPrefix(raise["approvalUrl"].(string), ts.BaseURL())
		for _, tc := range []struct{ method, path string }{
			{"GET", gate},
			{"POST", gate},
			{"GET", "/billing/" + setup["setupSessionId"].(string)},
			{"POST", "/billing/" + setup["setupSessionId"].(string)},
			{"POST", "/keys/" + a.keyID + "/revoke"},
			{"POST", "/keys/" + a.keyID + "/grant"},
		} {
			var p page
			if tc.method == "GET" {
				p = hb.get(tc.path)
			} else {
				p = hb.post(tc.path, url.Values{"csrf": {token}, "decision": {"approve"}, "scope": {"buy_domain"}, "number": {"4242424242424242"}, "expiry": {"12/30"}, "cvc": {"123"}})
			}
			if p.status != 404 {
				t.Errorf("%s %s as another organisation's human: %d", tc.method, tc.path, p.status)
			}
		}
		if d := hb.get("/dashboard").body; strings.Contains(d, a.project) || strings.Contains(d, taskID) {
			t.Error("another organisation's dashboard shows these objects")
		}
	})
}
