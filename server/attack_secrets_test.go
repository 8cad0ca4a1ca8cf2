package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// TestAttackSweepSecretsShownOnce: a secret given at launch and one set
// with set_service_env are in no answer afterwards: not in any read-only
// operation's answer over REST or MCP (the leave package and the ledger
// among them), and not in the replay of the writes that carried them. The
// key's own secret is in no answer either.
func TestAttackSweepSecretsShownOnce(t *testing.T) {
	ts := start(t, server.Config{DataDir: t.TempDir(), Supervision: fastSupervision})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
	c := ts.Client
	q := c.Do("POST", "/v1/quotes", map[string]any{"projectId": a.project, "items": []any{
		map[string]any{"kind": "service", "workload": "dynamic_service", "target": "process", "name": "api", "months": 1}}}, a.header())
	launch := map[string]any{"name": "api", "target": "process", "bundleId": upload(t, ts, a, exampleFiles(t, "app")),
		"quoteId": q.JSON()["data"].(map[string]any)["quoteId"], "secrets": map[string]any{"API_TOKEN": "s3cr3t-at-launch"}}
	once := func(path string, body map[string]any, key string) map[string]any {
		h := a.header()
		h.Set("Idempotency-Key", key)
		r := c.Do("POST", path, body, h)
		if r.StatusCode != 202 {
			t.Fatalf("POST %s: %d %s", path, r.StatusCode, r.Body)
		}
		if again := c.Do("POST", path, body, h); again.Header.Get("Idempotency-Replayed") != "true" || strings.Contains(string(again.Body), "s3cr3t") {
			t.Errorf("the replay of POST %s: %s", path, again.Body)
		}
		return r.JSON()["data"].(map[string]any)
	}
	task := waitTask(t, ts, a, once("/v1/projects/"+a.project+"/launch", launch, "launch-1")["taskId"].(string), "succeeded")
	svcID := task["serviceId"].(string)
	set := once("/v1/services/"+svcID+"/env", map[string]any{"secrets": map[string]any{"SECOND_TOKEN": "s3cr3t-set-later"}}, "env-1")
	waitTask(t, ts, a, set["taskId"].(string), "succeeded")

	ids := map[string]string{"/v1/projects/": a.project, "/v1/services/": svcID, "/v1/tasks/": set["taskId"].(string)}
	for _, op := range sdk.Operations {
		if !op.ReadOnly || op.Authority != "agent" {
			continue
		}
		path := op.Path
		for prefix, id := range ids {
			if strings.HasPrefix(path, prefix+"{id}") {
				path = strings.Replace(path, "{id}", id, 1)
			}
		}
		if strings.Contains(path, "{") {
			continue // reads of objects this test has none of (bundles, messages, quotes): no secret is in them
		}
		var body any
		if op.Method == "POST" {
			body = map[string]any{}
		}
		r := c.Do(op.Method, path, body, a.header())
		secretsAbsent(t, "REST "+op.ID, string(r.Body), a.key)
		args := map[string]any{}
		for prefix, id := range ids {
			if strings.HasPrefix(op.Path, prefix+"{id}") {
				args["id"] = id
			}
		}
		raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": op.MCPTool, "arguments": args}})
		h := a.header()
		h.Set("Accept", "application/json, text/event-stream")
		_, mcpBody := rawDo(t, c.BaseURL, "POST", "/mcp", "application/json", string(raw), h)
		secretsAbsent(t, "MCP "+op.ID, mcpBody, a.key)
	}
	for _, path := range []string{"/v1/ledger?limit=1000", "/v1/services/" + svcID + "/logs?tail=1000", "/v1/tasks/" + task["taskId"].(string)} {
		secretsAbsent(t, path, string(c.Do("GET", path, nil, a.header()).Body), a.key)
	}
	env := string(c.Do("GET", "/v1/services/"+svcID+"/env", nil, http.Header{"Authorization": {"Bearer " + a.key}}).Body)
	if !strings.Contains(env, `"API_TOKEN"`) || !strings.Contains(env, `"SECOND_TOKEN"`) {
		t.Fatalf("the env list names neither secret: %s", env)
	}
}

func secretsAbsent(t *testing.T, what, body, key string) {
	t.Helper()
	for _, s := range []string{"s3cr3t", key, strings.TrimPrefix(key, "agk_")} {
		if strings.Contains(body, s) {
			t.Errorf("%s shows a secret (%s): %s", what, s, body)
		}
	}
	if len(body) == 0 {
		t.Errorf("%s: empty answer", what)
	}
}

// TestAttackSweepSandboxSecretsShownOnce: a sandbox session's capability
// and registration secret are in its creation's answer and in no read of
// it, over REST and MCP, nor in an attempt's answer.
func TestAttackSweepSandboxSecretsShownOnce(t *testing.T) {
	ts := start(t, server.Config{})
	c := ts.Client
	data := c.Do("POST", "/v1/sandbox/sessions", nil, nil).JSON()["data"].(map[string]any)
	id := data["session"].(map[string]any)["id"].(string)
	secrets := []string{data["agentCapability"].(string), data["registrationSecret"].(string)}
	h := http.Header{"Authorization": {data["authorizationHeader"].(string)}, "Idempotency-Key": {"attempt-1"}}
	answers := map[string]string{
		"REST get_sandbox_session": string(c.Do("GET", "/v1/sandbox/sessions/"+id, nil, nil).Body),
		"REST attempt":             string(c.Do("POST", "/v1/sandbox/sessions/"+id+"/attempts", map[string]any{"scenario": "allowed"}, h).Body),
	}
	raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "get_sandbox_session", "arguments": map[string]any{"id": id}}})
	_, answers["MCP get_sandbox_session"] = rawDo(t, c.BaseURL, "POST", "/mcp", "application/json", string(raw), http.Header{"Accept": {"application/json, text/event-stream"}})
	for what, body := range answers {
		if !strings.Contains(body, id) && what != "REST attempt" {
			t.Errorf("%s does not read the session: %s", what, body)
		}
		for _, s := range secrets {
			if strings.Contains(body, s) || strings.Contains(body, s[4:]) {
				t.Errorf("%s shows a secret: %s", what, body)
			}
		}
	}
}
