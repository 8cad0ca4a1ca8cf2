package server_test

import (
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// TestAQuotePastItsHoldReadsExpired: a held quote whose 15 minutes have
// passed reads expired, with the action that quotes again, before any
// write has marked it so.
func TestAQuotePastItsHoldReadsExpired(t *testing.T) {
	clock := testserver.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	ts := start(t, server.Config{Now: clock.Now})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "read", "quote")
	_, q := quoteDomain(t, ts, a, a.project, availableDomains(1, "dev", "lapse")[0])
	id := q["data"].(map[string]any)["quoteId"].(string)
	clock.Advance(16 * time.Minute)
	got := ts.Client.Do("GET", "/v1/quotes/"+id, nil, a.header()).JSON()
	if s := got["data"].(map[string]any)["state"]; s != "expired" {
		t.Fatalf("a lapsed hold reads %v", s)
	}
	if act := got["actions"].([]any)[0].(map[string]any); act["tool"] != "create_quote" {
		t.Fatalf("the way forward is a new quote: %v", got["actions"])
	}
	list := ts.Client.Do("GET", "/v1/quotes", nil, a.header()).JSON()["data"].(map[string]any)["quotes"].([]any)
	if s := list[0].(map[string]any)["state"]; s != "expired" {
		t.Fatalf("the list reads %v", s)
	}
}

// TestAnAppBundleSuggestsAProcessLaunch: a bundle with a Procfile is an
// app; the launch its upload suggests runs it rather than publishing its
// source as a static site.
func TestAnAppBundleSuggestsAProcessLaunch(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "read", "quote", "launch")
	for _, c := range []struct {
		files  map[string]string
		target string
	}{
		{map[string]string{"Procfile": "web: python3 app.py\n", "app.py": "print(1)\n"}, "process"},
		{siteSaying("static"), "edge"},
	} {
		r := ts.Client.Do("POST", "/v1/bundles", uploadBody(a.project, c.files), a.header())
		act := r.JSON()["actions"].([]any)[0].(map[string]any)
		if act["tool"] != "launch_service" || act["arguments"].(map[string]any)["target"] != c.target {
			t.Fatalf("upload suggests %v, want target %s", act, c.target)
		}
		id := r.JSON()["data"].(map[string]any)["bundleId"].(string)
		got := ts.Client.Do("GET", "/v1/bundles/"+id, nil, a.header()).JSON()["actions"].([]any)[0].(map[string]any)
		if got["arguments"].(map[string]any)["target"] != c.target {
			t.Fatalf("get_bundle suggests %v, want target %s", got, c.target)
		}
	}
}
