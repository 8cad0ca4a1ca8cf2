package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pierhq/pier/server"
)

// fuzzHandler serves the real handler in-process; rate limits are raised so
// the fuzzer's volume is not refused.
func fuzzHandler(f *testing.F) http.Handler {
	s, err := server.New(context.Background(), server.Config{
		DataDir:    f.TempDir(),
		RateLimits: map[string]server.RateLimit{"search": {PerSecond: 1e9, Burst: 1 << 30}},
	}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Store().Close() })
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
