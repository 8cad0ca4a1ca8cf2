package mcp

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// seen is one request the fake REST handler received.
type seen struct {
	method, uri, body, remoteAddr string
	header                        http.Header
}

// fakeREST records what a tool call is turned into and answers with a
// fixed status, media type and body.
func fakeREST(status int, media, body string, got *[]seen) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		*got = append(*got, seen{r.Method, r.URL.RequestURI(), string(b), r.RemoteAddr, r.Header.Clone()})
		w.Header().Set("Content-Type", media)
		w.WriteHeader(status)
		io.WriteString(w, body)
	})
}

func toolsCall(t *testing.T, h http.Handler, name string, args string, header http.Header) map[string]any {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `}}`
	req := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
	req.RemoteAddr = "192.0.2.7:5555"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, vs := range header {
		req.Header[k] = vs
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var m struct {
		Result map[string]any `json:"result"`
		Error  any            `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || m.Result == nil {
		t.Fatalf("%s: %d %s", name, w.Code, w.Body)
	}
	return m.Result
}

// A call becomes the REST request the contract describes: path parameters
// filled in, arrays comma-joined in the query, idempotencyKey as the
// Idempotency-Key header, body fields as one JSON object; of the MCP
// request's headers only Authorization travels, and the client's address
// comes along for the rate limits.
func TestCallBecomesTheRESTRequest(t *testing.T) {
	for _, tc := range []struct {
		tool, args            string
		method, uri, body     string
		idempotencyKey, ctype string
	}{
		{"search_domains", `{"q":"acme","tldAllowlist":["org","dev"],"includeExotic":true,"maxFirstYearPriceUsd":12.50,"limit":5}`,
			"GET", "/v1/domains/search?includeExotic=true&limit=5&maxFirstYearPriceUsd=12.50&q=acme&tldAllowlist=org%2Cdev", "", "", ""},
		{"get_task", `{"id":"tsk_1"}`, "GET", "/v1/tasks/tsk_1", "", "", ""},
		{"estimate", `{"workload":"static_site","monthlyRequests":1e3}`, "POST", "/v1/estimate",
			`{"monthlyRequests":1e3,"workload":"static_site"}`, "", "application/json"},
		{"create_quote", `{"projectId":"prj_1","items":[{"kind":"domain","domain":"acme.dev"}],"idempotencyKey":"k-1"}`,
			"POST", "/v1/quotes", `{"items":[{"domain":"acme.dev","kind":"domain"}],"projectId":"prj_1"}`, "k-1", "application/json"},
		{"create_quote", `{"projectId":"prj_1","items":[{"kind":"domain","domain":"acme.dev"}]}`,
			"POST", "/v1/quotes", `{"items":[{"domain":"acme.dev","kind":"domain"}],"projectId":"prj_1"}`, "", "application/json"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			var got []seen
			h, err := New(Config{REST: fakeREST(200, "application/json", `{"data":{},"actions":[{"kind":"stop","reason":"done"}],"formatVersion":"1"}`+"\n", &got)})
			if err != nil {
				t.Fatal(err)
			}
			toolsCall(t, h, tc.tool, tc.args, http.Header{
				"Authorization":   {"Bearer agk_test"},
				"Idempotency-Key": {"from-the-mcp-request"},
				"Cookie":          {"session=1"},
			})
			if len(got) != 1 {
				t.Fatalf("%d REST requests", len(got))
			}
			r := got[0]
			if r.method != tc.method || r.uri != tc.uri || r.body != tc.body {
				t.Errorf("got %s %s %s\nwant %s %s %s", r.method, r.uri, r.body, tc.method, tc.uri, tc.body)
			}
			if r.header.Get("Idempotency-Key") != tc.idempotencyKey || r.header.Get("Content-Type") != tc.ctype {
				t.Errorf("headers %v", r.header)
			}
			if r.header.Get("Authorization") != "Bearer agk_test" || r.header.Get("Cookie") != "" {
				t.Errorf("headers %v", r.header)
			}
			if r.remoteAddr != "192.0.2.7:5555" {
				t.Errorf("remote address %q", r.remoteAddr)
			}
		})
	}
}

// A second identical call of a pure tool skips validation, not the REST
// handler.
func TestPureCallsStillReachREST(t *testing.T) {
	var got []seen
	h, _ := New(Config{REST: fakeREST(200, "application/json", `{"data":{}}`, &got)})
	for range 3 {
		toolsCall(t, h, "search_domains", `{"q":"acme"}`, nil)
	}
	if len(got) != 3 || got[2].uri != "/v1/domains/search?q=acme" {
		t.Fatalf("REST saw %v", got)
	}
	res := toolsCall(t, h, "search_domains", `{"q":"acme","colour":"blue"}`, nil)
	if res["isError"] != true || len(got) != 3 {
		t.Fatalf("invalid arguments reached REST or passed: %v", res)
	}
}

func TestToolResultShapes(t *testing.T) {
	for _, tc := range []struct {
		name           string
		status         int
		media, body    string
		isError        bool
		structuredKeys bool
	}{
		{"success envelope", 200, "application/json", `{"data":{"x":1},"formatVersion":"1"}` + "\n", false, true},
		{"task handle", 202, "application/json; charset=utf-8", `{"data":{"task":{}}}`, false, true},
		{"error envelope", 404, "application/json", `{"blockedBy":"not_found:resource","message":"no <such> task","retryable":false,"actions":[]}`, true, true},
		{"script", 200, "text/javascript", "export const x = \"</script>\";\n", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []seen
			h, _ := New(Config{REST: fakeREST(tc.status, tc.media, tc.body, &got)})
			res := toolsCall(t, h, "get_task", `{"id":"tsk_1"}`, http.Header{"Authorization": {"Bearer agk_test"}})
			if (res["isError"] == true) != tc.isError {
				t.Errorf("isError %v", res["isError"])
			}
			content := res["content"].([]any)
			if len(content) != 1 {
				t.Fatalf("content %v", content)
			}
			c := content[0].(map[string]any)
			if c["type"] != "text" || c["text"] != strings.TrimRight(tc.body, "\n") {
				t.Errorf("text %q", c["text"])
			}
			sc, has := res["structuredContent"]
			if has != tc.structuredKeys {
				t.Fatalf("structuredContent present %v: %v", has, sc)
			}
			if has {
				var want any
				json.Unmarshal([]byte(tc.body), &want)
				b1, _ := json.Marshal(sc)
				b2, _ := json.Marshal(want)
				if string(b1) != string(b2) {
					t.Errorf("structuredContent %s, want %s", b1, b2)
				}
			}
		})
	}
}

// Refusals before dispatch carry the envelope REST gives the same mistake.
func TestArgumentErrors(t *testing.T) {
	var got []seen
	h, _ := New(Config{REST: fakeREST(200, "application/json", `{}`, &got)})
	for _, tc := range []struct {
		tool, args, blockedBy, field string
	}{
		{"search_domains", `{"q":"acme","colour":"blue"}`, "input:unknown_field", "arguments.colour"},
		{"search_domains", `{}`, "input:invalid", "arguments.q"},
		{"search_domains", `{"q":5}`, "input:invalid", "arguments.q"},
		{"search_domains", `{"q":"acme","limit":"ten"}`, "input:invalid", "arguments.limit"},
		{"create_quote", `{"projectId":"prj_1","items":[{"kind":"domain","colour":1}]}`, "input:unknown_field", "arguments.items.0.colour"},
		{"get_task", `null`, "input:invalid", "arguments.id"},
		// REST requires its Idempotency-Key: the argument is named, not
		// the header an MCP client never sets.
		{"create_sandbox_attempt", `{"id":"sbs_1","scenario":"allowed"}`, "input:invalid", "arguments.idempotencyKey"},
	} {
		res := toolsCall(t, h, tc.tool, tc.args, http.Header{"Authorization": {"Bearer agk_test"}})
		env, _ := res["structuredContent"].(map[string]any)
		if res["isError"] != true || env["blockedBy"] != tc.blockedBy || env["code"] != tc.blockedBy || env["formatVersion"] != "1" || env["retryable"] != false {
			t.Errorf("%s %s: %v", tc.tool, tc.args, res)
			continue
		}
		acts, _ := env["actions"].([]any)
		if len(acts) == 0 || acts[0].(map[string]any)["kind"] != "manual" || acts[0].(map[string]any)["step"] != "fix_input" {
			t.Errorf("%s %s: actions %v", tc.tool, tc.args, acts)
		}
		found := false
		for _, d := range env["details"].([]any) {
			if d.(map[string]any)["field"] == tc.field {
				found = true
			}
		}
		if !found {
			t.Errorf("%s %s: no detail for %s: %v", tc.tool, tc.args, tc.field, env["details"])
		}
	}
	if len(got) != 0 {
		t.Fatalf("invalid calls reached REST: %v", got)
	}
}

func TestAcceptsBoth(t *testing.T) {
	for accept, want := range map[string]bool{
		"application/json, text/event-stream":       true,
		"text/event-stream;q=0.5, application/json": true,
		"*/*":                   false,
		"application/*, text/*": false,
		"application/json":      false,
		"text/event-stream":     false,
		"application/json, text/event-stream;q=0":      false,
		"application/json;q=0, text/event-stream, */*": false,
		"":                                     false,
		"application/jsonx, text/event-stream": false,
	} {
		if got := acceptsBoth([]string{accept}); got != want {
			t.Errorf("%q: %v, want %v", accept, got, want)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", `{"a":"b\"c"}`, "tab\there\nnew", "\x00\x1f\x7f", "caf\xc3\xa9", "bad \xff\xfe utf8", "\u2028\u2029", "<script>&amp;</script>", `\\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := appendJSONString(nil, []byte(s))
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q encoded as invalid JSON %s: %v", s, out, err)
		}
		want, _ := json.Marshal(s)
		var w string
		json.Unmarshal(want, &w)
		if got != w {
			t.Fatalf("%q round-trips as %q, encoding/json gives %q", s, got, w)
		}
	})
}

// Whatever a client posts, the endpoint answers without panicking, with a
// status the transport allows, and with JSON when it answers 200.
func FuzzServeHTTP(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"search_domains","arguments":{"q":"acme","tldAllowlist":["a","b"]}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_quote","arguments":{"projectId":"p","items":[{"kind":"domain"}],"idempotencyKey":"k"}}}`,
		`[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":3,"method":"tools/list"}]`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"get_task","arguments":{"id":"a/b?c"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":[1]}`,
		`[1,{"id":1}]`, `null`, `"x"`, `{`, ``,
	} {
		f.Add(s)
	}
	var got []seen
	h, err := New(Config{REST: fakeREST(200, "application/json", `{"data":{}}`, &got)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch w.Code {
		case 200:
			if !json.Valid(w.Body.Bytes()) {
				t.Fatalf("%q answered invalid JSON %s", body, w.Body)
			}
		case 202:
			if w.Body.Len() != 0 {
				t.Fatalf("%q: 202 with a body", body)
			}
		case 400:
		case 401:
			// a governed tool called without credentials
			if !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer ") {
				t.Fatalf("%q: 401 without a challenge", body)
			}
		default:
			t.Fatalf("%q answered %d %s", body, w.Code, w.Body)
		}
		got = got[:0]
	})
}

// A read-only tool's result is kept with the REST answer it encodes, and
// only reused while REST answers the same bytes: a changed answer (a name
// bought meanwhile, another caller's view) is encoded anew, every call.
func TestKeptResultFollowsTheRESTAnswer(t *testing.T) {
	answers := []string{
		`{"data":{"n":1},"formatVersion":"1"}`,
		`{"data":{"n":1},"formatVersion":"1"}`,
		`{"data":{"n":2},"formatVersion":"1"}`,
		`{"error":{"code":"rate:limited"},"formatVersion":"1"}`,
		`{"data":{"n":1},"formatVersion":"1"}`,
	}
	statuses := []int{200, 200, 200, 429, 200}
	calls := 0
	rest := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(statuses[calls])
		io.WriteString(w, answers[calls])
		calls++
	})
	h, err := New(Config{REST: rest})
	if err != nil {
		t.Fatal(err)
	}
	for i := range answers {
		res := toolsCall(t, h, "search_domains", `{"q":"acme"}`, nil)
		text := res["content"].([]any)[0].(map[string]any)["text"]
		if text != answers[i] {
			t.Errorf("call %d: text %v, REST answered %s", i, text, answers[i])
		}
		sc, _ := json.Marshal(res["structuredContent"])
		if string(sc) != answers[i] {
			t.Errorf("call %d: structuredContent %s, REST answered %s", i, sc, answers[i])
		}
		if isErr, _ := res["isError"].(bool); isErr != (statuses[i] >= 400) {
			t.Errorf("call %d: isError %v for status %d", i, isErr, statuses[i])
		}
	}
	if calls != len(answers) {
		t.Fatalf("REST served %d of %d calls", calls, len(answers))
	}
}

// What read-only calls keep is bounded: a stream of distinct arguments
// keeps at most the cache's entries and bytes, and an answer past
// maxKeptAnswer is not kept at all.
func TestKeptShapesAreBounded(t *testing.T) {
	big := `{"data":{"x":"` + strings.Repeat("a", maxKeptAnswer) + `"},"formatVersion":"1"}`
	answer := `{"data":{"candidates":[` + strings.Repeat(`{"domain":"acme.dev","available":true},`, 60) + `{}]},"formatVersion":"1"}`
	var body string
	rest := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	})
	h, err := New(Config{REST: rest})
	if err != nil {
		t.Fatal(err)
	}
	body = big
	toolsCall(t, h, "search_domains", `{"q":"big"}`, nil)
	if k, ok := h.shapes.get("search_domains\x00" + `{"q":"big"}`); !ok || k.result != nil || k.rest != nil {
		t.Fatalf("an answer of %d bytes was kept", len(big))
	}
	body = answer
	const calls = 6000
	for i := range calls {
		toolsCall(t, h, "search_domains", fmt.Sprintf(`{"q":"name%d"}`, i), nil)
	}
	if n, cost := h.shapes.c.Len(), h.shapes.c.Cost(); n > 4096 || cost > 8<<20 {
		t.Fatalf("after %d distinct calls the cache holds %d entries, %d bytes", calls, n, cost)
	}
}
