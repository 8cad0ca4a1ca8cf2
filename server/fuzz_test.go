package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

// fuzzHandler serves the real handler in-process; rate limits are raised so
// the fuzzer's volume is not refused.
func fuzzHandler(f *testing.F) http.Handler {
	s := testserver.New(f, server.Config{
		DataDir:    f.TempDir(),
		RateLimits: map[string]server.RateLimit{"search": {PerSecond: 1e9, Burst: 1 << 30}},
	}, nil)
	return s.Handler()
}

// checkAnswer requires a decodable answer: 2xx envelopes, or typed errors
// that are never 5xx for bad input.
func checkAnswer(t *testing.T, rec *httptest.ResponseRecorder) {
	if rec.Code >= 500 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var env map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
		t.Fatalf("status %d, body not JSON: %q", rec.Code, rec.Body)
	}
	if rec.Code >= 400 {
		if env["blockedBy"] == nil || env["retryable"] == nil || len(env["actions"].([]any)) == 0 {
			t.Fatalf("untyped error: %s", rec.Body)
		}
		return
	}
	if env["data"] == nil || len(env["actions"].([]any)) == 0 || env["formatVersion"] != "1" {
		t.Fatalf("bad envelope: %s", rec.Body)
	}
}

func FuzzSearchQuery(f *testing.F) {
	for _, seed := range []string{
		"q=acme", "q=acme.dev&tldAllowlist=dev,com", "q=a&includeExotic=true&limit=200",
		"q=acme&maxFirstYearPriceUsd=1e309", "q=%00", "q=acme&tldAllowlist=,,,", "limit=-1", "q=acme&q=other",
		"q=acme&maxRenewalPriceUsd=NaN", "q=" + strings.Repeat("a", 70),
	} {
		f.Add(seed)
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, query string) {
		req := httptest.NewRequest("GET", "http://localhost/v1/domains/search", nil)
		req.URL.RawQuery = query
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		checkAnswer(t, rec)
	})
}

func FuzzEstimateBody(f *testing.F) {
	for _, seed := range []string{
		`{"workload":"static_site"}`, `{"workload":"worker","target":"process"}`, `{"workload":1}`,
		`{"workload":"static_site","monthlyRequests":1e20}`, `[]`, `null`, `{"workload":"static_site"}{}`,
		`{"workload":"static_site","monthlyEgressGb":-0}`, "{\"workload\":\"\xff\"}",
	} {
		f.Add(seed)
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest("POST", "http://localhost/v1/estimate", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		checkAnswer(t, rec)
	})
}

// FuzzJSONBodies posts arbitrary bodies, with a valid key, to the routes
// that decode JSON into money, launches and manifests: quotes, bundle
// uploads (paths and manifests included), launches and budget raises.
// Every answer is a typed envelope, never a 5xx.
func FuzzJSONBodies(f *testing.F) {
	for _, seed := range []struct {
		route uint8
		body  string
	}{
		{0, `{"projectId":"PRJ","items":[{"kind":"domain","domain":"acme.dev","years":1}]}`},
		{0, `{"projectId":"PRJ","items":[{"kind":"service","target":"process","workload":"dynamic_service","name":"x","months":1e9}]}`},
		{1, `{"projectId":"PRJ","files":[{"path":"index.html","contentBase64":"PGgxPmhpPC9oMT4="}]}`},
		{1, `{"projectId":"PRJ","files":[{"path":"../x","contentBase64":"AA=="},{"path":"a\u202e.html","contentBase64":"AA=="}]}`},
		{1, `{"projectId":"PRJ","files":[{"path":"a.html","contentBase64":"!!!"},{"path":"a.html","contentBase64":""}]}`},
		{2, `{"name":"site","target":"edge","bundleId":"bnd_x"}`},
		{2, `{"name":"Site!","target":"nope","domain":"-.dev","years":-1,"quoteId":"q"}`},
		{3, `{"amountUsd":1e308,"reason":""}`},
		{3, `{"amountUsd":-1,"reason":"x"}`},
		{0, `{"projectId":"PRJ","items":[]}{}`},
		{1, "{\"projectId\":\"PRJ\",\"files\":[{\"path\":\"\xff\",\"contentBase64\":\"\"}]}"},
	} {
		f.Add(seed.route, seed.body)
	}
	s := testserver.New(f, server.Config{
		DataDir:    f.TempDir(),
		RateLimits: map[string]server.RateLimit{"quotes": {PerSecond: 1e9, Burst: 1 << 30}},
	}, nil)
	h := s.Handler()
	ctx := context.Background()
	o, err := s.Store().Accounts().CreateOrganization(ctx, auth.ID("org"), "fuzz", time.Now())
	if err != nil {
		f.Fatal(err)
	}
	p, err := s.Service().Projects.Create(ctx, service.NewProject{OrgID: o.ID, Name: "fuzz", LimitMicro: 100_000_000, Policy: service.DefaultPolicy(), CreatedBy: "human:usr_fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	secret, hash := auth.NewKey()
	if err := s.Store().Keys().Create(ctx, store.APIKey{ID: auth.ID("key"), OrgID: o.ID, Name: "fuzz", Scopes: []string{"read", "quote", "launch"}, CreatedAt: time.Now()}, hash); err != nil {
		f.Fatal(err)
	}
	routes := []string{"/v1/quotes", "/v1/bundles", "/v1/projects/" + p.ID + "/launch", "/v1/projects/" + p.ID + "/budget-raises"}
	f.Fuzz(func(t *testing.T, route uint8, body string) {
		body = strings.ReplaceAll(body, "PRJ", p.ID)
		req := httptest.NewRequest("POST", "http://localhost"+routes[int(route)%len(routes)], strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+secret)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		checkAnswer(t, rec)
	})
}
