package server_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/pierhq/pier/server"
)

// tokenish is any string an agent reads that could be a secret: 16 or
// more characters of the alphabets Pier's tokens and ids are written in.
var tokenish = regexp.MustCompile(`[A-Za-z0-9_-]{16,}`)

// TestAttackSweepAgentCannotPassItsGate: an agent that signed its
// organisation up (so it holds the review link, the claim secret and the
// key), whose human has signed in, approved a raise and set up a card,
// reads everything its key reaches (ledger, tasks, quotes, projects, the
// leave package, the signup and billing polls) and tries every string in
// it as a form token, a session cookie, a sign-in link and a key on its
// own pending gate, and replays the review link. The gate stays pending.
func TestAttackSweepAgentCannotPassItsGate(t *testing.T) {
	ts := start(t, server.Config{RateLimits: generous})
	su := startSignup(t, ts)
	human, cardPage := su.humanReviewsAndApproves()
	su.declinedCardThenGoodCard(human, cardPage)
	key := su.keyComesExactlyOnce()
	agent := http.Header{"Authorization": {"Bearer " + key}}
	c := ts.Client
	project := c.Do("GET", "/v1/projects", nil, agent).JSON()["data"].(map[string]any)["projects"].([]any)[0].(map[string]any)["id"].(string)
	raise := func() (task, gate string) {
		r := c.Do("POST", "/v1/projects/"+project+"/budget-raises", map[string]any{"amountUsd": 30, "reason": "more"}, agent)
		if r.StatusCode != 202 {
			t.Fatalf("raise: %d %s", r.StatusCode, r.Body)
		}
		d := r.JSON()["data"].(map[string]any)
		return d["taskId"].(string), gateOf(d)
	}
	// The human approves a first raise: its decision is on the ledger.
	_, first := raise()
	if p := human.post("/approvals/"+first, url.Values{"csrf": {csrfOf(t, human.get("/approvals/"+first))}, "decision": {"approve"}}); p.status != 303 {
		t.Fatalf("the human's approval: %d %s", p.status, p.body)
	}
	task, gate := raise()
	// A quote above the project's approval threshold opens its own gate.
	q := c.Do("POST", "/v1/quotes", domainQuote(project, availableDomains(1, "dev", "gated")[0], 2), agent)
	quoteGate := approvalGateOf(t, q.JSON())
	read := agentReads(t, ts, agent, project, su, cardPage)
	tokens := map[string]bool{su.secret: true, su.id: true, key: true, strings.TrimPrefix(su.review[strings.LastIndex(su.review, "/"):], "/"): true}
	for _, tok := range tokenish.FindAllString(read, -1) {
		tokens[tok] = true
	}
	for tok := range tokens {
		tryToken(t, ts, gate, tok)
		tryToken(t, ts, quoteGate, tok)
	}
	// The review link, replayed by the agent that was handed it.
	if p := newBrowser(t, ts).get(su.review); p.status < 400 {
		t.Errorf("the review link, replayed: %d", p.status)
	}
	st := c.Do("GET", "/v1/tasks/"+task, nil, agent).JSON()["data"].(map[string]any)
	p := c.Do("GET", "/v1/projects/"+project, nil, agent).JSON()["data"].(map[string]any)
	if st["state"] != "input_required" || p["budgetLimitUsd"] != 105.5 {
		t.Fatalf("the agent's gate was passed: task %v, limit %v", st["state"], p["budgetLimitUsd"])
	}
	if qd := c.Do("GET", "/v1/quotes/"+q.JSON()["data"].(map[string]any)["quoteId"].(string), nil, agent).JSON()["data"].(map[string]any); qd["decision"] != "REQUIRES_APPROVAL" || qd["state"] == "approved" {
		t.Fatalf("the agent's quote was approved: %v", qd)
	}
}

// approvalGateOf is the gate id in a REQUIRES_APPROVAL quote's approval
// action.
func approvalGateOf(t *testing.T, env map[string]any) string {
	t.Helper()
	for _, a := range env["actions"].([]any) {
		if u, ok := a.(map[string]any)["url"].(string); ok && strings.Contains(u, "/approvals/") {
			return u[strings.LastIndex(u, "/")+1:]
		}
	}
	t.Fatalf("no approval URL in %v", env)
	return ""
}

// agentReads is everything the agent's key and its signup capability
// read, as text.
func agentReads(t *testing.T, ts *testServer, agent http.Header, project string, su *signupRun, cardPage string) string {
	t.Helper()
	var sb strings.Builder
	for _, path := range []string{"/v1/ledger?limit=1000", "/v1/tasks?limit=100", "/v1/quotes?limit=100", "/v1/projects", "/v1/projects/" + project,
		"/v1/whoami", "/v1/services", "/v1/domains", "/v1/inboxes", "/v1/email-addresses", "/v1/bundles"} {
		sb.Write(ts.Client.Do("GET", path, nil, agent).Body)
	}
	sb.Write(ts.Client.Do("POST", "/v1/projects/"+project+"/export", nil, agent).Body)
	_, polled := pollSignup(ts, su.id, su.secret)
	sb.WriteString(toJSON(polled))
	sb.WriteString(cardPage)
	return sb.String()
}

// tryToken uses one string the agent read as a form token and a session
// cookie on the gate's page, as a key on it, and as a sign-in link: none
// may decide the gate or start a session.
func tryToken(t *testing.T, ts *testServer, gate, tok string) {
	t.Helper()
	form := url.Values{"csrf": {tok}, "decision": {"approve"}}.Encode()
	for _, h := range []http.Header{
		{"Cookie": {"pier_session=" + tok}, "Origin": {ts.Client.BaseURL}},
		{"Cookie": {"pier_session=" + tok + "; pier_csrf=" + tok}},
		{"Authorization": {"Bearer " + tok}},
	} {
		if st, body := rawDo(t, ts.Client.BaseURL, "POST", "/approvals/"+gate, "application/x-www-form-urlencoded", form, h); st < 400 && st != 200 || strings.Contains(body, "Approved") {
			t.Errorf("%q on the approval form: %d %s", tok, st, body)
		}
	}
	b := newBrowser(t, ts)
	confirm := b.get("/signin/" + tok)
	if m := csrfField.FindStringSubmatch(confirm.body); m != nil {
		if p := b.post("/signin/"+tok, url.Values{"csrf": {m[1]}}); p.status == http.StatusSeeOther {
			t.Errorf("%q signed the agent in: %s", tok, p.location)
		}
	}
}
