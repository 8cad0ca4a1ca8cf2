package server_test

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// oauthToken runs the authorization code flow for org's signed-in human
// and answers the access token, with every scope but buy_domain.
func oauthToken(t *testing.T, ts *testServer, org string) string {
	t.Helper()
	c := ts.Client
	callback := "http://127.0.0.1:9/callback"
	reg := c.Do("POST", "/oauth/register", map[string]any{"client_name": "Attacker", "redirect_uris": []string{callback},
		"grant_types": []string{"authorization_code"}, "token_endpoint_auth_method": "none"}, nil)
	clientID, _ := reg.JSON()["client_id"].(string)
	verifier := strings.Repeat("v", 43)
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {callback}, "state": {"s"}, "scope": {"read quote launch"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}, "resource": {ts.BaseURL() + "/mcp"}}
	hb := signIn(t, ts, org)
	p := hb.get("/oauth/authorize?" + q.Encode())
	if p.status != http.StatusFound && p.status != http.StatusSeeOther {
		t.Fatalf("authorize: %d %s %s", p.status, p.location, p.body)
	}
	consent := hb.get(p.location)
	form := url.Values{"csrf": {csrfOf(t, consent)}, "decision": {"approve"}, "scope_read": {"1"}, "scope_quote": {"1"}, "scope_launch": {"1"}}
	decided := hb.do("POST", p.location, form, http.Header{"Origin": {c.BaseURL}})
	loc, _ := url.Parse(decided.location)
	st, body := rawDo(t, c.BaseURL, "POST", "/oauth/token", "application/x-www-form-urlencoded", url.Values{"grant_type": {"authorization_code"},
		"code": {loc.Query().Get("code")}, "redirect_uri": {callback}, "client_id": {clientID}, "code_verifier": {verifier}}.Encode(), nil)
	tok := tokenField.FindStringSubmatch(body)
	if st != 200 || tok == nil {
		t.Fatalf("token: %d %s", st, body)
	}
	return tok[1]
}

// TestAttackSweepAsOAuthClient: the sweep of TestAttackSweep, as an OAuth
// client that B's human authorised, over REST and MCP.
func TestAttackSweepAsOAuthClient(t *testing.T) {
	ts := start(t, server.Config{RateLimits: attackRates})
	v := newVictim(t, ts)
	b := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "read", "quote", "launch")
	bBundle := upload(t, ts, b, siteSaying("intruder")).(string)
	b.key = oauthToken(t, ts, b.org)
	if r := ts.Client.Do("GET", "/v1/projects/"+b.project, nil, b.header()); r.StatusCode != 200 {
		t.Fatalf("the token reads nothing of its organisation's: %d %s", r.StatusCode, r.Body)
	}
	v.ids["bProject"], v.missing["bProject"] = b.project, b.project
	v.ids["bBundle"], v.missing["bBundle"] = bBundle, bBundle
	before := v.snapshot(t, ts)
	specs := attackSpecs()
	for _, op := range sdk.Operations {
		if spec, ok := specs[op.ID]; ok {
			for i := range spec(v.ids) {
				v.attack(t, ts, b, op, spec, i)
			}
		}
	}
	if after := v.snapshot(t, ts); after != before {
		t.Errorf("A's objects changed under B's calls:\nbefore %s\nafter  %s", before, after)
	}
}

var tokenField = regexp.MustCompile(`"access_token":"([^"]+)"`)
