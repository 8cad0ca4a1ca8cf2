package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// Transfer-out is a per-domain action on the human pages; the auth code is
// shown only to a signed-in human of the organisation that bought it.
func TestTransferOutShowsCodeOnlyToTheHuman(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	other := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "read")
	c := ts.Client
	domain := availableDomains(1, "dev", "transfer")[0]
	bundle := c.Do("POST", "/v1/bundles", uploadBody(a.project, siteFiles), a.header()).JSON()["data"].(map[string]any)["bundleId"]
	quote := c.Do("POST", "/v1/quotes", domainQuote(a.project, domain, 1), a.header()).JSON()["data"].(map[string]any)["quoteId"]
	r := c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": bundle, "domain": domain, "quoteId": quote}, a.header())
	waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	p, _ := ts.Store().Domains().PurchaseByDomain(context.Background(), domain)

	// No agent answer carries the code: not the export, not the ledger.
	for _, path := range []string{"/v1/projects/" + a.project, "/v1/ledger?limit=1000"} {
		if body := string(c.Do("GET", path, nil, a.header()).Body); strings.Contains(body, p.AuthCode) {
			t.Fatalf("%s leaks the auth code", path)
		}
	}
	if body := string(c.Do("POST", "/v1/projects/"+a.project+"/export", nil, a.header()).Body); strings.Contains(body, p.AuthCode) {
		t.Fatal("the leave package leaks the auth code")
	}
	// Without a session, or with an agent key, nothing.
	anon := newBrowser(t, ts)
	if pg := anon.post("/domains/"+domain+"/transfer-out", url.Values{}); strings.Contains(pg.body, p.AuthCode) || pg.status == http.StatusOK {
		t.Fatalf("anonymous transfer-out: %d", pg.status)
	}
	if pg := anon.do("POST", "/domains/"+domain+"/transfer-out", url.Values{}, a.header()); strings.Contains(pg.body, p.AuthCode) {
		t.Fatal("an agent key got the code")
	}
	// A human of another organisation gets 404.
	ob := signIn(t, ts, other.org)
	op := ob.get("/domains")
	if pg := ob.post("/domains/"+domain+"/transfer-out", url.Values{"csrf": {csrfOf(t, op)}}); pg.status != http.StatusNotFound || strings.Contains(pg.body, p.AuthCode) {
		t.Fatalf("another org: %d", pg.status)
	}
	// The owner's human sees the domain listed without the code, then the
	// code after the CSRF-checked POST.
	b := signIn(t, ts, a.org)
	list := b.get("/domains")
	if !strings.Contains(list.body, domain) || strings.Contains(list.body, p.AuthCode) {
		t.Fatalf("domains page: %d", list.status)
	}
	if pg := b.post("/domains/"+domain+"/transfer-out", url.Values{}); pg.status == http.StatusOK && strings.Contains(pg.body, p.AuthCode) {
		t.Fatal("transfer-out without the form token")
	}
	pg := b.post("/domains/"+domain+"/transfer-out", url.Values{"csrf": {csrfOf(t, list)}})
	if pg.status != http.StatusOK || !strings.Contains(pg.body, p.AuthCode) || pg.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("owner transfer-out: %d", pg.status)
	}
	entries := c.Do("GET", "/v1/ledger?limit=1000", nil, a.header()).JSON()["data"].(map[string]any)["entries"].([]any)
	if last := entries[len(entries)-1].(map[string]any); last["action"] != "reveal_transfer_code" || last["objectId"] != domain {
		t.Fatalf("ledger: %v", last)
	}
}
