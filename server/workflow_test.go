package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
	"github.com/pierhq/pier/internal/testkit/contracttest"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/registrar"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

// siteWorkflow quotes a domain and launches a site on it with the quote.
func siteWorkflow(project string, bundle any, domain string) map[string]any {
	return map[string]any{"projectId": project, "steps": []any{
		map[string]any{"id": "q", "tool": "create_quote", "arguments": domainQuote(project, domain, 1)},
		map[string]any{"id": "site", "tool": "launch_service", "arguments": map[string]any{
			"id": project, "name": "www", "target": "edge", "bundleId": bundle, "domain": domain, "quoteId": "${steps.q.quoteId}"}},
	}}
}

func prepare(t *testing.T, ts *testServer, a account, body map[string]any) map[string]any {
	t.Helper()
	r := ts.Client.Do("POST", "/v1/workflows", body, a.header())
	if r.StatusCode != 201 {
		t.Fatalf("prepare: %d %s", r.StatusCode, r.Body)
	}
	return r.JSON()["data"].(map[string]any)
}

func counts(t *testing.T, ts *testServer, a account) string {
	t.Helper()
	spent, held := budget(t, ts, a)
	tasks := ts.Client.Do("GET", "/v1/tasks", nil, a.header()).JSON()["data"].(map[string]any)["tasks"].([]any)
	quotes := ts.Client.Do("GET", "/v1/quotes", nil, a.header()).JSON()["data"].(map[string]any)["quotes"].([]any)
	services := ts.Client.Do("GET", "/v1/services", nil, a.header()).JSON()["data"].(map[string]any)["services"].([]any)
	return fmt.Sprintf("spent=%v held=%v tasks=%d quotes=%d services=%d", spent, held, len(tasks), len(quotes), len(services))
}

func TestWorkflowPrepareReservesNothingAndApplyRunsOnce(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
		domain := availableDomains(1, "dev", "wflow")[0]
		bundle := upload(t, ts, a, siteSaying("planned"))
		before := counts(t, ts, a)

		wf := prepare(t, ts, a, siteWorkflow(a.project, bundle, domain))
		if after := counts(t, ts, a); after != before {
			t.Fatalf("prepare changed something: %s, was %s", after, before)
		}
		if n, _ := ts.Store().Domains().CountPurchases(context.Background(), domain); n != 0 {
			t.Fatal("prepare called the registrar")
		}
		steps := wf["steps"].([]any)
		if wf["totalUsd"] != 12.0 || steps[0].(map[string]any)["priceUsd"] != 12.0 || steps[1].(map[string]any)["irreversible"] != true {
			t.Fatalf("projection: %v", wf)
		}

		// Tampered plan bytes are refused.
		signed := wf["signedPlan"].(string)
		parts := strings.Split(signed, ".")
		tampered := parts[0] + "." + parts[1][:len(parts[1])-2] + "AA." + parts[2]
		r := ts.Client.Do("POST", "/v1/workflows/"+wf["workflowId"].(string)+"/apply", map[string]any{"signedPlan": tampered}, a.header())
		if r.StatusCode != 400 || r.JSON()["blockedBy"] != "plan:signature_invalid" {
			t.Fatalf("tampered: %d %s", r.StatusCode, r.Body)
		}

		// Twenty concurrent applies run one task.
		var mu sync.Mutex
		ids := map[string]int{}
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := ts.Client.Do("POST", "/v1/workflows/"+wf["workflowId"].(string)+"/apply", map[string]any{"signedPlan": signed}, a.header())
				if r.StatusCode != 202 {
					t.Errorf("apply: %d %s", r.StatusCode, r.Body)
					return
				}
				mu.Lock()
				ids[r.JSON()["data"].(map[string]any)["taskId"].(string)]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		if len(ids) != 1 {
			t.Fatalf("concurrent applies made %d tasks: %v", len(ids), ids)
		}
		var task string
		for id := range ids {
			task = id
		}
		done := waitTask(t, ts, a, task, "succeeded")
		if n, _ := ts.Store().Domains().CountPurchases(context.Background(), domain); n != 1 {
			t.Fatalf("purchases %d", n)
		}
		if spent, held := budget(t, ts, a); spent != 12 || held != 0 {
			t.Fatalf("spent %v held %v", spent, held)
		}
		// A second apply replays the first.
		r = ts.Client.Do("POST", "/v1/workflows/"+wf["workflowId"].(string)+"/apply", nil, a.header())
		if r.StatusCode != 202 || r.JSON()["data"].(map[string]any)["taskId"] != task || r.JSON()["replayed"] != true {
			t.Fatalf("second apply: %d %s", r.StatusCode, r.Body)
		}
		for _, s := range done["result"].(map[string]any)["steps"].([]any) {
			if s.(map[string]any)["receipt"] == nil {
				t.Fatalf("step without its receipt: %v", s)
			}
		}
	})
}

func TestWorkflowRefusesChangedPricesAndState(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		dir := t.TempDir()
		ts := start(t, server.Config{DatabaseURL: db, DataDir: dir})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
		domain := availableDomains(1, "dev", "wfprice")[0]
		bundle := upload(t, ts, a, siteSaying("priced"))
		wf := prepare(t, ts, a, siteWorkflow(a.project, bundle, domain))

		// The registrar's price moves while the plan waits.
		ts.Stop()
		ts = start(t, server.Config{DatabaseURL: db, DataDir: dir, RegistrarPrices: registrar.PriceList{"dev": money.USD(15, 0)}})
		r := ts.Client.Do("POST", "/v1/workflows/"+wf["workflowId"].(string)+"/apply", nil, a.header())
		if r.StatusCode != 409 || r.JSON()["blockedBy"] != "plan:price_changed" || !strings.Contains(string(r.Body), `"tool":"prepare_workflow"`) {
			t.Fatalf("price changed: %d %s", r.StatusCode, r.Body)
		}
		if spent, held := budget(t, ts, a); spent != 0 || held != 0 {
			t.Fatalf("a refused apply moved money: spent %v held %v", spent, held)
		}

		// A service the plan tears down changes state before apply.
		site := upload(t, ts, a, siteSaying("old"))
		lr := ts.Client.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "old", "target": "edge", "bundleId": site}, a.header())
		waitTask(t, ts, a, lr.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
		svc := lr.JSON()["data"].(map[string]any)["serviceId"].(string)
		down := prepare(t, ts, a, map[string]any{"projectId": a.project, "steps": []any{
			map[string]any{"id": "down", "tool": "teardown_service", "arguments": map[string]any{"id": svc}}}})
		td := ts.Client.Do("POST", "/v1/services/"+svc+"/teardown", nil, a.header())
		waitTask(t, ts, a, td.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
		r = ts.Client.Do("POST", "/v1/workflows/"+down["workflowId"].(string)+"/apply", nil, a.header())
		if r.StatusCode != 409 || r.JSON()["blockedBy"] != "plan:stale" {
			t.Fatalf("stale: %d %s", r.StatusCode, r.Body)
		}
	})
}

func TestWorkflowWaitsForTheHuman(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
		domain := availableDomains(1, "dev", "wfgate")[0]
		wf := prepare(t, ts, a, siteWorkflow(a.project, upload(t, ts, a, siteSaying("gated")), domain))
		if s := wf["steps"].([]any)[1].(map[string]any); s["needsApproval"] != true || s["approvalReason"] == nil {
			t.Fatalf("the projection hides the gate: %v", s)
		}
		r := ts.Client.Do("POST", "/v1/workflows/"+wf["workflowId"].(string)+"/apply", nil, a.header())
		if r.StatusCode != 202 {
			t.Fatalf("apply: %d %s", r.StatusCode, r.Body)
		}
		task := r.JSON()["data"].(map[string]any)["taskId"].(string)
		waiting := waitTask(t, ts, a, task, "input_required")
		if n, _ := ts.Store().Domains().CountPurchases(context.Background(), domain); n != 0 {
			t.Fatal("bought before the human decided")
		}
		if err := ts.Service().Approvals.Decide(context.Background(), service.Human{OrgID: a.org, UserID: "usr_a"}, gateOf(waiting), true); err != nil {
			t.Fatal(err)
		}
		waitTask(t, ts, a, task, "succeeded")
		if n, _ := ts.Store().Domains().CountPurchases(context.Background(), domain); n != 1 {
			t.Fatalf("purchases %d", n)
		}
	})
}

func TestWorkflowFailureUndoesWhatItCan(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
		domain := availableDomains(1, "dev", "wfundo")[0]
		bundle := upload(t, ts, a, siteSaying("undo"))
		launch := func(name string, extra map[string]any) map[string]any {
			args := map[string]any{"id": a.project, "name": name, "target": "edge", "bundleId": bundle}
			for k, v := range extra {
				args[k] = v
			}
			return args
		}
		wf := prepare(t, ts, a, map[string]any{"projectId": a.project, "steps": []any{
			map[string]any{"id": "q", "tool": "create_quote", "arguments": domainQuote(a.project, domain, 1)},
			map[string]any{"id": "site", "tool": "launch_service", "arguments": launch("www", map[string]any{"domain": domain, "quoteId": "${steps.q.quoteId}"})},
			map[string]any{"id": "plain", "tool": "launch_service", "arguments": launch("plain", nil), "after": []any{"site"}},
			// The same name on another target: a service keeps its target
			// across versions, so this step fails.
			map[string]any{"id": "again", "tool": "launch_service", "arguments": launch("plain", map[string]any{"target": "worker", "run": "sleep 60"}), "after": []any{"plain"}},
			map[string]any{"id": "later", "tool": "launch_service", "arguments": launch("later", nil), "after": []any{"again"}},
			// Independent of the failure, but run after it: stopped, not
			// started only to be undone.
			map[string]any{"id": "solo", "tool": "launch_service", "arguments": launch("solo", nil)},
		}})
		r := ts.Client.Do("POST", "/v1/workflows/"+wf["workflowId"].(string)+"/apply", nil, a.header())
		task := r.JSON()["data"].(map[string]any)["taskId"].(string)
		failed := waitTask(t, ts, a, task, "failed")
		report, detail := map[string]string{}, map[string]string{}
		for _, s := range failed["result"].(map[string]any)["steps"].([]any) {
			s := s.(map[string]any)
			report[s["id"].(string)] = s["state"].(string)
			detail[s["id"].(string)], _ = s["detail"].(string)
		}
		want := map[string]string{"q": "not_undone", "site": "not_undone", "plain": "undone", "again": "failed", "later": "skipped", "solo": "skipped"}
		for id, state := range want {
			if report[id] != state {
				t.Errorf("step %s: %s, want %s (report %v)", id, report[id], state, failed["result"])
			}
		}
		if !strings.Contains(detail["later"], "depends on step again") || !strings.Contains(detail["solo"], "stopped when step again failed") {
			t.Errorf("the report does not tell dependants from stopped steps: later %q, solo %q", detail["later"], detail["solo"])
		}
		services := ts.Client.Do("GET", "/v1/services", nil, a.header()).JSON()["data"].(map[string]any)["services"].([]any)
		for _, s := range services {
			if s.(map[string]any)["name"] == "solo" {
				t.Errorf("a step after the failure ran: %v", s)
			}
		}
		if !strings.Contains(fmt.Sprint(failed["result"]), "cannot be undone") {
			t.Errorf("the report does not say the registration stays: %v", failed["result"])
		}
		// One charge: the domain, bought once.
		if spent, held := budget(t, ts, a); spent != 12 || held != 0 {
			t.Fatalf("spent %v held %v", spent, held)
		}
	})
}

func TestWorkflowSetsUpMail(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	domain := availableDomains(1, "dev", "wfmail")[0]
	body := siteWorkflow(a.project, upload(t, ts, a, siteSaying("mail")), domain)
	body["steps"] = append(body["steps"].([]any),
		map[string]any{"id": "mq", "tool": "create_quote", "arguments": map[string]any{"projectId": a.project, "items": []any{map[string]any{"kind": "email", "domain": domain}}}},
		map[string]any{"id": "mail", "tool": "setup_email", "arguments": map[string]any{"domain": domain, "quoteId": "${steps.mq.quoteId}"}, "after": []any{"site"}})
	wf := prepare(t, ts, a, body)
	if wf["totalUsd"] != 15.0 {
		t.Fatalf("the plan prices the domain and the mail add-on: %v", wf["totalUsd"])
	}
	r := ts.Client.Do("POST", "/v1/workflows/"+wf["workflowId"].(string)+"/apply", nil, a.header())
	waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	if mx := dnsAnswer(t, ts, domain, dns.TypeMX); len(mx) != 1 {
		t.Fatalf("MX after the workflow: %v", mx)
	}
	if spent, _ := budget(t, ts, a); spent != 15 {
		t.Fatalf("spent %v", spent)
	}

	// A second plan proposes the registrant, at an address the agent's
	// keys read; a signed-in person confirms at the approval URL the
	// workflow's task shows, and the plan finishes.
	reg := prepare(t, ts, a, map[string]any{"projectId": a.project, "steps": []any{
		map[string]any{"id": "registrant", "tool": "set_registrant_contact", "arguments": map[string]any{"domain": domain, "name": "Ada Lovelace", "email": "owner@" + domain, "country": "GB"}}}})
	if st := reg["steps"].([]any)[0].(map[string]any); st["needsApproval"] != true {
		t.Fatalf("the projection hides the confirmation: %v", st)
	}
	r = ts.Client.Do("POST", "/v1/workflows/"+reg["workflowId"].(string)+"/apply", nil, a.header())
	task := r.JSON()["data"].(map[string]any)["taskId"].(string)
	waiting := waitTask(t, ts, a, task, "input_required")
	approval, _ := waiting["approvalUrl"].(string)
	if !strings.Contains(approval, "/approvals/gat_") {
		t.Fatalf("the waiting workflow shows no approval URL: %v", waiting)
	}
	if body := string(ts.Client.Do("GET", "/v1/tasks/"+task, nil, a.header()).Body); !strings.Contains(body, `"kind":"url"`) {
		t.Fatalf("the waiting workflow's actions: %s", body)
	}
	approveAt(t, signIn(t, ts, a.org), approval)
	waitTask(t, ts, a, task, "succeeded")
}

// sameOrgKey makes another key in a's organisation, with its own scopes.
func sameOrgKey(t *testing.T, ts *testServer, a account, scopes ...string) account {
	t.Helper()
	secret, hash := auth.NewKey()
	k := store.APIKey{ID: auth.ID("key"), OrgID: a.org, Name: "other", Scopes: scopes, CreatedAt: ts.Service().Now()}
	if err := ts.Store().Keys().Create(context.Background(), k, hash); err != nil {
		t.Fatal(err)
	}
	b := a
	b.key, b.keyID = secret, k.ID
	b.principal = &auth.Principal{Kind: "agent", OrgID: a.org, KeyID: k.ID, Scopes: scopes, Caller: "key:" + k.ID}
	return b
}

// A plan lends no authority: the steps run as the caller that applies it,
// and a caller that could not make a step's call itself is refused.
func TestWorkflowRunsWithTheAppliersAuthority(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	domain := availableDomains(1, "dev", "wfauth")[0]
	bundle := upload(t, ts, a, siteSaying("authority"))
	wf := prepare(t, ts, a, siteWorkflow(a.project, bundle, domain))
	if s := wf["steps"].([]any)[1].(map[string]any); s["needsApproval"] != false {
		t.Fatalf("prepared with buy_domain, the purchase needs no approval: %v", s)
	}
	apply := func(b account) *contracttest.Response {
		return ts.Client.Do("POST", "/v1/workflows/"+wf["workflowId"].(string)+"/apply", nil, b.header())
	}
	bought := func() int {
		n, _ := ts.Store().Domains().CountPurchases(context.Background(), domain)
		return n
	}

	// A launch-only key cannot apply a plan that quotes and buys.
	launchOnly := sameOrgKey(t, ts, a, "launch")
	r := apply(launchOnly)
	if r.StatusCode != 403 || r.JSON()["blockedBy"] != "auth:insufficient_scope" || !strings.Contains(r.JSON()["message"].(string), "quote") {
		t.Fatalf("launch-only apply: %d %s", r.StatusCode, r.Body)
	}
	// A key that may quote and launch but not buy cannot apply a plan that
	// buys without a human, as prepared.
	noBuy := sameOrgKey(t, ts, a, "launch", "read", "quote")
	r = apply(noBuy)
	if r.StatusCode != 403 || r.JSON()["blockedBy"] != "auth:insufficient_scope" || !strings.Contains(r.JSON()["message"].(string), "buy_domain") {
		t.Fatalf("apply without buy_domain: %d %s", r.StatusCode, r.Body)
	}
	// Another organisation does not see the plan.
	other := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	if r := apply(other); r.StatusCode != 404 || r.JSON()["blockedBy"] != "not_found:resource" {
		t.Fatalf("another organisation: %d %s", r.StatusCode, r.Body)
	}
	if n := bought(); n != 0 {
		t.Fatalf("a refused apply bought the domain: %d purchases", n)
	}
	if spent, held := budget(t, ts, a); spent != 0 || held != 0 {
		t.Fatalf("a refused apply moved money: spent %v held %v", spent, held)
	}

	// A plan prepared without buy_domain shows a human approving the
	// purchase; applied by a key that holds buy_domain it would skip the
	// human, so it is stale.
	gated := prepare(t, ts, noBuy, siteWorkflow(a.project, bundle, domain))
	r = ts.Client.Do("POST", "/v1/workflows/"+gated["workflowId"].(string)+"/apply", nil, a.header())
	if r.StatusCode != 409 || r.JSON()["blockedBy"] != "plan:stale" || !strings.Contains(r.JSON()["message"].(string), "approval") {
		t.Fatalf("a gate the projection showed would vanish: %d %s", r.StatusCode, r.Body)
	}

	// Applied by another key with every scope, the steps run as that key.
	full := sameOrgKey(t, ts, a, "launch", "read", "quote", "buy_domain")
	r = apply(full)
	if r.StatusCode != 202 {
		t.Fatalf("apply: %d %s", r.StatusCode, r.Body)
	}
	waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	if n := bought(); n != 1 {
		t.Fatalf("purchases %d", n)
	}
	entries, err := ts.Store().Ledger().Entries(context.Background(), a.org, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if (e.Action == "create_quote" || e.Action == "launch_service") && e.Actor != "key:"+full.keyID {
			t.Errorf("%s ran as %s, not the applier key:%s", e.Action, e.Actor, full.keyID)
		}
	}
}

// prepare_workflow refuses a plan it cannot run, with a typed input error
// and nothing written.
func TestWorkflowPrepareRefusesInvalidPlans(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	bundle := upload(t, ts, a, siteSaying("invalid"))
	launch := func(id string, extra map[string]any) map[string]any {
		args := map[string]any{"id": a.project, "name": id, "target": "edge", "bundleId": bundle}
		for k, v := range extra {
			args[k] = v
		}
		return map[string]any{"id": id, "tool": "launch_service", "arguments": args}
	}
	many := []any{}
	for i := range 51 {
		many = append(many, launch(fmt.Sprintf("s%d", i), nil))
	}
	// Big but under the HTTP body limit: the workflow's own size limit.
	big := launch("big", map[string]any{"name": strings.Repeat("x", 300<<10)})
	deep := map[string]any{"v": "x"}
	for range 12 {
		deep = map[string]any{"v": deep}
	}
	cases := []struct {
		name  string
		steps []any
		want  string // in the message
	}{
		{"cycle", []any{
			launch("a", map[string]any{"name": "a"}),
			func() map[string]any { s := launch("b", nil); s["after"] = []any{"c"}; return s }(),
			func() map[string]any { s := launch("c", nil); s["after"] = []any{"b"}; return s }(),
		}, "cycle"},
		{"self reference", []any{func() map[string]any { s := launch("a", nil); s["after"] = []any{"a"}; return s }()}, "itself"},
		{"unknown operation", []any{map[string]any{"id": "x", "tool": "delete_project", "arguments": map[string]any{"id": a.project}}}, "tool"},
		{"unknown step referenced", []any{launch("a", map[string]any{"quoteId": "${steps.nope.quoteId}"})}, "nope"},
		{"arguments against the schema", []any{launch("a", map[string]any{"target": "moon"})}, "target"},
		{"missing required argument", []any{map[string]any{"id": "a", "tool": "launch_service", "arguments": map[string]any{"id": a.project, "target": "edge"}}}, "name"},
		{"too deep", []any{launch("a", map[string]any{"extra": deep})}, "deeper"},
		{"more steps than the limit", many, "steps"},
		{"over the size limit", []any{big}, "bytes"},
	}
	before := counts(t, ts, a)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ts.Client.Do("POST", "/v1/workflows", map[string]any{"projectId": a.project, "steps": c.steps}, a.header())
			code, _ := r.JSON()["blockedBy"].(string)
			if r.StatusCode != 400 || !strings.HasPrefix(code, "input:") || !strings.Contains(string(r.Body), c.want) {
				t.Fatalf("%d %.600s", r.StatusCode, r.Body)
			}
		})
	}
	if after := counts(t, ts, a); after != before {
		t.Fatalf("a refused prepare changed something: %s, was %s", after, before)
	}
}

// A plan's arguments are shown and signed: a launch step carrying secrets
// is refused, sent as raw JSON whatever the launch model holds.
func TestWorkflowRefusesSecretsInArguments(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
	bundle := upload(t, ts, a, siteSaying("secret"))
	body := `{"projectId":"` + a.project + `","steps":[{"id":"site","tool":"launch_service","arguments":{"id":"` + a.project +
		`","name":"www","target":"edge","bundleId":"` + bundle.(string) + `","secrets":{"API_TOKEN":"hunter2"}}}]}`
	r := ts.Client.Do("POST", "/v1/workflows", body, a.header())
	if r.StatusCode != 400 || r.JSON()["blockedBy"] != "input:invalid" || !strings.Contains(r.JSON()["message"].(string), "set_service_env") {
		t.Fatalf("secrets in a plan: %d %s", r.StatusCode, r.Body)
	}
	if strings.Contains(string(r.Body), "hunter2") {
		t.Fatalf("the refusal echoes the secret: %s", r.Body)
	}
	if l := ts.Client.Do("GET", "/v1/tasks", nil, a.header()).JSON()["data"].(map[string]any)["tasks"].([]any); len(l) != 0 {
		t.Fatalf("tasks: %v", l)
	}
}
