package server_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/contracttest"
	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/ratelimit"
)

func TestMain(m *testing.M) {
	code := testpg.Run(m)
	if pierBinDir != "" {
		os.RemoveAll(pierBinDir)
	}
	os.Exit(code)
}

// The harness is internal/testserver's, shared by every package.
var (
	start   = testserver.Start
	engines = testserver.Engines
)

type testServer = testserver.Server

func TestHealthAndContract(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		r := ts.Client.Do("GET", "/healthz", nil, nil)
		if r.StatusCode != 200 || !strings.Contains(string(r.Body), `"status":"ok"`) {
			t.Fatalf("healthz: %d %s", r.StatusCode, r.Body)
		}
		r = ts.Client.Do("GET", "/openapi.json", nil, nil)
		if r.StatusCode != 200 || r.JSON()["openapi"] != "3.0.3" {
			t.Fatalf("openapi.json: %d", r.StatusCode)
		}
		for _, name := range []string{"envelope.json", "error.json", "action.json", "sandbox-reference.json", "conformance-run-v2.json"} {
			r = ts.Client.Do("GET", "/schemas/"+name, nil, nil)
			if r.StatusCode != 200 || r.JSON()["$schema"] == nil {
				t.Fatalf("/schemas/%s: %d", name, r.StatusCode)
			}
		}
	})
}

func TestGracefulShutdownDrains(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := server.New(ctx, server.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	c := &contracttest.Client{T: t, BaseURL: "http://" + s.Addr()}
	if r := c.Do("GET", "/v1/domains/search?q=acme", nil, nil); r.StatusCode != 200 {
		t.Fatalf("status %d", r.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop")
	}
	if _, err := http.Get("http://" + s.Addr() + "/healthz"); err == nil {
		t.Fatal("server still answering after shutdown")
	}
}

func TestRateLimit(t *testing.T) {
	clock := testserver.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	ts := start(t, server.Config{
		Now:        clock.Now,
		RateLimits: map[string]ratelimit.Policy{"search": {PerSecond: 0.5, Burst: 3}},
	})
	for i := 0; i < 3; i++ {
		r := ts.Client.Do("GET", "/v1/domains/search?q=acme", nil, nil)
		if r.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, r.StatusCode, r.Body)
		}
		if r.Header.Get("RateLimit") == "" || r.Header.Get("RateLimit-Policy") != "3;w=6" {
			t.Fatalf("rate limit headers: %q %q", r.Header.Get("RateLimit"), r.Header.Get("RateLimit-Policy"))
		}
	}
	r := ts.Client.Do("GET", "/v1/domains/search?q=acme", nil, nil)
	if r.StatusCode != 429 {
		t.Fatalf("4th request: %d", r.StatusCode)
	}
	env := r.JSON()
	if env["blockedBy"] != "rate:limited" || env["retryable"] != true {
		t.Fatalf("429 envelope: %s", r.Body)
	}
	if r.Header.Get("Retry-After") != "2" {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	act := env["actions"].([]any)[0].(map[string]any)
	if act["kind"] != "tool" || act["tool"] != "search_domains" || act["retryAfterSeconds"] != float64(2) {
		t.Fatalf("429 action: %v", act)
	}
	// Estimate draws from the same class; another caller class is unaffected.
	if r := ts.Client.Do("POST", "/v1/estimate", map[string]any{"workload": "static_site"}, nil); r.StatusCode != 429 {
		t.Fatalf("estimate shares the search bucket: %d", r.StatusCode)
	}
	clock.Advance(2 * time.Second)
	if r := ts.Client.Do("GET", "/v1/domains/search?q=acme", nil, nil); r.StatusCode != 200 {
		t.Fatalf("after refill: %d %s", r.StatusCode, r.Body)
	}
}
