package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/pierhq/pier/internal/testkit/contracttest"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// TestEveryNounListsAndReads: tasks, services, bundles, domains and quotes
// each list and read for their organisation, and another organisation sees
// none of them (absent from its lists, 404 on reads).
func TestEveryNounListsAndReads(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
		b := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
		c := ts.Client

		bundle := upload(t, ts, a, siteSaying("listed"))
		domain := availableDomains(1, "dev", "listing")[0]
		q := c.Do("POST", "/v1/quotes", map[string]any{"projectId": a.project, "items": []any{map[string]any{"kind": "domain", "domain": domain, "years": 1}}}, a.header())
		quoteID := q.JSON()["data"].(map[string]any)["quoteId"].(string)
		r := c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "listed", "target": "edge", "bundleId": bundle, "domain": domain, "quoteId": quoteID}, a.header())
		task := waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
		serviceID := task["serviceId"].(string)

		list := func(h http.Header, path, key string) []any {
			t.Helper()
			r := c.Do("GET", path, nil, h)
			if r.StatusCode != 200 {
				t.Fatalf("GET %s: %d %s", path, r.StatusCode, r.Body)
			}
			return r.JSON()["data"].(map[string]any)[key].([]any)
		}
		has := func(items []any, field, want string) bool {
			for _, it := range items {
				if it.(map[string]any)[field] == want {
					return true
				}
			}
			return false
		}
		for _, n := range []struct{ path, key, field, want, get string }{
			{"/v1/services", "services", "id", serviceID, "/v1/services/" + serviceID},
			{"/v1/services?projectId=" + a.project + "&state=live", "services", "id", serviceID, ""},
			{"/v1/tasks", "tasks", "taskId", task["taskId"].(string), "/v1/tasks/" + task["taskId"].(string)},
			{"/v1/bundles", "bundles", "bundleId", bundle.(string), "/v1/bundles/" + bundle.(string)},
			{"/v1/domains", "domains", "domain", domain, "/v1/domains/" + domain},
			{"/v1/quotes", "quotes", "quoteId", quoteID, "/v1/quotes/" + quoteID},
		} {
			if !has(list(a.header(), n.path, n.key), n.field, n.want) {
				t.Errorf("%s: %s missing", n.path, n.want)
			}
			if has(list(b.header(), n.path, n.key), n.field, n.want) {
				t.Errorf("%s: another organisation sees %s", n.path, n.want)
			}
			if n.get == "" {
				continue
			}
			if r := c.Do("GET", n.get, nil, a.header()); r.StatusCode != 200 {
				t.Errorf("GET %s: %d %s", n.get, r.StatusCode, r.Body)
			}
			if r := c.Do("GET", n.get, nil, b.header()); r.StatusCode != 404 || r.JSON()["blockedBy"] != "not_found:resource" {
				t.Errorf("another organisation's GET %s: %d %s", n.get, r.StatusCode, r.Body)
			}
		}
		notFoundLeadsToLists(t, c, b.header(), b.project, serviceID, quoteID, bundle.(string))
		// A service reads with its URLs; a domain with the service serving it.
		svc := c.Do("GET", "/v1/services/"+serviceID, nil, a.header()).JSON()["data"].(map[string]any)
		if svc["state"] != "live" || svc["previewUrl"] == "" || svc["domain"] != domain {
			t.Errorf("service: %v", svc)
		}
		d := c.Do("GET", "/v1/domains/"+domain, nil, a.header()).JSON()["data"].(map[string]any)
		if d["serviceId"] != serviceID || d["zone"] != true {
			t.Errorf("domain: %v", d)
		}
		// The project lists its services.
		p := c.Do("GET", "/v1/projects/"+a.project, nil, a.header()).JSON()["data"].(map[string]any)
		if !has(p["services"].([]any), "id", serviceID) {
			t.Errorf("get_project lists no service: %v", p["services"])
		}
		// A torn-down service's domain is still the organisation's.
		r = c.Do("POST", "/v1/services/"+serviceID+"/teardown", nil, a.header())
		waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
		if !has(list(a.header(), "/v1/domains", "domains"), "domain", domain) {
			t.Error("a torn-down service's domain left the organisation's list")
		}
		if !has(list(a.header(), "/v1/services?state=torn_down", "services"), "id", serviceID) {
			t.Error("the torn-down service is not listed as torn_down")
		}
	})
}

// TestEveryListPagesWithIDs: every list item carries id, tasks carry their
// creation time and the name of the service they act on, and each list pages: limit=1 answers a
// nextCursor (nextBefore for an inbox's messages) and the action that
// follows it, the pages together hold every item once, and a cursor the
// server did not make is input:invalid.
func TestEveryListPagesWithIDs(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
		c := ts.Client
		domain := availableDomains(1, "dev", "paging")[0]
		for i, name := range []string{"pageone", "pagetwo"} {
			body := map[string]any{"name": name, "target": "edge", "bundleId": upload(t, ts, a, siteSaying(name))}
			item := map[string]any{"kind": "domain", "domain": domain, "years": 1}
			if i > 0 {
				item = map[string]any{"kind": "service", "target": "edge", "workload": "static_site", "name": name}
			}
			q := c.Do("POST", "/v1/quotes", map[string]any{"projectId": a.project, "items": []any{item}}, a.header())
			if q.StatusCode != 201 {
				t.Fatalf("quote: %d %s", q.StatusCode, q.Body)
			}
			if i == 0 {
				body["domain"], body["quoteId"] = domain, q.JSON()["data"].(map[string]any)["quoteId"]
			}
			r := c.Do("POST", "/v1/projects/"+a.project+"/launch", body, a.header())
			waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
		}
		// A second and third project, so that projects page too.
		for _, name := range []string{"second", "third"} {
			if _, err := ts.Service().Projects.Create(context.Background(), service.NewProject{OrgID: a.org, Name: name, LimitMicro: 1_000_000, Policy: service.DefaultPolicy(), CreatedBy: "human:usr_test"}); err != nil {
				t.Fatal(err)
			}
		}
		inbox := pagingMail(t, ts, a, domain)
		for _, n := range []struct {
			path, key string
			atLeast   int
		}{
			{"/v1/projects", "projects", 3}, {"/v1/services", "services", 2}, {"/v1/tasks", "tasks", 2}, {"/v1/bundles", "bundles", 2},
			{"/v1/quotes", "quotes", 2}, {"/v1/domains", "domains", 1}, {"/v1/email-addresses", "addresses", 2}, {"/v1/inboxes", "inboxes", 2},
			{"/v1/inboxes/" + inbox + "/messages", "messages", 2},
		} {
			if got := pagesWithIDs(t, c, a.header(), n.path, n.key); got < n.atLeast {
				t.Errorf("%s: the pages held %d items, want at least %d", n.path, got, n.atLeast)
			}
		}
	})
}

// pagingMail sets up mail on a domain of the account's, with two
// addresses (so two inboxes) and two messages in the first one's inbox.
func pagingMail(t *testing.T, ts *testServer, a account, domain string) string {
	t.Helper()
	c := ts.Client
	q := c.Do("POST", "/v1/quotes", map[string]any{"projectId": a.project, "items": []any{map[string]any{"kind": "email", "domain": domain}}}, a.header())
	if q.StatusCode != 201 {
		t.Fatalf("mail quote: %d %s", q.StatusCode, q.Body)
	}
	r := c.Do("POST", "/v1/domains/"+domain+"/email", map[string]any{"quoteId": q.JSON()["data"].(map[string]any)["quoteId"]}, a.header())
	if r.StatusCode != 202 {
		t.Fatalf("setup_email: %d %s", r.StatusCode, r.Body)
	}
	waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	inbox := ""
	for _, local := range []string{"first", "second"} {
		r := c.Do("POST", "/v1/email-addresses", map[string]any{"address": local + "@" + domain}, a.header())
		if r.StatusCode != 201 {
			t.Fatalf("create address: %d %s", r.StatusCode, r.Body)
		}
		if inbox == "" {
			inbox = r.JSON()["data"].(map[string]any)["inboxId"].(string)
		}
	}
	for i := range 2 {
		if err := sendSMTP(ts.SMTPAddr(), "sender@example.org", []string{"first@" + domain}, fmt.Sprintf("Subject: page %d\n\nbody\n", i)); err != nil {
			t.Fatal(err)
		}
	}
	return inbox
}

// pagesWithIDs walks a list a page of one at a time and answers how many
// items its pages held, each with an id and none twice. A list pages by
// cursor (nextCursor), an inbox's messages by before (nextBefore); each
// page that names the next carries the action that asks for it.
func pagesWithIDs(t *testing.T, c *contracttest.Client, h http.Header, path, key string) int {
	t.Helper()
	param, nextField := "cursor", "nextCursor"
	if strings.HasSuffix(path, "/messages") {
		param, nextField = "before", "nextBefore"
	}
	seen := map[string]bool{}
	at := ""
	for page := 0; ; page++ {
		p := path + "?limit=1"
		if at != "" {
			p += "&" + param + "=" + at
		}
		r := c.Do("GET", p, nil, h)
		if r.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", p, r.StatusCode, r.Body)
		}
		data := r.JSON()["data"].(map[string]any)
		for _, it := range data[key].([]any) {
			item := it.(map[string]any)
			id, _ := item["id"].(string)
			if id == "" || seen[id] {
				t.Fatalf("%s: an item without an id, or twice: %v", path, item)
			}
			seen[id] = true
			actsOnAService := map[any]bool{"launch": true, "deploy": true, "rollback": true, "teardown": true}[item["kind"]]
			if key == "tasks" && (item["createdAt"] == nil || actsOnAService && item["serviceName"] == nil) {
				t.Errorf("a task without its creation time or service name: %v", item)
			}
		}
		next, _ := data[nextField].(string)
		if next == "" {
			break
		}
		if !strings.Contains(string(r.Body), `"`+param+`":"`+next+`"`) {
			t.Errorf("%s: no action follows the %s: %s", path, param, r.Body)
		}
		if page > 20 {
			t.Fatalf("%s: the pages never end", path)
		}
		at = next
	}
	if param == "cursor" {
		if r := c.Do("GET", path+"?cursor=nope", nil, h); r.StatusCode != 400 || r.JSON()["blockedBy"] != "input:invalid" {
			t.Errorf("%s with a bad cursor: %d %s", path, r.StatusCode, r.Body)
		}
	}
	return len(seen)
}

// namesTool says whether an envelope's actions include a tool action
// calling tool.
func namesTool(env map[string]any, tool string) bool {
	acts, _ := env["actions"].([]any)
	for _, a := range acts {
		if m, ok := a.(map[string]any); ok && m["kind"] == "tool" && m["tool"] == tool {
			return true
		}
	}
	return false
}

// notFoundLeadsToLists: another organisation's reads of a task, service,
// bundle and quote, its teardown and release, and a launch of its bundle
// are not found, and each 404 leads to the noun's list, where the right
// id is.
func notFoundLeadsToLists(t *testing.T, c *contracttest.Client, h http.Header, project, serviceID, quoteID, bundle string) {
	t.Helper()
	for _, x := range []struct{ method, path, tool string }{
		{"GET", "/v1/services/" + serviceID, "list_services"},
		{"GET", "/v1/bundles/" + bundle, "list_bundles"},
		{"GET", "/v1/quotes/" + quoteID, "list_quotes"},
		{"GET", "/v1/tasks/tsk_neverexisted0000000", "list_tasks"},
		{"POST", "/v1/services/" + serviceID + "/teardown", "list_services"},
		{"POST", "/v1/quotes/" + quoteID + "/release", "list_quotes"},
	} {
		if r := c.Do(x.method, x.path, nil, h); r.StatusCode != 404 || !namesTool(r.JSON(), x.tool) {
			t.Errorf("another organisation's %s %s: %d %s", x.method, x.path, r.StatusCode, r.Body)
		}
	}
	launch := map[string]any{"name": "theirs", "target": "edge", "bundleId": bundle}
	if r := c.Do("POST", "/v1/projects/"+project+"/launch", launch, h); r.StatusCode != 404 || !namesTool(r.JSON(), "list_bundles") {
		t.Errorf("a launch of another organisation's bundle: %d %s", r.StatusCode, r.Body)
	}
}
