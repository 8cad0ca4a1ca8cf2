package server_test

import (
	"net/http"
	"testing"

	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// A child project over HTTP: create_project and delete_project answer the
// mutation envelope (the contract client checks receipt, undo and
// budgetRemainingUsd on every success), replay under their
// Idempotency-Key, and another organisation's key finds neither the
// parent nor the child.
func TestChildProjectOverHTTP(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
		b := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
		c := ts.Client
		create := map[string]any{"name": "conformance-test", "parentProjectId": a.project, "budgetUsd": 25}
		withKey := func(h http.Header, key string) http.Header { h.Set("Idempotency-Key", key); return h }

		r := c.Do("POST", "/v1/projects", create, withKey(a.header(), "create-1"))
		if r.StatusCode != 201 {
			t.Fatalf("create_project: %d %s", r.StatusCode, r.Body)
		}
		data := r.JSON()["data"].(map[string]any)
		child := data["project"].(map[string]any)["id"].(string)
		if data["parentRemainingUsd"] != 75.0 || data["budgetRemainingUsd"] != 25.0 {
			t.Fatalf("create answer: %s", r.Body)
		}
		if tool, args := toolOf(data["undo"].(map[string]any)["command"]); tool != "delete_project" || args["id"] != child {
			t.Fatalf("undo: %v", data["undo"])
		}
		again := c.Do("POST", "/v1/projects", create, withKey(a.header(), "create-1"))
		if again.StatusCode != 201 || again.Header.Get("Idempotency-Replayed") != "true" || again.JSON()["data"].(map[string]any)["project"].(map[string]any)["id"] != child {
			t.Fatalf("create replay: %d %s", again.StatusCode, again.Body)
		}

		// Another organisation sees neither.
		if r := c.Do("POST", "/v1/projects", create, b.header()); r.StatusCode != 404 || r.JSON()["blockedBy"] != "not_found:resource" {
			t.Fatalf("create under another organisation's project: %d %s", r.StatusCode, r.Body)
		}
		for _, m := range []string{"GET", "DELETE"} {
			if r := c.Do(m, "/v1/projects/"+child, nil, b.header()); r.StatusCode != 404 || r.JSON()["blockedBy"] != "not_found:resource" {
				t.Fatalf("%s of another organisation's child: %d %s", m, r.StatusCode, r.Body)
			}
		}
		if r := c.Do("DELETE", "/v1/projects/"+a.project, nil, a.header()); r.StatusCode != 409 || r.JSON()["blockedBy"] != "conflict:state" {
			t.Fatalf("delete of the organisation's own project: %d %s", r.StatusCode, r.Body)
		}

		ca := a
		ca.project = child
		launchSite(t, ts, ca, "probe", "in the child")
		r = c.Do("DELETE", "/v1/projects/"+child, nil, a.header())
		if r.StatusCode != 200 {
			t.Fatalf("delete_project: %d %s", r.StatusCode, r.Body)
		}
		data = r.JSON()["data"].(map[string]any)
		if data["state"] == "deleting" {
			for _, id := range data["teardownTaskIds"].([]any) {
				waitTask(t, ts, a, id.(string), "succeeded")
			}
			r = c.Do("DELETE", "/v1/projects/"+child, nil, a.header())
			data = r.JSON()["data"].(map[string]any)
		}
		if r.StatusCode != 200 || data["state"] != "deleted" || data["returnedUsd"] != 25.0 || data["budgetRemainingUsd"] != 100.0 {
			t.Fatalf("delete_project: %d %s", r.StatusCode, r.Body)
		}
		r2 := c.Do("DELETE", "/v1/projects/"+child, nil, a.header())
		if r2.StatusCode != 200 || r2.JSON()["replayed"] != true || r2.JSON()["data"].(map[string]any)["receipt"].(map[string]any)["id"] != data["receipt"].(map[string]any)["id"] {
			t.Fatalf("delete again: %d %s", r2.StatusCode, r2.Body)
		}
		list := c.Do("GET", "/v1/projects", nil, a.header()).JSON()["data"].(map[string]any)["projects"].([]any)
		if len(list) != 1 {
			t.Fatalf("list_projects after deletion: %v", list)
		}
		if r := c.Do("GET", "/v1/projects/"+child, nil, a.header()); r.StatusCode != 404 {
			t.Fatalf("get of a deleted project: %d %s", r.StatusCode, r.Body)
		}
	})
}
