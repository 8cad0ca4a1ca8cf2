package server_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/mcp"
	"github.com/pierhq/pier/server/internal/ratelimit"
	"github.com/pierhq/pier/server/internal/service"
)

// victim is organisation A with one of each object it can cheaply make;
// ids names them by kind, and missing holds an id of the same shape for
// each kind that names nothing.
type victim struct {
	a        account
	ids      map[string]string
	missing  map[string]string
	contents string // a file only A uploaded
}

// attackCall is one request built from a map of ids: path parameters,
// query and body. Over MCP the three are the tool's arguments.
type attackCall struct {
	path  map[string]string
	query map[string]string
	body  map[string]any
	// registered: the call names A's domain where whether a name is
	// registered is public (RDAP and search say so), so a refusal saying
	// it is taken is not compared with one for a free name; it must
	// still be refused.
	registered bool
}

// TestAttackSweep: as organisation B's agent key (every scope), every
// operation of the contract is called with organisation A's ids, over REST
// and over MCP. Each answer must be the answer the same call gets with ids
// that name nothing (404 not_found:resource where an id is in the path),
// nothing of A's may show in any answer, and A's objects must read the
// same afterwards.
func TestAttackSweep(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		sink, relay := startRelay(t)
		ts := start(t, server.Config{DatabaseURL: db, RateLimits: attackRates, SMTPRelay: relay})
		v := newVictim(t, ts)
		b := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "read", "quote", "launch", "buy_domain")
		v.ids["bProject"], v.missing["bProject"] = b.project, b.project
		bBundle := upload(t, ts, b, siteSaying("intruder")).(string)
		v.ids["bBundle"], v.missing["bBundle"] = bBundle, bBundle
		before := v.snapshot(t, ts)
		specs := attackSpecs()
		for _, op := range sdk.Operations {
			spec, ok := specs[op.ID]
			if !ok {
				if why, skip := attackSkips[op.ID]; skip && why != "" {
					continue
				}
				if strings.Contains(op.Path, "{") {
					t.Errorf("%s takes an id in its path and has no attack in attackSpecs: add one", op.ID)
					continue
				}
				spec = func(map[string]string) []attackCall { return []attackCall{{}} }
			}
			for i := range spec(v.ids) {
				v.attack(t, ts, b, op, spec, i)
			}
		}
		v.cursorsLeakNothing(t, ts, b)
		v.planOnAsQuoteFails(t, ts, b)
		v.keysReplayNothingOfAs(t, ts, b)
		v.otherHumanPagesRefuse(t, ts, b)
		sink.mu.Lock()
		if len(sink.msgs) != 0 {
			t.Errorf("B sent %d messages through the relay", len(sink.msgs))
		}
		sink.mu.Unlock()
		if after := v.snapshot(t, ts); after != before {
			t.Errorf("A's objects changed under B's calls:\nbefore %s\nafter  %s", before, after)
		}
		// Nothing refused left B half-made things: no service, no spending.
		services := ts.Client.Do("GET", "/v1/services", nil, b.header()).JSON()["data"].(map[string]any)["services"].([]any)
		if spent, _ := budget(t, ts, b); len(services) != 0 || spent != 0 {
			t.Errorf("B's refused calls left %d services and $%v spent", len(services), spent)
		}
	})
}

// attackRates lets the sweep's few hundred calls through; rate limits are
// not what it attacks.
var attackRates = map[string]ratelimit.Policy{
	"search": {PerSecond: 1000, Burst: 1000}, "quotes": {PerSecond: 1000, Burst: 1000},
	"signup": {PerSecond: 1000, Burst: 1000}, mcp.RateClass: {PerSecond: 1000, Burst: 1000},
}

// attackSkips names the operations the sweep does not call, and why.
var attackSkips = map[string]string{
	// Public by design: the registry's RDAP answer about any name.
	"get_rdap_domain": "public registration data",
	// Sandbox sessions belong to no organisation; they are bound to the
	// capability and the registration secret, which sandbox_test.go attacks.
	"get_sandbox_session":      "sandbox, no organisation",
	"register_sandbox_mandate": "sandbox, no organisation",
	"create_sandbox_attempt":   "sandbox, no organisation",
	"decide_sandbox_gate":      "sandbox, no organisation",
	"get_sandbox_proof":        "sandbox, public proof",
	// Content-addressed: B can only send bytes it holds, and a hash that
	// does not match is input:invalid for every caller. Whether B can use
	// A's content without holding it is asked by find_missing_blobs and
	// upload_assets below.
	"upload_blob": "content-addressed",
	// The MCP endpoint itself; every tool is called through it below.
	"mcp": "the MCP endpoint",
}

func newVictim(t *testing.T, ts *testServer) *victim {
	t.Helper()
	c := ts.Client
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "read", "quote", "launch", "buy_domain")
	v := &victim{a: a, ids: map[string]string{"project": a.project, "key": a.keyID}, contents: "<!doctype html><h1>only A has this</h1>"}
	v.ids["bundle"] = upload(t, ts, a, map[string]string{"index.html": v.contents}).(string)
	sum := sha256.Sum256([]byte(v.contents))
	v.ids["blob"] = hex.EncodeToString(sum[:])
	// A asks after its own content, so the server remembers A has it.
	c.Do("POST", "/v1/bundles/missing", map[string]any{"projectId": a.project, "manifest": []any{map[string]any{"path": "index.html", "size": len(v.contents), "sha256": v.ids["blob"]}}}, a.header())
	names := availableDomains(3, "dev", "victim")
	v.ids["domain"] = names[0]
	q := c.Do("POST", "/v1/quotes", domainQuote(a.project, names[0], 1), a.header()).JSON()["data"].(map[string]any)
	r := c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "victim", "target": "edge", "bundleId": v.ids["bundle"], "domain": names[0], "quoteId": q["quoteId"]}, a.header())
	task := waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	v.ids["task"], v.ids["service"] = task["taskId"].(string), task["serviceId"].(string)
	v.ids["inbox"] = pagingMail(t, ts, a, names[0])
	addrs := c.Do("GET", "/v1/email-addresses", nil, a.header()).JSON()["data"].(map[string]any)["addresses"].([]any)
	v.ids["address"] = addrs[0].(map[string]any)["id"].(string)
	msgs := c.Do("GET", "/v1/inboxes/"+v.ids["inbox"]+"/messages", nil, a.header()).JSON()["data"].(map[string]any)["messages"].([]any)
	v.ids["message"] = msgs[0].(map[string]any)["id"].(string)
	keyed := a.header()
	keyed.Set("Idempotency-Key", "victim-held-quote")
	held := c.Do("POST", "/v1/quotes", heldQuote(a.project), keyed)
	v.ids["quote"] = held.JSON()["data"].(map[string]any)["quoteId"].(string)
	v.ids["workflow"] = prepare(t, ts, a, siteWorkflow(a.project, v.ids["bundle"], names[1]))["workflowId"].(string)
	raise := c.Do("POST", "/v1/projects/"+a.project+"/budget-raises", map[string]any{"amountUsd": 5, "reason": "victim raise"}, a.header()).JSON()["data"].(map[string]any)
	v.ids["raiseTask"], v.ids["gate"] = raise["taskId"].(string), gateOf(raise)
	setup := c.Do("POST", "/v1/billing/setup-link", nil, a.header()).JSON()["data"].(map[string]any)
	v.ids["setup"], v.ids["pollSecret"] = setup["setupSessionId"].(string), setup["pollSecret"].(string)
	v.missing = map[string]string{}
	for k, id := range v.ids {
		switch k {
		case "domain":
			v.missing[k] = names[2]
		case "blob":
			other := sha256.Sum256([]byte("nobody uploaded this"))
			v.missing[k] = hex.EncodeToString(other[:])
		case "pollSecret":
			v.missing[k] = id[:len(id)-4] + "aaaa"
		default:
			v.missing[k] = auth.ID(id[:strings.IndexByte(id, '_')])
		}
	}
	return v
}

// snapshot is what A's key reads of A's objects.
func (v *victim) snapshot(t *testing.T, ts *testServer) string {
	t.Helper()
	var sb strings.Builder
	for _, path := range []string{
		"/v1/projects/" + v.ids["project"], "/v1/services/" + v.ids["service"], "/v1/services/" + v.ids["service"] + "/env",
		"/v1/quotes/" + v.ids["quote"], "/v1/tasks/" + v.ids["task"], "/v1/tasks/" + v.ids["raiseTask"],
		"/v1/workflows/" + v.ids["workflow"], "/v1/bundles/" + v.ids["bundle"], "/v1/domains/" + v.ids["domain"],
		"/v1/inboxes/" + v.ids["inbox"] + "/messages", "/v1/messages/" + v.ids["message"], "/v1/email-addresses",
		"/v1/projects", "/v1/quotes", "/v1/services", "/v1/tasks", "/v1/bundles", "/v1/domains", "/v1/inboxes", "/v1/whoami",
	} {
		r := ts.Client.Do("GET", path, nil, v.a.header())
		fmt.Fprintf(&sb, "%s %d %s\n", path, r.StatusCode, r.Body)
	}
	ledger := ts.Client.Do("GET", "/v1/ledger?limit=1000", nil, v.a.header()).JSON()["data"].(map[string]any)
	fmt.Fprintf(&sb, "ledger entries %d\n", len(ledger["entries"].([]any)))
	return sb.String()
}

// attackSpecs: for each operation that can name an object, the calls
// that name A's (or, given the missing ids, nothing). An operation not
// here that takes no id is called bare, and its answer must hold none of
// A's ids.
func attackSpecs() map[string]func(ids map[string]string) []attackCall {
	byPath := func(kind string, body map[string]any) func(map[string]string) []attackCall {
		return func(ids map[string]string) []attackCall {
			return []attackCall{{path: map[string]string{"id": ids[kind]}, body: body}}
		}
	}
	byDomain := func(body func(map[string]string) map[string]any) func(map[string]string) []attackCall {
		return func(ids map[string]string) []attackCall {
			return []attackCall{{path: map[string]string{"domain": ids["domain"]}, body: body(ids)}}
		}
	}
	one := func(c func(ids map[string]string) attackCall) func(map[string]string) []attackCall {
		return func(ids map[string]string) []attackCall { return []attackCall{c(ids)} }
	}
	none := func(map[string]string) map[string]any { return nil }
	specs := map[string]func(map[string]string) []attackCall{
		"apply_workflow": byPath("workflow", nil), "get_workflow": byPath("workflow", nil),
		"get_bundle": byPath("bundle", nil), "get_quote": byPath("quote", nil), "release_quote": byPath("quote", nil),
		"get_project": byPath("project", nil), "delete_project": byPath("project", nil), "export_project": byPath("project", nil),
		"request_budget_raise": byPath("project", map[string]any{"amountUsd": 1, "reason": "intruder"}),
		"get_service":          byPath("service", nil), "get_service_logs": byPath("service", nil), "list_service_env": byPath("service", nil),
		"set_service_env":  byPath("service", map[string]any{"set": map[string]any{"INTRUDER": "1"}}),
		"rollback_service": byPath("service", map[string]any{"version": 1}), "teardown_service": byPath("service", nil),
		"get_task": byPath("task", nil), "delete_email_address": byPath("address", nil),
		"get_message": byPath("message", nil), "delete_message": byPath("message", nil),
		"list_messages": byPath("inbox", nil), "wait_for_message": byPath("inbox", map[string]any{"timeoutSeconds": 1}),
		"get_domain": byDomain(none), "detach_domain": byDomain(none), "remove_email": byDomain(none),
		"attach_domain": byDomain(func(ids map[string]string) map[string]any { return map[string]any{"serviceId": ids["service"]} }),
		"setup_email":   byDomain(func(ids map[string]string) map[string]any { return map[string]any{"quoteId": ids["quote"]} }),
		"set_registrant_contact": byDomain(func(map[string]string) map[string]any {
			return map[string]any{"name": "Intruder", "email": "intruder@example.org", "country": "NL"}
		}),
		// Into A's project; then into B's own, mail on A's domain.
		"create_quote": func(ids map[string]string) []attackCall {
			return []attackCall{
				{body: map[string]any{"projectId": ids["project"], "items": []any{map[string]any{"kind": "service", "target": "edge", "workload": "static_site", "name": "intruder"}}}},
				{body: map[string]any{"projectId": ids["bProject"], "items": []any{map[string]any{"kind": "email", "domain": ids["domain"]}}}},
			}
		},
		"create_project": one(func(ids map[string]string) attackCall {
			return attackCall{body: map[string]any{"name": "intruder", "budgetUsd": 1, "parentProjectId": ids["project"]}}
		}),
		"prepare_workflow": workflowAttacks,
		"poll_billing": one(func(ids map[string]string) attackCall {
			return attackCall{body: map[string]any{"setupSessionId": ids["setup"], "pollSecret": ids["pollSecret"]}}
		}),
		"send_message": one(func(ids map[string]string) attackCall {
			return attackCall{body: map[string]any{"from": "first@" + ids["domain"], "to": []any{"someone@example.org"}, "subject": "intruder", "text": "hello"}}
		}),
		"create_email_address": one(func(ids map[string]string) attackCall {
			return attackCall{body: map[string]any{"address": "intruder@" + ids["domain"]}}
		}),
		"list_quotes": one(func(ids map[string]string) attackCall {
			return attackCall{query: map[string]string{"projectId": ids["project"]}}
		}),
		"list_services": one(func(ids map[string]string) attackCall {
			return attackCall{query: map[string]string{"projectId": ids["project"]}}
		}),
	}
	specs["launch_service"] = launchAttacks
	specs["upload_assets"] = uploadAttacks
	// A's project; then B's own, asking after A's content.
	specs["find_missing_blobs"] = func(ids map[string]string) []attackCall {
		manifest := []any{map[string]any{"path": "index.html", "size": 39, "sha256": ids["blob"]}}
		return []attackCall{
			{body: map[string]any{"projectId": ids["project"], "manifest": manifest}},
			{body: map[string]any{"projectId": ids["bProject"], "manifest": manifest}},
		}
	}
	return specs
}

// workflowAttacks prepare a plan in A's project, and in B's own plans
// whose steps name A's objects: what prepare reads of them (a service's
// state, a bundle's digest, a quote's price) must not show.
func workflowAttacks(ids map[string]string) []attackCall {
	plan := func(steps ...map[string]any) attackCall {
		list := []any{}
		for i, s := range steps {
			s["id"] = fmt.Sprintf("s%d", i)
			list = append(list, s)
		}
		return attackCall{body: map[string]any{"projectId": ids["bProject"], "steps": list}}
	}
	step := func(tool string, args map[string]any) map[string]any {
		return map[string]any{"tool": tool, "arguments": args}
	}
	taken := func(c attackCall) attackCall { c.registered = true; return c }
	return []attackCall{
		{body: siteWorkflow(ids["project"], ids["bBundle"], "intruder-wf.dev")},
		plan(step("teardown_service", map[string]any{"id": ids["service"]})),
		plan(step("launch_service", map[string]any{"id": ids["bProject"], "name": "intruder", "target": "edge", "bundleId": ids["bundle"]})),
		plan(step("launch_service", map[string]any{"id": ids["project"], "name": "intruder", "target": "edge", "bundleId": ids["bBundle"]})),
		plan(step("launch_service", map[string]any{"id": ids["bProject"], "name": "intruder", "target": "edge", "bundleId": ids["bBundle"], "quoteId": ids["quote"]})),
		taken(plan(step("launch_service", map[string]any{"id": ids["bProject"], "name": "victim", "target": "edge", "bundleId": ids["bBundle"], "domain": ids["domain"]}))),
		plan(step("create_quote", map[string]any{"projectId": ids["project"], "items": []any{map[string]any{"kind": "email", "domain": ids["domain"]}}})),
		taken(plan(step("setup_email", map[string]any{"domain": ids["domain"], "quoteId": ids["quote"]}))),
		taken(plan(step("set_registrant_contact", map[string]any{"domain": ids["domain"], "name": "Intruder", "email": "intruder@example.org", "country": "NL"}))),
		plan(step("upload_assets", uploadBody(ids["project"], siteSaying("intruder")))),
	}
}

// launchAttacks launch into A's project, and into B's own with A's
// bundle, quote or workflow's ids.
func launchAttacks(ids map[string]string) []attackCall {
	site := func(project string, extra map[string]any) attackCall {
		body := map[string]any{"name": "intruder", "target": "edge", "bundleId": ids["bBundle"]}
		maps.Copy(body, extra)
		return attackCall{path: map[string]string{"id": project}, body: body}
	}
	return []attackCall{
		site(ids["project"], nil),
		site(ids["bProject"], map[string]any{"bundleId": ids["bundle"]}),
		site(ids["bProject"], map[string]any{"quoteId": ids["quote"]}),
	}
}

// uploadAttacks upload into A's project, and into B's own a bundle built
// on A's bundle or from A's content by its hash alone.
func uploadAttacks(ids map[string]string) []attackCall {
	return []attackCall{
		{body: uploadBody(ids["project"], siteSaying("intruder"))},
		{body: map[string]any{"projectId": ids["bProject"], "baseBundleId": ids["bundle"], "removed": []any{"index.html"}}},
		{body: map[string]any{"projectId": ids["bProject"], "manifest": []any{map[string]any{"path": "index.html", "size": 39, "sha256": ids["blob"]}}}},
	}
}

// attack sends call i of an operation's spec as B, with A's ids and with
// missing ones, over REST and MCP, and compares the answers.
func (v *victim) attack(t *testing.T, ts *testServer, b account, op sdk.Operation, spec func(map[string]string) []attackCall, i int) {
	t.Helper()
	hit, miss := spec(v.ids)[i], spec(v.missing)[i]
	bare := hit.path == nil && hit.query == nil && hit.body == nil
	// An id in the path is not found; a domain in the path is
	// answered as any domain the caller does not own.
	pathID := strings.Contains(op.Path, "{id}")
	for _, over := range []string{"REST", "MCP"} {
		if over == "MCP" && op.MCPTool == "" {
			continue
		}
		name := fmt.Sprintf("%s %s #%d", over, op.ID, i)
		st, got := v.send(t, ts, b, op, hit, over)
		mst, want := st, got
		if !bare {
			mst, want = v.send(t, ts, b, op, miss, over)
		}
		// A refusal must read as the missing object's; a success (a
		// quote for mail on a domain, say) is compared by status, since
		// it names what it made.
		g, w := v.normalise(got, v.ids), v.normalise(want, v.missing)
		if blockedByOf(over, got) == "" && st < 300 && st == mst {
			g, w = "", ""
		}
		if hit.registered {
			if blockedByOf(over, got) == "" {
				t.Errorf("%s: B's plan on A's domain was not refused: %d %s", name, st, got)
			}
			g, w, mst = "", "", st
		}
		if st != mst || g != w {
			t.Errorf("%s: A's ids answer unlike missing ones:\nA's:     %d %s\nmissing: %d %s", name, st, got, mst, want)
		}
		if blocked := blockedByOf(over, got); pathID && hit.path[pathKey(op)] != v.ids["bProject"] && blocked != "not_found:resource" {
			t.Errorf("%s: %d %s, want not_found:resource", name, st, got)
		}
		sent := fmt.Sprint(hit)
		for k, id := range v.ids {
			if k != "bProject" && k != "bBundle" && strings.Contains(got, id) && !strings.Contains(sent, id) {
				t.Errorf("%s: the answer shows A's %s %s: %s", name, k, id, got)
			}
		}
	}
}

// pathKey is the name of the operation's one path parameter.
func pathKey(op sdk.Operation) string {
	open := strings.IndexByte(op.Path, '{')
	return op.Path[open+1 : open+strings.IndexByte(op.Path[open:], '}')]
}

// send makes one call as B and answers its status (200 over MCP) and the
// body: the REST answer or the tool's result.
func (v *victim) send(t *testing.T, ts *testServer, b account, op sdk.Operation, c attackCall, over string) (int, string) {
	t.Helper()
	if over == "MCP" {
		args := map[string]any{}
		for k, x := range c.path {
			args[k] = x
		}
		for k, x := range c.query {
			args[k] = x
		}
		maps.Copy(args, c.body)
		raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": op.MCPTool, "arguments": args}})
		h := b.header()
		h.Set("Accept", "application/json, text/event-stream")
		st, body := rawDo(t, ts.Client.BaseURL, "POST", "/mcp", "application/json", string(raw), h)
		return st, body
	}
	path := op.Path
	for k, x := range c.path {
		path = strings.ReplaceAll(path, "{"+k+"}", url.PathEscape(x))
	}
	if len(c.query) > 0 {
		q := url.Values{}
		for k, x := range c.query {
			q.Set(k, x)
		}
		path += "?" + q.Encode()
	}
	var body any
	if c.body != nil {
		body = c.body
	} else if op.Method == "POST" || op.Method == "PUT" {
		body = map[string]any{}
	}
	r := ts.Client.Do(op.Method, path, body, b.header())
	return r.StatusCode, string(r.Body)
}

// normalise replaces each id with its kind, so that an answer about A's
// object and one about a missing object compare equal when they say the
// same thing.
func (v *victim) normalise(body string, ids map[string]string) string {
	keys := slices.Collect(maps.Keys(ids))
	sort.Slice(keys, func(i, j int) bool { return len(ids[keys[i]]) > len(ids[keys[j]]) })
	for _, k := range keys {
		body = strings.ReplaceAll(body, ids[k], "<"+k+">")
	}
	return body
}

// blockedByOf reads blockedBy from a REST error or an MCP tool error.
func blockedByOf(over, body string) string {
	var env struct {
		BlockedBy string `json:"blockedBy"`
		Result    struct {
			StructuredContent struct {
				BlockedBy string `json:"blockedBy"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	json.NewDecoder(bytes.NewReader([]byte(body))).Decode(&env)
	if over == "MCP" {
		return env.Result.StructuredContent.BlockedBy
	}
	return env.BlockedBy
}

// cursorsLeakNothing: a list's next-page cursor that A was given pages
// nothing of A's for B.
func (v *victim) cursorsLeakNothing(t *testing.T, ts *testServer, b account) {
	t.Helper()
	for _, path := range []string{"/v1/projects", "/v1/quotes", "/v1/services", "/v1/tasks", "/v1/bundles", "/v1/domains", "/v1/email-addresses", "/v1/inboxes"} {
		page := ts.Client.Do("GET", path+"?limit=1", nil, v.a.header()).JSON()["data"].(map[string]any)
		cursor, _ := page["nextCursor"].(string)
		if cursor == "" {
			continue
		}
		r := ts.Client.Do("GET", path+"?limit=100&cursor="+url.QueryEscape(cursor), nil, b.header())
		for k, id := range v.ids {
			if k != "bProject" && k != "bBundle" && strings.Contains(string(r.Body), id) {
				t.Errorf("B paging %s with A's cursor sees A's %s: %s", path, k, r.Body)
			}
		}
	}
}

// otherHumanPagesRefuse: B's signed-in human, on every page that takes an
// id, with A's ids: 404, as for an id that names nothing, and nothing of
// A's on the page.
func (v *victim) otherHumanPagesRefuse(t *testing.T, ts *testServer, b account) {
	t.Helper()
	hb := signIn(t, ts, b.org)
	form := url.Values{"csrf": {csrfOf(t, hb.get("/dashboard"))}, "decision": {"approve"}, "scope": {"buy_domain"},
		"cap_usd": {"1"}, "period": {"month"}, "budgetPeriod": {"monthly"}, "onBudgetExhausted": {"pause_services"}}
	for _, tc := range []struct{ method, path string }{
		{"GET", "/approvals/{gate}"}, {"POST", "/approvals/{gate}"},
		{"POST", "/projects/{project}/budget-policy"},
		{"POST", "/keys/{key}/cap"}, {"POST", "/keys/{key}/revoke"}, {"POST", "/keys/{key}/grant"},
		{"POST", "/domains/{domain}/transfer-out"}, {"POST", "/domains/{domain}/renew"},
		{"GET", "/billing/{setup}"}, {"POST", "/billing/{setup}"},
	} {
		var answers [2]page
		for i, ids := range []map[string]string{v.ids, v.missing} {
			path := tc.path
			for k, id := range ids {
				path = strings.ReplaceAll(path, "{"+k+"}", id)
			}
			if tc.method == "GET" {
				answers[i] = hb.get(path)
			} else {
				answers[i] = hb.post(path, form)
			}
		}
		got, want := answers[0], answers[1]
		if got.status != 404 || want.status != 404 || v.normalise(got.body, v.ids) != v.normalise(want.body, v.missing) {
			t.Errorf("B's human: %s %s: %d, a missing id: %d\n%s", tc.method, tc.path, got.status, want.status, got.body)
		}
	}
	// The pages that list: nothing of A's.
	for _, path := range []string{"/dashboard", "/ledger.jsonl", "/keys", "/domains"} {
		p := hb.get(path)
		for k, id := range v.ids {
			if k != "bProject" && k != "bBundle" && strings.Contains(p.body, id) {
				t.Errorf("B's human sees A's %s on %s", k, path)
			}
		}
	}
}

// TestAttackSweepScopes: a key with the read scope alone calls every
// operation that needs another scope, with its own organisation's ids,
// over REST and MCP: each is auth:insufficient_scope, and nothing is made.
func TestAttackSweepScopes(t *testing.T) {
	ts := start(t, server.Config{RateLimits: attackRates})
	v := newVictim(t, ts)
	v.ids["bProject"], v.ids["bBundle"] = v.a.project, v.ids["bundle"]
	reader := v.a
	reader.key = strings.TrimPrefix(addKey(t, ts, v.a, "read").Get("Authorization"), "Bearer ")
	if r := ts.Client.Do("GET", "/v1/projects/"+v.a.project, nil, reader.header()); r.StatusCode != 200 {
		t.Fatalf("the read key reads nothing of its organisation's: %d %s", r.StatusCode, r.Body)
	}
	before := v.snapshot(t, ts)
	specs := attackSpecs()
	blob := map[string]any{"sha256": v.ids["blob"], "contentBase64": base64.StdEncoding.EncodeToString([]byte(v.contents))}
	specs["upload_blob"] = func(ids map[string]string) []attackCall {
		return []attackCall{{path: map[string]string{"sha256": ids["blob"]}, body: map[string]any{"contentBase64": blob["contentBase64"]}}}
	}
	specs["upload_blobs"] = func(map[string]string) []attackCall {
		return []attackCall{{body: map[string]any{"blobs": []any{blob}}}}
	}
	for _, op := range sdk.Operations {
		if op.Authority != "agent" || op.Scope == "read" || op.Scope == "" {
			continue
		}
		calls := []attackCall{{}}
		if spec, ok := specs[op.ID]; ok {
			calls = spec(v.ids)
		}
		for i, call := range calls {
			for _, over := range []string{"REST", "MCP"} {
				if st, got := v.send(t, ts, reader, op, call, over); blockedByOf(over, got) != "auth:insufficient_scope" {
					t.Errorf("%s %s #%d with a read key: %d %s", over, op.ID, i, st, got)
				}
			}
		}
	}
	if after := v.snapshot(t, ts); after != before {
		t.Errorf("a read key changed something:\nbefore %s\nafter  %s", before, after)
	}
}

// planOnAsQuoteFails: B prepares a launch in its own project with A's
// quote (prepare reads nothing of it) and applies it: the launch, run as
// B, does not find the quote, and A's quote stays held.
func (v *victim) planOnAsQuoteFails(t *testing.T, ts *testServer, b account) {
	t.Helper()
	wf := prepare(t, ts, b, map[string]any{"projectId": b.project, "steps": []any{map[string]any{"id": "site", "tool": "launch_service",
		"arguments": map[string]any{"id": b.project, "name": "intruder", "target": "edge", "bundleId": v.ids["bBundle"], "quoteId": v.ids["quote"]}}}})
	r := ts.Client.Do("POST", "/v1/workflows/"+wf["workflowId"].(string)+"/apply", map[string]any{"signedPlan": wf["signedPlan"]}, b.header())
	if r.StatusCode != 202 {
		t.Fatalf("apply: %d %s", r.StatusCode, r.Body)
	}
	task := waitTask(t, ts, b, r.JSON()["data"].(map[string]any)["taskId"].(string), "failed")
	if raw, _ := json.Marshal(task); !strings.Contains(string(raw), "not_found:resource") {
		t.Errorf("B's plan with A's quote: %s", raw)
	}
}

func heldQuote(project string) map[string]any {
	return map[string]any{"projectId": project, "items": []any{map[string]any{"kind": "service", "target": "edge", "workload": "static_site", "name": "held"}}}
}

// keysReplayNothingOfAs: B sends A's quote request byte for byte with
// A's Idempotency-Key, over REST and MCP: B's key is another caller, so
// nothing of A's is replayed; the project is not found.
func (v *victim) keysReplayNothingOfAs(t *testing.T, ts *testServer, b account) {
	t.Helper()
	h := b.header()
	h.Set("Idempotency-Key", "victim-held-quote")
	r := ts.Client.Do("POST", "/v1/quotes", heldQuote(v.ids["project"]), h)
	if r.StatusCode != 404 || r.Header.Get("Idempotency-Replayed") != "" || strings.Contains(string(r.Body), v.ids["quote"]) {
		t.Errorf("A's request and key, sent by B: %d %s", r.StatusCode, r.Body)
	}
	args := heldQuote(v.ids["project"])
	args["idempotencyKey"] = "victim-held-quote"
	op, _ := sdk.LookupOperation("create_quote")
	if _, got := v.send(t, ts, b, op, attackCall{body: args}, "MCP"); blockedByOf("MCP", got) != "not_found:resource" || strings.Contains(got, v.ids["quote"]) {
		t.Errorf("A's request and key, sent by B over MCP: %s", got)
	}
}
