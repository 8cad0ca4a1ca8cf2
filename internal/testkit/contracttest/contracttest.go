// Package contracttest checks HTTP exchanges against Pier's contract: every
// response a test receives is validated against openapi.yaml (kin-openapi)
// and, for envelopes, against the published JSON Schemas (santhosh-tekuri).
// Tests use its Client in place of http.Client.
package contracttest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pierhq/pier/openapi"
	"github.com/pierhq/pier/openapi/schemaset"
)

var (
	once     sync.Once
	router   routers.Router
	doc      *openapi3.T
	schemas  map[string]*jsonschema.Schema
	setupErr error
)

func setup() {
	// The release's scripts are text; the contract describes them as strings.
	openapi3filter.RegisterBodyDecoder("text/javascript", openapi3filter.PlainBodyDecoder)
	loader := openapi3.NewLoader()
	doc, setupErr = loader.LoadFromData(openapi.YAML)
	if setupErr != nil {
		return
	}
	doc.Servers = nil // match requests to any test host
	router, setupErr = legacy.NewRouter(doc)
	if setupErr != nil {
		return
	}
	schemas, setupErr = schemaset.Compile()
}

// Schema returns a compiled published schema, such as "error.json".
func Schema(t testing.TB, name string) *jsonschema.Schema {
	t.Helper()
	once.Do(setup)
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	s, ok := schemas[name]
	if !ok {
		t.Fatalf("no published schema %s", name)
	}
	return s
}

// Client sends requests and validates each response against the contract.
type Client struct {
	T       testing.TB
	BaseURL string
	HTTP    *http.Client
	Header  http.Header
}

// Response is a received, validated response.
type Response struct {
	*http.Response
	Body []byte
}

// JSON decodes the body into a generic map.
func (r *Response) JSON() map[string]any {
	var m map[string]any
	json.Unmarshal(r.Body, &m)
	return m
}

// Do sends a request with an optional JSON body and validates the answer.
func (c *Client) Do(method, path string, body any, header http.Header) *Response {
	c.T.Helper()
	var rd io.Reader
	var raw []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		raw = b
	case string:
		raw = []byte(b)
	default:
		raw, _ = json.Marshal(b)
	}
	if raw != nil {
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.BaseURL+path, rd)
	if err != nil {
		c.T.Fatal(err)
	}
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range c.Header {
		req.Header[k] = vs
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		c.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := &Response{Response: resp, Body: b}
	if raw != nil {
		req.Body = io.NopCloser(bytes.NewReader(raw))
	}
	Check(c.T, req, r)
	return r
}

// Check validates one exchange: against the contract when the route is in
// it, and against the published envelope schemas for every JSON answer.
func Check(t testing.TB, req *http.Request, resp *Response) {
	t.Helper()
	if problems := Problems(req, resp); len(problems) > 0 {
		t.Fatalf("%s", strings.Join(problems, "\n"))
	}
}

// Problems is Check's findings as text, for callers that are not a test's
// goroutine (a fake server validating its own answers, say).
func Problems(req *http.Request, resp *Response) []string {
	once.Do(setup)
	if setupErr != nil {
		return []string{setupErr.Error()}
	}
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	ct := resp.Header.Get("Content-Type")
	isJSON := strings.HasPrefix(ct, "application/json")
	// RDAP's errors are RFC 9083 error objects with the envelope's members
	// beside them; the route's own schema (RdapError) checks them below.
	rdapError := resp.StatusCode >= 400 && strings.HasPrefix(ct, "application/rdap+json") && strings.HasPrefix(req.URL.Path, "/rdap/")
	if rdapError {
		for _, p := range CheckActions(resp.Body) {
			fail("%s %s: %s", req.Method, req.URL.Path, p)
		}
	}
	if resp.StatusCode >= 400 && !rdapError {
		if !isJSON {
			fail("%s %s: status %d with Content-Type %q; every error must be the JSON error envelope: %s", req.Method, req.URL.Path, resp.StatusCode, ct, resp.Body)
			return problems
		}
		// The one error that is not the envelope: JSON-RPC's parse error
		// on the MCP endpoint, which the route's own schema checks below.
		if !(req.URL.Path == "/mcp" && resp.StatusCode == 400 && bytes.HasPrefix(resp.Body, []byte(`{"jsonrpc":`))) {
			if err := schemaProblem("error.json", resp.Body); err != "" {
				fail("%s %s: %s\n%s", req.Method, req.URL.Path, err, resp.Body)
			}
		}
	}
	if isJSON {
		for _, p := range CheckActions(resp.Body) {
			fail("%s %s: %s", req.Method, req.URL.Path, p)
		}
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		return problems // not a contract route (e.g. a 404 probe); the envelope check above applies
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true, MultiError: true},
		},
		Status:  resp.StatusCode,
		Header:  resp.Header,
		Body:    io.NopCloser(bytes.NewReader(resp.Body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		fail("%s %s: response %d does not match openapi.yaml: %v\n%s", req.Method, req.URL.Path, resp.StatusCode, err, resp.Body)
	}
	if resp.StatusCode < 300 && isJSON && strings.HasPrefix(req.URL.Path, "/v1/") {
		if err := schemaProblem("envelope.json", resp.Body); err != "" {
			fail("%s %s: %s\n%s", req.Method, req.URL.Path, err, resp.Body)
		}
		if p := mutationProblem(req.Method, route.Operation, resp.Body); p != "" {
			fail("%s %s: %s\n%s", req.Method, req.URL.Path, p, resp.Body)
		}
	}
	return problems
}

// notMutations are the operations that change something but are no
// budgeted public mutation in SPEC §2.1's sense, each for its reason. Every
// other operation that is not read-only answers receipt, undo and
// budgetRemainingUsd in its data (SPEC §2.1).
var notMutations = map[string]string{
	"upload_blob":  "content-addressed storage of the organisation, in no project and at no cost; the bundle made of the blobs carries the receipt",
	"upload_blobs": "as upload_blob, for many",
	"poll_signup":  "a poll; the signup it may complete carries its own record in the ledger",
	// The fake-money sandbox speaks the sandbox protocol (SPEC §2.9): its
	// session is no project and spends no budget.
	"create_sandbox_session": "the sandbox protocol's own session, in no project",
}

// mutationProblem says what a successful mutation's answer lacks of the
// members SPEC §2.1 requires in its data.
func mutationProblem(method string, op *openapi3.Operation, body []byte) string {
	if method == http.MethodGet || method == http.MethodHead || op == nil || op.OperationID == "mcp" || notMutations[op.OperationID] != "" || readOnly(op) {
		return ""
	}
	var env struct {
		Data map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.Data == nil {
		return op.OperationID + ": a mutation's answer has no data object"
	}
	var missing []string
	for _, m := range []string{"receipt", "undo", "budgetRemainingUsd"} {
		if v, ok := env.Data[m]; !ok || string(v) == "null" {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("%s: a successful mutation's data must carry %s (SPEC §2.1)", op.OperationID, strings.Join(missing, ", "))
	}
	return ""
}

// readOnly operations are GETs and those the contract hints read-only or
// marks pure.
func readOnly(op *openapi3.Operation) bool {
	if op.Extensions["x-pure"] == true {
		return true
	}
	if h, ok := op.Extensions["x-mcp"].(map[string]any); ok && h["readOnly"] == true {
		return true
	}
	return false
}

func schemaProblem(name string, body []byte) string {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Sprintf("body is not JSON: %v", err)
	}
	s, ok := schemas[name]
	if !ok {
		return "no published schema " + name
	}
	if err := s.Validate(v); err != nil {
		return fmt.Sprintf("body does not match /schemas/%s: %v", name, err)
	}
	return ""
}
