package server_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/ratelimit"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

// tenantAccounts are what TestQuoteFastPathRefusesWhatNetHTTPRefuses
// names in each server besides quoteAccounts: a second organisation
// with a budget, a second key of the first organisation (rich's), a key
// revoked between two cases and a key with a spending cap of $10 a month.
type tenantAccounts struct {
	other, doomed, capped account
	sibling               string
}

func newTenantAccounts(t *testing.T, ts *testServer, rich account) tenantAccounts {
	t.Helper()
	a := tenantAccounts{other: newAccount(t, ts, 1_000_000_000, service.DefaultPolicy(), "read", "quote"),
		doomed: newAccount(t, ts, 1_000_000_000, service.DefaultPolicy(), "read", "quote"),
		capped: newAccount(t, ts, 1_000_000_000, service.DefaultPolicy(), "read", "quote")}
	ten := money.MicroUSD(10_000_000)
	if err := ts.Store().Keys().SetCap(context.Background(), a.capped.org, a.capped.keyID, &ten, "month"); err != nil {
		t.Fatal(err)
	}
	secret, hash := auth.NewKey()
	k := store.APIKey{ID: auth.ID("key"), OrgID: rich.org, Name: "sibling", Scopes: []string{"read", "quote"}, CreatedAt: ts.Service().Now()}
	if err := ts.Store().Keys().Create(context.Background(), k, hash); err != nil {
		t.Fatal(err)
	}
	a.sibling = secret
	return a
}

// The listener's fast path, attacked as a second tenant and as a hostile
// client: the same requests to a server with the fast path and to one
// without, compared answer by answer (runQuoteCase), on both engines.
func TestQuoteFastPathRefusesWhatNetHTTPRefuses(t *testing.T) {
	testserver.Engines(t, func(t *testing.T, databaseURL string) {
		slowDB := ""
		if databaseURL != "" {
			slowDB = testpg.NewDatabase(t)
		}
		p := startFastPairOn(t, map[string]ratelimit.Policy{"quotes": {PerSecond: 0.5, Burst: 100}}, databaseURL, slowDB)
		accounts := map[*testServer]quoteAccounts{}
		tenants := map[*testServer]tenantAccounts{}
		for _, ts := range []*testServer{p.slow, p.fast} {
			accounts[ts] = newQuoteAccounts(t, ts)
			tenants[ts] = newTenantAccounts(t, ts, accounts[ts].rich)
		}
		lowerCap := func() {
			for ts, a := range tenants {
				one := money.MicroUSD(1)
				if err := ts.Store().Keys().SetCap(context.Background(), a.capped.org, a.capped.keyID, &one, "month"); err != nil {
					t.Fatal(err)
				}
			}
		}
		revoke := func() {
			for ts, a := range tenants {
				if err := ts.Store().Keys().Revoke(context.Background(), a.doomed.org, a.doomed.keyID, ts.Service().Now()); err != nil {
					t.Fatal(err)
				}
			}
		}
		fill := func(ts *testServer, raw string) string {
			a := tenants[ts]
			return strings.NewReplacer("{other}", a.other.project, "{otherkey}", a.other.key, "{sibling}", a.sibling,
				"{doomed}", a.doomed.project, "{doomedkey}", a.doomed.key, "{capped}", a.capped.project, "{cappedkey}", a.capped.key, "{PROJECT}", strings.ToUpper(accounts[ts].rich.project)).Replace(raw)
		}
		for _, c := range slices.Concat(tenantCases(revoke), capCases(lowerCap), protocolCases()) {
			t.Run(c.name, func(t *testing.T) { runQuoteCaseFilled(t, p, c, accounts, fill) })
		}
	})
}

// tenantCases: another organisation and another key of the same one,
// with the same Idempotency-Key and projects not theirs, and a key
// revoked after it was used.
func tenantCases(revoke func()) []fastCase {
	const svc = `{"projectId":"{project}","items":[{"kind":"service","workload":"dynamic_service","months":1}]}`
	const osvc = `{"projectId":"{other}","items":[{"kind":"service","workload":"dynamic_service","months":1}]}`
	const dsvc = `{"projectId":"{doomed}","items":[{"kind":"service","workload":"static_site","months":1}]}`
	key, other, sib := "Authorization: Bearer {key}\r\n", "Authorization: Bearer {otherkey}\r\n", "Authorization: Bearer {sibling}\r\n"
	doomed := "Authorization: Bearer {doomedkey}\r\n"
	one := []bool{false}
	return []fastCase{
		{name: "a first use", raw: quoteReq(svc, key, "Idempotency-Key: t-1\r\n"), heads: one, fast: 1},
		{name: "its key, another organisation, the same body", raw: quoteReq(svc, other, "Idempotency-Key: t-1\r\n"), heads: one, fast: 1},
		{name: "its key, another organisation, its own project", raw: quoteReq(osvc, other, "Idempotency-Key: t-1\r\n"), heads: one, fast: 1},
		{name: "another organisation's replay", raw: quoteReq(osvc, other, "Idempotency-Key: t-1\r\n"), heads: one, fast: 1},
		{name: "its key, a sibling key, the same body", raw: quoteReq(svc, sib, "Idempotency-Key: t-1\r\n"), heads: one, fast: 1},
		{name: "the first key's replay", raw: quoteReq(svc, key, "Idempotency-Key: t-1\r\n"), heads: one, fast: 1},
		{name: "another organisation's project, upper case", raw: quoteReq(strings.Replace(svc, "{project}", "{PROJECT}", 1), other), heads: one, fast: 1},
		{name: "another organisation's project, padded", raw: quoteReq(strings.Replace(svc, `"{project}"`, `" {project}"`, 1), other), heads: one},
		{name: "another organisation's project, escaped", raw: quoteReq(strings.Replace(svc, `"{project}"`, `"\u0070{project}"`, 1), other), heads: one},
		{name: "another organisation's project, twice", raw: quoteReq(strings.Replace(osvc, `"projectId":"{other}"`, `"projectId":"{other}","projectId":"{project}"`, 1), other), heads: one},
		{name: "another organisation's project over TLS", raw: quoteReq(svc, other), heads: one, tls: true, fast: 1},
		{name: "a key used", raw: quoteReq(dsvc, doomed), heads: one, fast: 1},
		{name: "the key revoked, the next request", raw: quoteReq(dsvc, doomed) + quoteReq(dsvc, doomed), heads: []bool{false, false}, before: revoke},
		{name: "bearer in lower case", raw: quoteReq(osvc, "Authorization: bearer {otherkey}\r\n"), heads: one, fast: 1},
		{name: "two spaces after Bearer", raw: quoteReq(osvc, "Authorization: Bearer  {otherkey}\r\n"), heads: one},
		{name: "Basic", raw: quoteReq(osvc, "Authorization: Basic {otherkey}\r\n"), heads: one},
		{name: "two Authorization headers", raw: quoteReq(osvc, other, key), heads: one},
		{name: "an OAuth token", raw: quoteReq(osvc, "Authorization: Bearer pat_nothing\r\n"), heads: one},
		{name: "pipelined, one Idempotency-Key, two organisations", raw: quoteReq(osvc, other, "Idempotency-Key: t-2\r\n") +
			quoteReq(svc, key, "Idempotency-Key: t-2\r\n") + quoteReq(osvc, other, "Idempotency-Key: t-2\r\n"), heads: []bool{false, false, false}, fast: 3},
	}
}

// capCases: a key's spending cap, reached and then lowered, with and
// without an Idempotency-Key.
func capCases(lower func()) []fastCase {
	const csvc = `{"projectId":"{capped}","items":[{"kind":"service","workload":"dynamic_service","months":1}]}`
	const small = `{"projectId":"{capped}","items":[{"kind":"service","workload":"static_site","months":1}]}`
	capped := "Authorization: Bearer {cappedkey}\r\n"
	one := []bool{false}
	return []fastCase{
		{name: "a capped key's quote", raw: quoteReq(csvc, capped), heads: one, fast: 1},
		{name: "a capped key past its cap", raw: quoteReq(csvc, capped), heads: one, fast: 1},
		{name: "past its cap, kept", raw: quoteReq(csvc, capped, "Idempotency-Key: cap-1\r\n"), heads: one, fast: 1},
		{name: "past its cap, replayed", raw: quoteReq(csvc, capped, "Idempotency-Key: cap-1\r\n"), heads: one, fast: 1},
		{name: "within what is left", raw: quoteReq(small, capped), heads: one, fast: 1},
		{name: "the cap lowered, the next quote", raw: quoteReq(small, capped), heads: one, fast: 1, before: lower},
	}
}

// protocolCases: HTTP/1.1 as a hostile client sends it.
func protocolCases() []fastCase {
	const osvc = `{"projectId":"{other}","items":[{"kind":"service","workload":"dynamic_service","months":1}]}`
	other := "Authorization: Bearer {otherkey}\r\n"
	ct := "Content-Type: application/json\r\n"
	one, two := []bool{false}, []bool{false, false}
	q := quoteReq(osvc, other)
	// Twenty items: an answer past net/http's 2 KiB, which it chunks.
	large := `{"projectId":"{other}","items":[` + strings.Repeat(`{"kind":"service","workload":"static_site","months":1},`, 19) +
		`{"kind":"service","workload":"static_site","months":1}]}`
	return []fastCase{
		{name: "pipelined: fast, net/http, fast", raw: q + quoteReq(osvc, other, "Accept: text/html\r\n") + q, heads: []bool{false, false, false}, fast: 1},
		{name: "head in two writes", raw: q, split: 20, heads: one, fast: 1},
		{name: "body cut in two writes", raw: q, split: len(q) - 30, heads: one, fast: 1},
		{name: "Content-Length short by one, then a request", raw: strings.Replace(q, "{clen}", "{clen-1}", 1) + q, heads: two},
		{name: "Content-Length short, then spaces", raw: strings.Replace(q, "{clen}", "{clen-2}", 1) + "  ", heads: one, fast: 1},
		{name: "chunked", raw: apiReq("POST", "/v1/quotes", ct, "Transfer-Encoding: chunked\r\n", other) + "10\r\n" + osvc[:16] + "\r\n" + strings.Repeat("0", 1) + "\r\n\r\n", heads: one},
		{name: "Expect: 100-continue", raw: quoteReq(osvc, other, "Expect: 100-continue\r\n"), heads: two},
		{name: "two Content-Lengths", raw: quoteReq(osvc, other, "Content-Length: {clen}\r\n"), heads: one},
		{name: "two Content-Types", raw: quoteReq(osvc, other, ct), heads: one},
		{name: "names in other cases", raw: apiReq("POST", "/v1/quotes", "content-type: application/json\r\nCONTENT-LENGTH: {clen}\r\n", "authorization: Bearer {otherkey}\r\nIDEMPOTENCY-KEY: c-1\r\n") + osvc, heads: one, fast: 1},
		{name: "a long header", raw: quoteReq(osvc, other, "X-Pad: "+strings.Repeat("a", 9000)+"\r\n"), heads: one},
		{name: "a long header and the body past the buffer", raw: quoteReq(osvc, other, "X-Pad: "+strings.Repeat("a", 8000)+"\r\n"), heads: one},
		{name: "Idempotency-Key not ASCII", raw: quoteReq(osvc, other, "Idempotency-Key: k-\xc3\xa9\r\n"), heads: one},
		{name: "Idempotency-Key with a control byte", raw: quoteReq(osvc, other, "Idempotency-Key: k-\x01\r\n"), heads: one},
		{name: "an empty query", raw: strings.Replace(q, "/v1/quotes", "/v1/quotes?", 1), heads: one},
		{name: "a slash after", raw: strings.Replace(q, "/v1/quotes", "/v1/quotes/", 1), heads: one},
		{name: "two slashes", raw: strings.Replace(q, "/v1/quotes", "/v1//quotes", 1), heads: one},
		{name: "HTTP/1.0", raw: strings.Replace(q, "HTTP/1.1", "HTTP/1.0", 1), heads: one},
		{name: "keep-alive, close", raw: quoteReq(osvc, other, "Connection: keep-alive, close\r\n") + q, heads: one, fast: 1},
		{name: "Accept application/*", raw: quoteReq(osvc, other, "Accept: application/*\r\n"), heads: one},
		{name: "a byte order mark", raw: quoteReq("\xef\xbb\xbf"+osvc, other), heads: one},
		{name: "X-Forwarded-For", raw: quoteReq(osvc, other, "X-Forwarded-For: 203.0.113.9\r\n"), heads: one, fast: 1},
		{name: "a large quote, chunked", raw: quoteReq(large, other), heads: one, fast: 1},
		{name: "a large quote kept", raw: quoteReq(large, other, "Idempotency-Key: big-1\r\n"), heads: one, fast: 1},
		{name: "a large quote replayed", raw: quoteReq(large, other, "Idempotency-Key: big-1\r\n"), heads: one, fast: 1},
		{name: "a large quote over TLS", raw: quoteReq(large, other), heads: one, tls: true, fast: 1},
		{name: "Idempotency-Key of 255", raw: quoteReq(osvc, other, "Idempotency-Key: "+strings.Repeat("k", 255)+"\r\n"), heads: one, fast: 1},
		{name: "Idempotency-Key of 256", raw: quoteReq(osvc, other, "Idempotency-Key: "+strings.Repeat("k", 256)+"\r\n"), heads: one},
		{name: "Content-Encoding", raw: quoteReq(osvc, other, "Content-Encoding: gzip\r\n"), heads: one, fast: 1},
	}
}

// A body shorter than its Content-Length: net/http waits for the rest
// until the read timeout, then answers the chain's refusal (the token
// taken) and closes; the fast path must not end the connection without
// an answer.
func TestQuoteFastPathBodyShortOfItsLength(t *testing.T) {
	clock := testserver.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	cfg := server.Config{Now: clock.Now, RateLimits: map[string]ratelimit.Policy{"quotes": {PerSecond: 0.5, Burst: 10}},
		Listen: server.ListenLimits{ReadTimeout: time.Second}}
	p := &fastPair{clock: clock, fast: start(t, cfg)}
	cfg.DisableEdgeFastPath = true
	p.slow = start(t, cfg)
	accounts := map[*testServer]quoteAccounts{p.slow: newQuoteAccounts(t, p.slow), p.fast: newQuoteAccounts(t, p.fast)}
	const svc = `{"projectId":"{project}","items":[{"kind":"service","workload":"dynamic_service","months":1}]}`
	key := "Authorization: Bearer {key}\r\n"
	one := []bool{false}
	for _, c := range []fastCase{
		{name: "ten bytes short", raw: strings.Replace(quoteReq(svc, key), "{clen}", "{clen+10}", 1), heads: one},
		{name: "then a whole one", raw: quoteReq(svc, key), heads: one, fast: 1},
		{name: "ten bytes short over TLS", raw: strings.Replace(quoteReq(svc, key), "{clen}", "{clen+10}", 1), heads: one, tls: true},
	} {
		t.Run(c.name, func(t *testing.T) { runQuoteCase(t, p, c, accounts) })
	}
}
