package server_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/contracttest"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/httpapi"
)

func candidates(t *testing.T, env map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, c := range env["data"].(map[string]any)["candidates"].([]any) {
		out = append(out, c.(map[string]any))
	}
	return out
}

func applied(env map[string]any) map[string]any {
	return env["data"].(map[string]any)["appliedFilters"].(map[string]any)
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func TestSearchDomains(t *testing.T) {
	ts := start(t, server.Config{})
	c := ts.Client

	t.Run("common catalog by default", func(t *testing.T) { searchCommonCatalogByDefault(t, c) })
	t.Run("includeExotic selects the full catalog", func(t *testing.T) {
		env := c.Do("GET", "/v1/domains/search?q=acme&includeExotic=true&limit=200", nil, nil).JSON()
		if applied(env)["catalog"] != "full" || len(candidates(t, env)) != 20 {
			t.Fatalf("full catalog: %v, %d candidates", applied(env)["catalog"], len(candidates(t, env)))
		}
	})
	t.Run("allow list order is kept, deny list removes", func(t *testing.T) { searchAllowAndDenyLists(t, c) })
	t.Run("a TLD named in q comes first", func(t *testing.T) {
		cs := candidates(t, c.Do("GET", "/v1/domains/search?q=acme.net", nil, nil).JSON())
		if cs[0]["domain"] != "acme.net" {
			t.Fatalf("first %v", cs[0])
		}
	})
	t.Run("ceilings drop candidates lacking the price", func(t *testing.T) { searchCeilingsDropUnpriced(t, c) })
	t.Run("renewal ceiling compares the annualized price", func(t *testing.T) {
		// .ai renews at 158 USD for two years: 79 a year.
		cs := candidates(t, c.Do("GET", "/v1/domains/search?q=acme&tldAllowlist=ai&maxRenewalPriceUsd=79", nil, nil).JSON())
		if len(cs) != 1 || cs[0]["renewalPriceUsd"] != 158.0 || cs[0]["annualizedRenewalPriceUsd"] != 79.0 {
			t.Fatalf("candidates %v", cs)
		}
		cs = candidates(t, c.Do("GET", "/v1/domains/search?q=acme&tldAllowlist=ai&maxRenewalPriceUsd=78.99", nil, nil).JSON())
		if len(cs) != 0 {
			t.Fatalf("candidates %v", cs)
		}
	})
	t.Run("availability is deterministic", func(t *testing.T) {
		a := c.Do("GET", "/v1/domains/search?q=deterministic", nil, nil).Body
		b := c.Do("GET", "/v1/domains/search?q=deterministic", nil, nil).Body
		if string(a) != string(b) {
			t.Fatal("two searches differ")
		}
	})
	searchRefusesBadQueries(t, c)
}

// searchCommonCatalogByDefault wants the common TLDs, in order, and no
// exotic one.
func searchCommonCatalogByDefault(t *testing.T, c *contracttest.Client) {
	env := c.Do("GET", "/v1/domains/search?q=acme", nil, nil).JSON()
	a := applied(env)
	if a["catalog"] != "common" || a["includeExotic"] != false {
		t.Fatalf("applied %v", a)
	}
	got := strings.Join(strs(a["tlds"]), ",")
	if got != "com,dev,app,io,ai,co,net,org,sh,xyz" {
		t.Fatalf("effective tlds %s", got)
	}
	for _, cand := range candidates(t, env) {
		if cand["tld"] == "museum" {
			t.Fatal("exotic TLD in the common catalog")
		}
	}
}

// searchAllowAndDenyLists wants the allow list's order kept, the deny
// list removing, and a TLD outside the catalog ignored and said so.
func searchAllowAndDenyLists(t *testing.T, c *contracttest.Client) {
	env := c.Do("GET", "/v1/domains/search?q=acme&tldAllowlist=org,dev,com,museum&tldDenylist=dev", nil, nil).JSON()
	a := applied(env)
	if got := strings.Join(strs(a["tlds"]), ","); got != "org,com" {
		t.Fatalf("effective %s", got)
	}
	if got := strings.Join(strs(a["ignoredTlds"]), ","); got != "museum" {
		t.Fatalf("ignored %s", got)
	}
	if got := strings.Join(strs(a["tldAllowlist"]), ","); got != "org,dev,com,museum" {
		t.Fatalf("echoed allow list %s", got)
	}
	cs := candidates(t, env)
	if len(cs) != 2 || cs[0]["domain"] != "acme.org" || cs[1]["domain"] != "acme.com" {
		t.Fatalf("candidates %v", cs)
	}
}

// searchCeilingsDropUnpriced wants every candidate within both ceilings
// and the ones lacking a price counted as excluded.
func searchCeilingsDropUnpriced(t *testing.T, c *contracttest.Client) {
	env := c.Do("GET", "/v1/domains/search?q=acme&includeExotic=true&limit=200&maxFirstYearPriceUsd=15&maxRenewalPriceUsd=30", nil, nil).JSON()
	for _, cand := range candidates(t, env) {
		if cand["firstYearPriceUsd"] == nil || cand["firstYearPriceUsd"].(float64) > 15 {
			t.Fatalf("over or lacking first-year price: %v", cand)
		}
		if cand["annualizedRenewalPriceUsd"] == nil || cand["annualizedRenewalPriceUsd"].(float64) > 30 {
			t.Fatalf("over or lacking renewal price: %v", cand)
		}
		switch cand["tld"] {
		case "museum", "aero", "bank":
			t.Fatalf("%s lacks a price and must be excluded", cand["tld"])
		}
	}
	ex := env["data"].(map[string]any)["excluded"].(map[string]any)
	if ex["lackingPrice"].(float64) != 2 { // museum and bank; aero is over the first-year ceiling first
		t.Fatalf("excluded %v", ex)
	}
	a := applied(env)
	if a["maxFirstYearPriceUsd"] != 15.0 || a["maxRenewalPriceUsd"] != 30.0 {
		t.Fatalf("ceilings not echoed: %v", a)
	}
}

// searchRefusesBadQueries wants each bad query refused with 400, naming
// the field.
func searchRefusesBadQueries(t *testing.T, c *contracttest.Client) {
	bad := []struct {
		name, query, code, field string
	}{
		{"missing q", "", "input:invalid", "query.q"},
		{"bad label", "q=-acme", "input:invalid", "query.q"},
		{"ill-typed limit", "q=acme&limit=many", "input:invalid", "query.limit"},
		{"limit out of range", "q=acme&limit=0", "input:invalid", "query.limit"},
		{"negative ceiling", "q=acme&maxFirstYearPriceUsd=-1", "input:invalid", "query.maxFirstYearPriceUsd"},
		{"unknown parameter", "q=acme&tld_allowlist=com", "input:unknown_field", "query.tld_allowlist"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			r := c.Do("GET", "/v1/domains/search?"+tc.query, nil, nil)
			env := r.JSON()
			if r.StatusCode != 400 || env["blockedBy"] != tc.code || env["retryable"] != false {
				t.Fatalf("%d %s", r.StatusCode, r.Body)
			}
			d := env["details"].([]any)[0].(map[string]any)
			if !strings.HasPrefix(d["field"].(string), tc.field) {
				t.Fatalf("details %v", env["details"])
			}
		})
	}
}

func TestEstimate(t *testing.T) {
	ts := start(t, server.Config{})
	c := ts.Client

	t.Run("cheapest capable when target omitted", func(t *testing.T) { estimateCheapestCapable(t, c) })
	t.Run("add-ons are priced in", func(t *testing.T) {
		d := envelopeData(c.Do("POST", "/v1/estimate", map[string]any{"workload": "database_backed_app"}, nil).JSON())
		addons := d["addons"].([]any)
		if len(addons) != 1 || addons[0].(map[string]any)["target"] != "managed_postgres" || d["monthlyUsd"] != 22.0 {
			t.Fatalf("addons %v total %v", addons, d["monthlyUsd"])
		}
	})
	t.Run("explicit target is authoritative and called out", func(t *testing.T) { estimateExplicitTarget(t, c) })
	t.Run("usage changes the price in integer money", func(t *testing.T) {
		d := envelopeData(c.Do("POST", "/v1/estimate", map[string]any{"workload": "static_site", "monthlyRequests": 3_500_000, "monthlyEgressGb": 100.1}, nil).JSON())
		// 2.5M requests over at 0.20/M = 0.50; 0.1 GB over at 0.05 = 0.005.
		if d["monthlyUsd"] != 0.505 {
			t.Fatalf("monthly %v", d["monthlyUsd"])
		}
	})
	estimateRefusesBadBodies(t, c)
	t.Run("body too large", func(t *testing.T) {
		r := c.Do("POST", "/v1/estimate", `{"workload":"static_site","pad":"`+strings.Repeat("x", 2<<20)+`"}`, nil)
		if r.StatusCode != 413 || r.JSON()["blockedBy"] != "input:body_too_large" {
			t.Fatalf("%d %s", r.StatusCode, r.Body[:min(200, len(r.Body))])
		}
	})
}

// estimateCheapestCapable wants each workload given the cheapest target
// that can run it.
func estimateCheapestCapable(t *testing.T, c *contracttest.Client) {
	cases := map[string]string{
		"static_site": "edge", "dynamic_service": "process", "worker": "worker",
		"database_backed_app": "process", "mail_enabled_app": "process",
	}
	for workload, want := range cases {
		d := envelopeData(c.Do("POST", "/v1/estimate", map[string]any{"workload": workload}, nil).JSON())
		if d["selectedTarget"] != want || d["selectionReason"] != "cheapest_capable" {
			t.Fatalf("%s: selected %v (%v)", workload, d["selectedTarget"], d["selectionReason"])
		}
		if len(d["considered"].([]any)) != 3 || len(d["assumptions"].([]any)) < 2 {
			t.Fatalf("%s: considered/assumptions missing: %v", workload, d)
		}
	}
}

// estimateExplicitTarget wants a named target kept, with evidence that a
// cheaper one could run the workload.
func estimateExplicitTarget(t *testing.T, c *contracttest.Client) {
	d := envelopeData(c.Do("POST", "/v1/estimate", map[string]any{"workload": "static_site", "target": "process"}, nil).JSON())
	if d["selectedTarget"] != "process" || d["selectionReason"] != "explicit_target" {
		t.Fatalf("%v", d)
	}
	codes := ""
	for _, e := range d["evidence"].([]any) {
		codes += e.(map[string]any)["code"].(string) + " "
	}
	if !strings.Contains(codes, "explicit_target") || !strings.Contains(codes, "cheaper_capable_exists") {
		t.Fatalf("evidence %s", codes)
	}
}

// estimateRefusesBadBodies wants each bad body refused with its status
// and code, actions to take, and the field named.
func estimateRefusesBadBodies(t *testing.T, c *contracttest.Client) {
	bad := []struct {
		name        string
		body        string
		ctype       string
		status      int
		code, field string
	}{
		{"incapable target", `{"workload":"dynamic_service","target":"edge"}`, "", 422, "plan:target_incapable", "body.target"},
		{"add-on as target", `{"workload":"static_site","target":"mail"}`, "", 422, "plan:target_incapable", "body.target"},
		{"unknown target, a contract violation", `{"workload":"static_site","target":"mainframe"}`, "", 400, "input:invalid", "body.target"},
		{"unknown workload", `{"workload":"blockchain"}`, "", 400, "input:invalid", "body"},
		{"unknown field", `{"workload":"static_site","colour":"blue"}`, "", 400, "input:unknown_field", "body"},
		{"ill-typed field", `{"workload":"static_site","monthlyRequests":"lots"}`, "", 400, "input:invalid", "body"},
		{"missing body", ``, "", 400, "input:invalid", "body"},
		{"malformed JSON", `{"workload":`, "", 400, "input:malformed_json", "body"},
		{"wrong content type", `workload=static_site`, "application/x-www-form-urlencoded", 415, "input:unsupported_media_type", ""},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.ctype != "" {
				h.Set("Content-Type", tc.ctype)
			}
			var body any
			if tc.body != "" {
				body = tc.body
			}
			r := c.Do("POST", "/v1/estimate", body, h)
			env := r.JSON()
			if r.StatusCode != tc.status || env["blockedBy"] != tc.code || env["code"] != tc.code {
				t.Fatalf("%d %s", r.StatusCode, r.Body)
			}
			if len(env["actions"].([]any)) == 0 {
				t.Fatal("no actions")
			}
			if tc.field != "" {
				d := env["details"].([]any)[0].(map[string]any)
				if !strings.HasPrefix(d["field"].(string), tc.field) {
					t.Fatalf("details %v", env["details"])
				}
			}
		})
	}
}

func TestRouting(t *testing.T) {
	ts := start(t, server.Config{})
	c := ts.Client
	r := c.Do("GET", "/v1/estimate", nil, nil)
	if r.StatusCode != 405 || r.Header.Get("Allow") != "POST" || r.JSON()["blockedBy"] != "input:method_not_allowed" {
		t.Fatalf("405: %d %q %s", r.StatusCode, r.Header.Get("Allow"), r.Body)
	}
	r = c.Do("GET", "/v1/nothing", nil, nil)
	if r.StatusCode != 404 || r.JSON()["blockedBy"] != "not_found:route" {
		t.Fatalf("404: %d %s", r.StatusCode, r.Body)
	}
	r = c.Do("GET", "/v1/domains/search?q=acme", nil, http.Header{"Accept": {"text/html"}})
	if r.StatusCode != 406 || r.JSON()["blockedBy"] != "input:not_acceptable" {
		t.Fatalf("406: %d %s", r.StatusCode, r.Body)
	}
	if r := c.Do("GET", "/v1/domains/search?q=acme", nil, http.Header{"Accept": {"text/html, application/json;q=0.9"}}); r.StatusCode != 200 {
		t.Fatalf("mixed Accept: %d", r.StatusCode)
	}
}

func TestAuthentication(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		c := ts.Client
		body := map[string]any{"projectId": "prj_x", "items": []any{map[string]any{"kind": "domain", "domain": "acme.dev"}}}

		r := c.Do("POST", "/v1/quotes", body, nil)
		if r.StatusCode != 401 || r.JSON()["blockedBy"] != "auth:missing_credentials" || !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("no key: %d %s", r.StatusCode, r.Body)
		}
		r = c.Do("POST", "/v1/quotes", body, http.Header{"Authorization": {"Bearer agk_forged"}})
		if r.StatusCode != 401 || r.JSON()["blockedBy"] != "auth:invalid_credentials" {
			t.Fatalf("bad key: %d %s", r.StatusCode, r.Body)
		}
		key := ts.Key(t, "read", "quote")
		r = c.Do("POST", "/v1/quotes", body, http.Header{"Authorization": {"Bearer " + key}})
		if r.StatusCode != 404 || r.JSON()["blockedBy"] != "not_found:resource" {
			t.Fatalf("valid key reaches the operation: %d %s", r.StatusCode, r.Body)
		}
		// A holder operation refuses agent authority outright.
		r = c.Do("POST", "/v1/sandbox/sessions/ses_x/mandate", map[string]any{"mandate": "x.y.z"}, http.Header{"Authorization": {"Bearer " + key}})
		if r.StatusCode != 403 || r.JSON()["blockedBy"] != "auth:agent_authority_refused" {
			t.Fatalf("holder op with agent key: %d %s", r.StatusCode, r.Body)
		}
		// Revocation takes effect on the next request.
		k, err := ts.Store().Keys().ByHash(context.Background(), auth.HashKey(key))
		if err != nil {
			t.Fatal(err)
		}
		if err := ts.Store().Keys().Revoke(context.Background(), k.OrgID, k.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		r = c.Do("POST", "/v1/quotes", body, http.Header{"Authorization": {"Bearer " + key}})
		if r.StatusCode != 401 {
			t.Fatalf("revoked key: %d", r.StatusCode)
		}
	})
}

// An operation the deployment does not serve answers 501 with a typed
// envelope; every operation is served now, so the fallback is checked
// directly.
func TestNotImplementedOperationsAreTyped(t *testing.T) {
	_, err := httpapi.Unimplemented{}.ApplyWorkflow(context.Background(), api.ApplyWorkflowRequestObject{})
	var e *apierr.Error
	if !errors.As(err, &e) || e.Code != "plan:not_implemented" || e.Status() != 501 {
		t.Fatalf("unimplemented: %v", err)
	}
}

// envelopeData answers an envelope's data.
func envelopeData(env map[string]any) map[string]any { return env["data"].(map[string]any) }

// TestEmailFormatIsInvalidInput: an address that is not one (the first
// field of a signup) is input:invalid naming the field, over REST and MCP,
// not a body that "could not be decoded" as malformed JSON.
func TestEmailFormatIsInvalidInput(t *testing.T) {
	ts := start(t, server.Config{})
	r := ts.Client.Do("POST", "/v1/signup", map[string]any{"email": "not-an-address"}, nil)
	env := r.JSON()
	if r.StatusCode != 400 || env["blockedBy"] != "input:invalid" || !strings.Contains(string(r.Body), `"field":"body.email"`) {
		t.Errorf("REST: %d %s", r.StatusCode, r.Body)
	}
	if r := ts.Client.Do("POST", "/v1/signup", map[string]any{"email": "you@example.com"}, nil); r.StatusCode >= 300 {
		t.Errorf("a good address refused: %d %s", r.StatusCode, r.Body)
	}
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_signup","arguments":{"email":"not-an-address"}}}`
	_, body := rawDo(t, ts.Client.BaseURL, "POST", "/mcp", "application/json", call, http.Header{"Accept": {"application/json, text/event-stream"}})
	if !strings.Contains(body, `"isError":true`) || !strings.Contains(body, `"blockedBy":"input:invalid"`) || strings.Contains(body, "malformed_json") {
		t.Errorf("MCP: %s", body)
	}
}
