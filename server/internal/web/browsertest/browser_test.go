// Package browsertest drives the human pages in real headless Chromium
// (Debian's /usr/bin/chromium, through playwright-core from tools/) against
// a real server. A missing browser, node or playwright-core skips, unless
// CI=true or PIER_TEST_BROWSER=require, when it fails.
package browsertest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/ledger"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/ratelimit"
	"github.com/pierhq/pier/server/internal/registrar"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

func TestMain(m *testing.M) { os.Exit(testpg.Run(m)) }

type tools struct{ node, chromium, dir string }

func required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("PIER_TEST_BROWSER") == "require"
}

func need(t *testing.T) tools {
	t.Helper()
	miss := func(format string, args ...any) {
		t.Helper()
		if required() {
			t.Fatalf(format+" (required: CI=true or PIER_TEST_BROWSER=require; .ci/run installs it)", args...)
		}
		t.Skipf(format+"; skipping (set PIER_TEST_BROWSER=require to fail instead)", args...)
	}
	var tl tools
	var err error
	if tl.node, err = exec.LookPath("node"); err != nil {
		miss("node is not installed")
	}
	tl.chromium = os.Getenv("PIER_CHROMIUM")
	if tl.chromium == "" {
		tl.chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(tl.chromium); err != nil {
		miss("no Chromium at %s", tl.chromium)
	}
	wd, _ := os.Getwd()
	tl.dir = filepath.Join(wd, "..", "..", "..", "..", "tools")
	if _, err := os.Stat(filepath.Join(tl.dir, "node_modules", "playwright-core", "package.json")); err != nil {
		miss("playwright-core is not installed under tools/ (npm ci --prefix tools)")
	}
	return tl
}

type running struct {
	*server.Server
	base string
}

func start(t *testing.T, databaseURL string) *running {
	t.Helper()
	s := testserver.Start(t, server.Config{DatabaseURL: databaseURL,
		RateLimits: map[string]ratelimit.Policy{"signup": {PerSecond: 100, Burst: 100}}}).Server
	return &running{Server: s, base: s.BaseURL()}
}

// artifacts is where screenshots go: PIER_BROWSER_ARTIFACTS to keep them,
// else a temporary directory.
func artifacts(t *testing.T) string {
	if d := os.Getenv("PIER_BROWSER_ARTIFACTS"); d != "" {
		os.MkdirAll(d, 0o755)
		return d
	}
	return t.TempDir()
}

// script runs one of the node scripts beside this file and returns what it
// printed as its result.
func script(t *testing.T, tl tools, name string, env map[string]string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tl.node, name)
	cmd.Env = append(os.Environ(), "PIER_TOOLS="+tl.dir, "PIER_CHROMIUM="+tl.chromium)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var out map[string]any
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if jerr := json.Unmarshal([]byte(lines[len(lines)-1]), &out); jerr != nil || err != nil || out["ok"] != true {
		t.Fatalf("%s: %v\nresult: %s\nstderr: %s", name, err, stdout.String(), stderr.String())
	}
	return out
}

func httpJSON(t *testing.T, method, url, key string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

var engines = testserver.Engines

func TestSignupInBrowser(t *testing.T) {
	tl := need(t)
	engines(t, func(t *testing.T, db string) {
		s := start(t, db)
		out := script(t, tl, "signup.mjs", map[string]string{"PIER_BASE_URL": s.base, "PIER_ARTIFACTS": artifacts(t)})
		key := out["key"].(string)
		// The key works, and the organisation's chain records every step.
		st, list := httpJSON(t, "GET", s.base+"/v1/projects", key, nil)
		if st != 200 || len(list["data"].(map[string]any)["projects"].([]any)) != 1 {
			t.Fatalf("projects: %d %v", st, list)
		}
		entries, err := s.Store().Ledger().Entries(context.Background(), out["organizationId"].(string), 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if b := ledger.Verify(entries); b != nil {
			t.Fatal(b)
		}
		var seen []string
		for _, e := range entries {
			seen = append(seen, e.Action)
		}
		for _, want := range []string{"start_signup", "approve_signup", "card_declined", "add_payment_method", "complete_signup", "claim_signup"} {
			if !strings.Contains(strings.Join(seen, " "), want) {
				t.Errorf("ledger lacks %s: %v", want, seen)
			}
		}
	})
}

func TestBudgetRaiseInBrowser(t *testing.T) {
	tl := need(t)
	engines(t, func(t *testing.T, db string) {
		s := start(t, db)
		ctx := context.Background()
		svc, st := s.Service(), s.Store()
		o, err := st.Accounts().CreateOrganization(ctx, auth.ID("org"), "Lovelace & Co", svc.Now())
		if err != nil {
			t.Fatal(err)
		}
		p, err := svc.Projects.Create(ctx, service.NewProject{OrgID: o.ID, Name: "engine", LimitMicro: 10_000_000, Policy: service.DefaultPolicy(), CreatedBy: "system"})
		if err != nil {
			t.Fatal(err)
		}
		key, hash := auth.NewKey()
		if err := st.Keys().Create(ctx, store.APIKey{ID: auth.ID("key"), OrgID: o.ID, Name: "agent", Scopes: []string{"read", "quote"}, CreatedAt: svc.Now()}, hash); err != nil {
			t.Fatal(err)
		}
		// The agent asks for two raises.
		raise := func(amount float64, reason string) (taskID, approvalURL string) {
			code, env := httpJSON(t, "POST", s.base+"/v1/projects/"+p.ID+"/budget-raises", key, map[string]any{"amountUsd": amount, "reason": reason})
			if code != 202 {
				t.Fatalf("raise: %d %v", code, env)
			}
			d := env["data"].(map[string]any)
			return d["taskId"].(string), d["approvalUrl"].(string)
		}
		approveTask, approveURL := raise(40, "launch week")
		denyTask, denyURL := raise(500, "a bigger machine")
		link, _, err := svc.Accounts.LocalOperatorSignIn(ctx, o.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		script(t, tl, "approval.mjs", map[string]string{"PIER_BASE_URL": s.base, "PIER_ARTIFACTS": artifacts(t),
			"PIER_APPROVE_URL": approveURL, "PIER_DENY_URL": denyURL, "PIER_SIGNIN_URL": link})

		// The agent sees both outcomes by polling its tasks.
		_, got := httpJSON(t, "GET", s.base+"/v1/tasks/"+approveTask, key, nil)
		d := got["data"].(map[string]any)
		if d["state"] != "succeeded" || d["result"].(map[string]any)["budgetLimitUsd"] != 50.0 {
			t.Fatalf("approved task: %v", d)
		}
		_, got = httpJSON(t, "GET", s.base+"/v1/tasks/"+denyTask, key, nil)
		d = got["data"].(map[string]any)
		if d["state"] != "failed" || d["result"].(map[string]any)["decision"] != "denied" {
			t.Fatalf("denied task: %v", d)
		}
		_, proj := httpJSON(t, "GET", s.base+"/v1/projects/"+p.ID, key, nil)
		if proj["data"].(map[string]any)["budgetLimitUsd"] != 50.0 {
			t.Fatalf("budget after decisions: %v", proj["data"])
		}
	})
}

// TestDomainPurchaseApprovalInBrowser: the approval page for a domain a
// launch wants to buy says so in words, with the price, the renewal, the
// key that asked and the budget either way, and after each decision says
// what happened. Screenshots before and after are kept as artefacts.
func TestDomainPurchaseApprovalInBrowser(t *testing.T) {
	tl := need(t)
	s := start(t, "")
	ctx := context.Background()
	svc, st := s.Service(), s.Store()
	o, err := st.Accounts().CreateOrganization(ctx, auth.ID("org"), "Hopper Ltd", svc.Now())
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc.Projects.Create(ctx, service.NewProject{OrgID: o.ID, Name: "compiler", LimitMicro: 100_000_000, Policy: service.DefaultPolicy(), CreatedBy: "system"})
	if err != nil {
		t.Fatal(err)
	}
	key, hash := auth.NewKey()
	if err := st.Keys().Create(ctx, store.APIKey{ID: auth.ID("key"), OrgID: o.ID, Name: "launcher", Scopes: []string{"read", "quote", "launch"}, CreatedAt: svc.Now()}, hash); err != nil {
		t.Fatal(err)
	}
	code, env := httpJSON(t, "POST", s.base+"/v1/bundles", key, map[string]any{"projectId": p.ID,
		"files": []any{map[string]any{"path": "index.html", "contentBase64": "PGgxPmNvbXBpbGVyPC9oMT4="}}})
	if code != 201 {
		t.Fatalf("upload: %d %v", code, env)
	}
	bundle := env["data"].(map[string]any)["bundleId"]
	launchWith := func(name, domain string) string {
		code, env := httpJSON(t, "POST", s.base+"/v1/quotes", key, map[string]any{"projectId": p.ID,
			"items": []any{map[string]any{"kind": "domain", "domain": domain, "years": 1}}})
		if code != 201 {
			t.Fatalf("quote %s: %d %v", domain, code, env)
		}
		q := env["data"].(map[string]any)["quoteId"]
		code, env = httpJSON(t, "POST", s.base+"/v1/projects/"+p.ID+"/launch", key, map[string]any{"name": name, "target": "edge", "bundleId": bundle, "domain": domain, "quoteId": q})
		if code != 202 {
			t.Fatalf("launch %s: %d %v", domain, code, env)
		}
		taskID := env["data"].(map[string]any)["taskId"].(string)
		for range 200 {
			_, env = httpJSON(t, "GET", s.base+"/v1/tasks/"+taskID, key, nil)
			if d := env["data"].(map[string]any); d["state"] == "input_required" {
				return d["approvalUrl"].(string)
			}
			time.Sleep(25 * time.Millisecond)
		}
		t.Fatalf("launch %s never waited for a human: %v", domain, env)
		return ""
	}
	approveURL := launchWith("kept", "hopperkept0.dev")
	denyURL := launchWith("dropped", "hopperdropped0.dev")
	link, _, err := svc.Accounts.LocalOperatorSignIn(ctx, o.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	script(t, tl, "domain_approval.mjs", map[string]string{"PIER_BASE_URL": s.base, "PIER_ARTIFACTS": artifacts(t),
		"PIER_APPROVE_URL": approveURL, "PIER_DENY_URL": denyURL, "PIER_SIGNIN_URL": link,
		"PIER_DOMAIN": "hopperkept0.dev", "PIER_DENIED_DOMAIN": "hopperdropped0.dev"})
}

// The registrant contact end to end: an agent proposes the human as the
// registrant of a domain it bought, at an address of that domain's inbox.
// No link goes there, since the agent reads it; the person signs in and
// confirms at the task's approval URL in Chromium; then the registrar
// records it and RDAP answers, redacted.
func TestRegistrantConfirmedInBrowser(t *testing.T) {
	tl := need(t)
	s := start(t, "")
	ctx := context.Background()
	svc, st := s.Service(), s.Store()
	o, err := st.Accounts().CreateOrganization(ctx, auth.ID("org"), "Lovelace & Co", svc.Now())
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc.Projects.Create(ctx, service.NewProject{OrgID: o.ID, Name: "engine", LimitMicro: 100_000_000, Policy: service.DefaultPolicy(), CreatedBy: "system"})
	if err != nil {
		t.Fatal(err)
	}
	key, hash := auth.NewKey()
	if err := st.Keys().Create(ctx, store.APIKey{ID: auth.ID("key"), OrgID: o.ID, Name: "agent", Scopes: []string{"read", "quote", "launch", "buy_domain"}, CreatedAt: svc.Now()}, hash); err != nil {
		t.Fatal(err)
	}
	tld, _ := registrar.Lookup("dev")
	domain := ""
	for i := 0; domain == ""; i++ {
		if l := "lovelace" + strconv.Itoa(i); registrar.Check(l, tld).Available {
			domain = l + ".dev"
		}
	}
	must := func(code int, env map[string]any, want int) map[string]any {
		t.Helper()
		if code != want {
			t.Fatalf("%d, want %d: %v", code, want, env)
		}
		return env["data"].(map[string]any)
	}
	wait := func(taskID, state string) {
		t.Helper()
		for range 400 {
			_, env := httpJSON(t, "GET", s.base+"/v1/tasks/"+taskID, key, nil)
			if env["data"].(map[string]any)["state"] == state {
				return
			}
			time.Sleep(25 * time.Millisecond)
		}
		t.Fatalf("task %s never reached %s", taskID, state)
	}
	code, env := httpJSON(t, "POST", s.base+"/v1/bundles", key, map[string]any{"projectId": p.ID,
		"files": []any{map[string]any{"path": "index.html", "contentBase64": "PGgxPmVuZ2luZTwvaDE+"}}})
	bundle := must(code, env, 201)["bundleId"]
	code, env = httpJSON(t, "POST", s.base+"/v1/quotes", key, map[string]any{"projectId": p.ID, "items": []any{map[string]any{"kind": "domain", "domain": domain}}})
	q := must(code, env, 201)["quoteId"]
	code, env = httpJSON(t, "POST", s.base+"/v1/projects/"+p.ID+"/launch", key, map[string]any{"name": "www", "target": "edge", "bundleId": bundle, "domain": domain, "quoteId": q})
	wait(must(code, env, 202)["taskId"].(string), "succeeded")
	code, env = httpJSON(t, "POST", s.base+"/v1/quotes", key, map[string]any{"projectId": p.ID, "items": []any{map[string]any{"kind": "email", "domain": domain}}})
	mq := must(code, env, 201)["quoteId"]
	code, env = httpJSON(t, "POST", s.base+"/v1/domains/"+domain+"/email", key, map[string]any{"quoteId": mq})
	wait(must(code, env, 202)["taskId"].(string), "succeeded")
	code, env = httpJSON(t, "POST", s.base+"/v1/email-addresses", key, map[string]any{"address": "ada@" + domain})
	inbox := must(code, env, 201)["inboxId"].(string)
	code, env = httpJSON(t, "PUT", s.base+"/v1/domains/"+domain+"/registrant-contact", key, map[string]any{"name": "Ada Lovelace", "email": "ada@" + domain,
		"street": "12 St James's Square", "city": "London", "postalCode": "SW1Y 4JH", "country": "GB"})
	proposed := must(code, env, 202)
	task, approval := proposed["taskId"].(string), proposed["approvalUrl"].(string)
	code, env = httpJSON(t, "POST", s.base+"/v1/inboxes/"+inbox+"/wait", key, map[string]any{"subject": "registrant", "timeoutSeconds": 1})
	if code != 404 {
		t.Fatalf("a confirmation went to an inbox the agent reads: %d %v", code, env)
	}
	signin, _, err := svc.Accounts.LocalOperatorSignIn(ctx, o.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	script(t, tl, "registrant.mjs", map[string]string{"PIER_BASE_URL": s.base, "PIER_ARTIFACTS": artifacts(t),
		"PIER_APPROVE_URL": approval, "PIER_SIGNIN_URL": signin, "PIER_DOMAIN": domain, "PIER_RDAP_URL": s.base + "/rdap/domain/" + domain})
	wait(task, "succeeded")
	r, err := st.Mail().CurrentRegistrant(ctx, o.ID, domain)
	if err != nil || !strings.Contains(r.Contact, "Lovelace") {
		t.Fatalf("the registrar's record: %+v %v", r, err)
	}
}

// TestKeyCapInBrowser: a person caps the agent's key with the keys page's
// form in Chromium; the agent's next quote past the cap is refused with
// budget:key_cap, and whoami shows the cap.
func TestKeyCapInBrowser(t *testing.T) {
	tl := need(t)
	s := start(t, "")
	ctx := context.Background()
	svc, st := s.Service(), s.Store()
	o, err := st.Accounts().CreateOrganization(ctx, auth.ID("org"), "Hopper", svc.Now())
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc.Projects.Create(ctx, service.NewProject{OrgID: o.ID, Name: "compiler", LimitMicro: 500_000_000, Policy: service.DefaultPolicy(), CreatedBy: "system"})
	if err != nil {
		t.Fatal(err)
	}
	key, hash := auth.NewKey()
	keyID := auth.ID("key")
	if err := st.Keys().Create(ctx, store.APIKey{ID: keyID, OrgID: o.ID, Name: "agent", Scopes: []string{"read", "quote"}, CreatedAt: svc.Now()}, hash); err != nil {
		t.Fatal(err)
	}
	link, _, err := svc.Accounts.LocalOperatorSignIn(ctx, o.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	script(t, tl, "keycap.mjs", map[string]string{"PIER_BASE_URL": s.base, "PIER_ARTIFACTS": artifacts(t),
		"PIER_SIGNIN_URL": link, "PIER_KEY_ID": keyID, "PIER_CAP_USD": "1"})
	code, env := httpJSON(t, "POST", s.base+"/v1/quotes", key, map[string]any{"projectId": p.ID,
		"items": []any{map[string]any{"kind": "domain", "domain": "hopper-compiler-cap.dev", "years": 1}}})
	if code != 402 || env["blockedBy"] != "budget:key_cap" {
		t.Fatalf("a quote past the cap the person set: %d %v", code, env)
	}
	_, who := httpJSON(t, "GET", s.base+"/v1/whoami", key, nil)
	if c := who["data"].(map[string]any)["key"].(map[string]any)["spendCap"].(map[string]any); c["capUsd"] != 1.0 {
		t.Fatalf("whoami's cap: %v", c)
	}
}
