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
		g := askForBudgetRaise(t, ts)
		creds := map[string]http.Header{
			"anonymous":          {},
			"agent key":          {"Authorization": {"Bearer " + g.a.key}},
			"other org's key":    {"Authorization": {"Bearer " + g.other.key}},
			"sandbox capability": {"Authorization": {"Sandbox sbx_cap_not_a_key"}},
			"forged key":         {"Authorization": {"Bearer agk_forged"}},
		}
		for name, h := range creds {
			g.approvalPagesRefuse(name, h)
			g.everyOperationTried(name, h)
			g.stillPending(name)
		}
		g.leakedURLRevealsNothing()
		tokenB := g.otherOrgsHumanCannotDecide()
		ha, tokenA := g.ownHumanRefusedWithoutProof(tokenB)
		g.ownHumanDecidesOnce(ha, tokenA)
	})
}

// pendingRaise is a budget raise that account a asked for and that waits
// at a gate for a human; other is an account of another organisation.
type pendingRaise struct {
	t                            *testing.T
	ts                           *testServer
	a, other                     account
	taskID, approvalPath, gateID string
	// secrets are what the approval page would reveal: none of it may
	// show without a session. (The gate id is the caller's own input;
	// routing errors echo it.)
	secrets []string
}

func askForBudgetRaise(t *testing.T, ts *testServer) *pendingRaise {
	t.Helper()
	a := newAccount(t, ts, 10_000_000, service.DefaultPolicy(), "read", "quote", "launch", "buy_domain")
	other := newAccount(t, ts, 10_000_000, service.DefaultPolicy(), "read", "quote", "launch", "buy_domain")
	r := ts.Client.Do("POST", "/v1/projects/"+a.project+"/budget-raises", map[string]any{"amountUsd": 40, "reason": "launch week"}, a.header())
	task := r.JSON()["data"].(map[string]any)
	taskID, approval := task["taskId"].(string), task["approvalUrl"].(string)
	u, _ := url.Parse(approval)
	return &pendingRaise{
		t: t, ts: ts, a: a, other: other,
		taskID: taskID, approvalPath: u.Path, gateID: strings.TrimPrefix(u.Path, "/approvals/"),
		secrets: []string{a.project, "launch week", "$40", "Budget raise", taskID},
	}
}

// stillPending wants the gate pending, the task waiting for input and the
// project's limit unraised.
func (g *pendingRaise) stillPending(when string) {
	g.t.Helper()
	ctx := context.Background()
	gate, err := g.ts.Store().Gates().Get(ctx, g.a.org, g.gateID)
	if err != nil || gate.State != "pending" {
		g.t.Fatalf("%s: gate %s is %q (%v)", when, g.gateID, gate.State, err)
	}
	tk, _ := g.ts.Store().Tasks().Get(ctx, g.a.org, g.taskID)
	p, _ := g.ts.Store().Projects().Get(ctx, g.a.org, g.a.project)
	if tk.State != "input_required" || p.LimitMicro != 10_000_000 {
		g.t.Fatalf("%s: task %s, limit %d", when, tk.State, p.LimitMicro)
	}
}

func (g *pendingRaise) approvalJSON() string {
	return fmt.Sprintf(`{"decision":"approve","approve":true,"gateId":%q,"state":"approved"}`, g.gateID)
}

// approvalPagesRefuse tries every method on every approval path with a
// form and a JSON approval, and wants each refused without a secret.
func (g *pendingRaise) approvalPagesRefuse(name string, h http.Header) {
	t := g.t
	t.Helper()
	form := url.Values{"decision": {"approve"}, "csrf": {"guess"}, "approve": {"1"}}.Encode()
	bodies := []struct{ ct, b string }{{"application/x-www-form-urlencoded", form}, {"application/json", g.approvalJSON()}}
	paths := []string{g.approvalPath, g.approvalPath + "/approve", g.approvalPath + "?decision=approve", "/v1/approvals/" + g.gateID, "/v1/gates/" + g.gateID + "/decision"}
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		for _, path := range paths {
			for _, body := range bodies {
				st, resp := rawDo(t, g.ts.Client.BaseURL, m, path, body.ct, body.b, h)
				if st < 400 {
					t.Errorf("%s %s %s (%s): %d", name, m, path, body.ct, st)
				}
				for _, s := range g.secrets {
					if strings.Contains(resp, s) {
						t.Errorf("%s %s %s revealed %q: %s", name, m, path, s, resp)
					}
				}
			}
		}
	}
}

// everyOperationTried sends every REST operation, its path filled with
// the gate's id, and every MCP tool, with the gate's id in every argument
// slot; stillPending then shows none of them decided.
func (g *pendingRaise) everyOperationTried(name string, h http.Header) {
	t := g.t
	t.Helper()
	base := g.ts.Client.BaseURL
	for _, op := range sdk.Operations {
		path := op.Path
		for _, p := range []string{"{id}", "{gateId}", "{proofId}", "{domain}"} {
			path = strings.ReplaceAll(path, p, g.gateID)
		}
		st, _ := rawDo(t, base, op.Method, path, "application/json", g.approvalJSON(), h)
		if st == http.StatusOK && op.ID != "mcp" && strings.Contains(op.Path, "{") {
			t.Logf("%s %s %s: %d", name, op.Method, path, st)
		}
	}
	for _, op := range sdk.Operations {
		call := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":{"id":%q,"gateId":%q,"decision":"approve"}}}`, op.ID, g.gateID, g.gateID)
		rawDo(t, base, "POST", "/mcp", "application/json", call, http.Header{"Accept": {"application/json, text/event-stream"}, "Authorization": h["Authorization"]})
	}
}

// A leaked URL without a session: the page is the same for this gate and
// for a gate that does not exist.
func (g *pendingRaise) leakedURLRevealsNothing() {
	g.t.Helper()
	_, leaked := rawDo(g.t, g.ts.Client.BaseURL, "GET", g.approvalPath, "", "", nil)
	_, missing := rawDo(g.t, g.ts.Client.BaseURL, "GET", "/approvals/gat_doesnotexist0000000", "", "", nil)
	if leaked != missing {
		g.t.Fatalf("the sign-in page differs for a real gate:\n%s\n---\n%s", leaked, missing)
	}
}

// A human of another organisation: not found, by GET and by POST. It
// answers that human's form token, for the next step to try.
func (g *pendingRaise) otherOrgsHumanCannotDecide() string {
	t := g.t
	t.Helper()
	hb := signIn(t, g.ts, g.other.org)
	p := hb.get(g.approvalPath)
	if p.status != 404 {
		t.Fatalf("other org's human: %d", p.status)
	}
	for _, s := range g.secrets {
		if strings.Contains(p.body, s) {
			t.Fatalf("other org's human sees %q", s)
		}
	}
	tokenB := csrfOf(t, hb.get("/dashboard"))
	if p := hb.post(g.approvalPath, url.Values{"csrf": {tokenB}, "decision": {"approve"}}); p.status != 404 {
		t.Fatalf("other org's human decided: %d", p.status)
	}
	g.stillPending("other org's human")
	return tokenB
}

// The right human, but without the form token, with another session's,
// from another site, or carrying an agent key: refused. It answers that
// human's browser and form token.
func (g *pendingRaise) ownHumanRefusedWithoutProof(tokenB string) (*browser, string) {
	t := g.t
	t.Helper()
	ha := signIn(t, g.ts, g.a.org)
	page := ha.get(g.approvalPath)
	if page.status != 200 || !strings.Contains(page.body, "$40.00") || !strings.Contains(page.body, "launch week") {
		t.Fatalf("own human's approval page: %d", page.status)
	}
	tokenA := csrfOf(t, page)
	if p := ha.post(g.approvalPath, url.Values{"decision": {"approve"}}); p.status != 403 {
		t.Fatalf("no form token: %d", p.status)
	}
	if p := ha.post(g.approvalPath, url.Values{"csrf": {tokenB}, "decision": {"approve"}}); p.status != 403 {
		t.Fatalf("another session's form token: %d", p.status)
	}
	approve := url.Values{"csrf": {tokenA}, "decision": {"approve"}}
	refused := []struct {
		what   string
		header http.Header
	}{
		{"cross-site post", http.Header{"Origin": {"https://evil.example"}}},
		{"cross-site post by fetch metadata", http.Header{"Sec-Fetch-Site": {"cross-site"}}},
		{"a human request carrying an agent key", http.Header{"Authorization": {"Bearer " + g.a.key}}},
	}
	for _, r := range refused {
		if p := ha.do("POST", g.approvalPath, approve, r.header); p.status != 403 {
			t.Fatalf("%s: %d", r.what, p.status)
		}
	}
	g.stillPending("refused human requests")
	return ha, tokenA
}

// The signed-in human of the organisation decides, once.
func (g *pendingRaise) ownHumanDecidesOnce(ha *browser, tokenA string) {
	t := g.t
	t.Helper()
	if p := ha.post(g.approvalPath, url.Values{"csrf": {tokenA}, "decision": {"approve"}}); p.status != 303 {
		t.Fatalf("approve: %d %s", p.status, p.body)
	}
	if p := ha.post(g.approvalPath, url.Values{"csrf": {tokenA}, "decision": {"deny"}}); p.status != 409 {
		t.Fatalf("second decision: %d", p.status)
	}
	got := g.ts.Client.Do("GET", "/v1/tasks/"+g.taskID, nil, g.a.header()).JSON()["data"].(map[string]any)
	if got["state"] != "succeeded" {
		t.Fatalf("task after approval: %v", got)
	}
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
