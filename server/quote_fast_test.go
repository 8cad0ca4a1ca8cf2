package server_test

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/rawhttp"
	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server/internal/ratelimit"
	"github.com/pierhq/pier/server/internal/service"
)

// quoteAccounts are what a create_quote case names in each server: an
// account with a budget, one whose budget a quote exceeds, a key
// without the quote scope and a revoked key.
type quoteAccounts struct {
	rich, poor           account
	unscoped, revokedKey string
}

func newQuoteAccounts(t *testing.T, ts *testServer) quoteAccounts {
	t.Helper()
	a := quoteAccounts{rich: newAccount(t, ts, 1_000_000_000, service.DefaultPolicy(), "read", "quote"),
		poor:     newAccount(t, ts, 1, service.DefaultPolicy(), "read", "quote"),
		unscoped: newAccount(t, ts, 1_000_000_000, service.DefaultPolicy(), "read").key}
	r := newAccount(t, ts, 1_000_000_000, service.DefaultPolicy(), "read", "quote")
	if err := ts.Store().Keys().Revoke(context.Background(), r.org, r.keyID, ts.Service().Now()); err != nil {
		t.Fatal(err)
	}
	a.revokedKey = r.key
	return a
}

// ids are the random parts of the ids a server makes, which differ
// between the two servers.
var ids = regexp.MustCompile(`(?i)([a-z]{3})_[a-z2-7]{20}\b`)

// loopback is an address on loopback, as a refusal may name the
// connection's.
var loopback = regexp.MustCompile(`127\.0\.0\.1:[0-9]+`)

// quoteReq is a create_quote request with body and the extra header
// lines; {project}, {poor}, {key}, {poorkey}, {unscoped} and
// {revoked} are filled in per server.
func quoteReq(body string, extra ...string) string {
	return apiReq("POST", "/v1/quotes", append([]string{"Content-Type: application/json\r\nContent-Length: {clen}\r\n"}, extra...)...) + body
}

// requestStart finds where each request of a case's raw text starts.
var requestStart = regexp.MustCompile(`(POST|GET) /v1/`)

// clen is a request's {clen}, its body's length, or {clen-N} or
// {clen+N}, N less or more.
var clen = regexp.MustCompile(`\{clen([-+][0-9]+)?\}`)

// withLengths fills in each request's {clen} with its body's length.
func withLengths(raw string) string {
	starts := requestStart.FindAllStringIndex(raw, -1)
	var b strings.Builder
	for i, s := range starts {
		end := len(raw)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		req := raw[s[0]:end]
		if head, body, ok := strings.Cut(req, "\r\n\r\n"); ok {
			head = clen.ReplaceAllStringFunc(head, func(m string) string {
				d, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(m, "{clen"), "}"))
				return fmt.Sprint(len(body) + d)
			})
			req = head + "\r\n\r\n" + body
		}
		b.WriteString(req)
	}
	return b.String()
}

// runQuoteCase sends c to both servers, without and then with the fast
// path, and compares what a client sees, the ids made apart.
func runQuoteCase(t *testing.T, p *fastPair, c fastCase, accounts map[*testServer]quoteAccounts) {
	t.Helper()
	runQuoteCaseFilled(t, p, c, accounts, nil)
}

// runQuoteCaseFilled is runQuoteCase with more to fill in per server:
// more, when set, fills in its own names first.
func runQuoteCaseFilled(t *testing.T, p *fastPair, c fastCase, accounts map[*testServer]quoteAccounts, more func(ts *testServer, raw string) string) {
	t.Helper()
	if c.before != nil {
		c.before()
	}
	fill := func(ts *testServer) string {
		a, raw := accounts[ts], c.raw
		if more != nil {
			raw = more(ts, raw)
		}
		r := strings.NewReplacer("{host}", ts.Addr(), "{project}", a.rich.project, "{poor}", a.poor.project,
			"{key}", a.rich.key, "{poorkey}", a.poor.key, "{unscoped}", a.unscoped, "{revoked}", a.revokedKey)
		return withLengths(r.Replace(raw))
	}
	addr := func(ts *testServer) string {
		if c.tls {
			return ts.HTTPSAddr()
		}
		return ts.Addr()
	}
	want, wantClosed := apiExchange(t, addr(p.slow), c.tls, fill(p.slow), c.split, c.heads...)
	before := p.fast.APIFastAnswers()
	got, gotClosed := apiExchange(t, addr(p.fast), c.tls, fill(p.fast), c.split, c.heads...)
	norm := func(ts *testServer, as []rawhttp.Answer) {
		_, port, _ := net.SplitHostPort(ts.Addr())
		for i := range as {
			as[i].Body = ids.ReplaceAllString(strings.ReplaceAll(as[i].Body, "localhost:"+port, "localhost:PORT"), "${1}_ID")
			as[i].Body = loopback.ReplaceAllString(as[i].Body, "127.0.0.1:PORT")
		}
	}
	norm(p.slow, want)
	norm(p.fast, got)
	sameAnswers(t, want, got, wantClosed, gotClosed)
	if n := p.fast.APIFastAnswers() - before; n != c.fast {
		t.Errorf("%d answers on the fast path, want %d", n, c.fast)
	}
}

// The listener's fast path answers create_quote exactly as net/http and
// the handler chain do, and hands to net/http what it cannot answer
// without a doubt: the same requests, sent to a server with the fast
// path and to one without, in the same order on the same clock, on
// SQLite and on PostgreSQL.
func TestQuoteFastPathMatchesNetHTTP(t *testing.T) {
	testserver.Engines(t, func(t *testing.T, databaseURL string) {
		slowDB := ""
		if databaseURL != "" {
			slowDB = testpg.NewDatabase(t)
		}
		p := startFastPairOn(t, map[string]ratelimit.Policy{"quotes": {PerSecond: 0.5, Burst: 40}}, databaseURL, slowDB)
		accounts := map[*testServer]quoteAccounts{p.slow: newQuoteAccounts(t, p.slow), p.fast: newQuoteAccounts(t, p.fast)}
		for _, c := range quoteFastCases(p.clock) {
			t.Run(c.name, func(t *testing.T) { runQuoteCase(t, p, c, accounts) })
		}
	})
}

// quoteFastCases are TestQuoteFastPathMatchesNetHTTP's requests, in
// order: each sees what the ones before it left (the budget, the
// Idempotency-Keys used, the rate limit's bucket).
func quoteFastCases(clock *testserver.Clock) []fastCase {
	const svc = `{"projectId":"{project}","items":[{"kind":"service","workload":"dynamic_service","months":1}]}`
	const svc2 = `{"projectId":"{project}","items":[{"kind":"service","workload":"static_site","months":2}]}`
	const poor = `{"projectId":"{poor}","items":[{"kind":"service","workload":"dynamic_service","months":3}]}`
	key := "Authorization: Bearer {key}\r\n"
	one, two := []bool{false}, []bool{false, false}
	return []fastCase{
		{name: "a quote", raw: quoteReq(svc, key), heads: one, fast: 1},
		{name: "two quotes, kept alive", raw: quoteReq(svc, key) + quoteReq(svc2, key), heads: two, fast: 2},
		{name: "close", raw: quoteReq(svc, key, "Connection: close\r\n"), heads: one, fast: 1},
		{name: "body in a later write", raw: quoteReq(svc, key), split: len(quoteReq(svc, key)) - 10, heads: one, fast: 1},
		{name: "Accept JSON", raw: quoteReq(svc, key, "Accept: application/json\r\n"), heads: one, fast: 1},
		{name: "Idempotency-Key", raw: quoteReq(svc, key, "Idempotency-Key: k-1\r\n"), heads: one, fast: 1},
		{name: "Idempotency-Key replayed", raw: quoteReq(svc, key, "Idempotency-Key: k-1\r\n"), heads: one, fast: 1},
		{name: "Idempotency-Key replayed, body respelt", raw: quoteReq(strings.ReplaceAll(svc, ",", ", "), key, "Idempotency-Key: k-1\r\n"), heads: one, fast: 1},
		{name: "Idempotency-Key reused", raw: quoteReq(svc2, key, "Idempotency-Key: k-1\r\n"), heads: one, fast: 1},
		{name: "Idempotency-Key replayed on net/http", raw: quoteReq(svc, key, "Idempotency-Key: k-1\r\nAccept: text/html, application/json\r\n"), heads: one},
		{name: "Idempotency-Key twice", raw: quoteReq(svc, key, "Idempotency-Key: k-2\r\nIdempotency-Key: k-3\r\n"), heads: one},
		{name: "Idempotency-Key empty", raw: quoteReq(svc, key, "Idempotency-Key: \r\n"), heads: one},
		{name: "Idempotency-Key with a space", raw: quoteReq(svc, key, "Idempotency-Key: a b\r\n"), heads: one},
		{name: "over budget", raw: quoteReq(poor, "Authorization: Bearer {poorkey}\r\n"), heads: one, fast: 1},
		{name: "over budget, kept", raw: quoteReq(poor, "Authorization: Bearer {poorkey}\r\n", "Idempotency-Key: p-1\r\n"), heads: one, fast: 1},
		{name: "over budget, replayed", raw: quoteReq(poor, "Authorization: Bearer {poorkey}\r\n", "Idempotency-Key: p-1\r\n"), heads: one, fast: 1},
		{name: "another organisation's project", raw: quoteReq(poor, key), heads: one, fast: 1},
		{name: "no such project", raw: quoteReq(strings.Replace(svc, "{project}", "prj_nothing", 1), key), heads: one, fast: 1},
		{name: "unknown key", raw: quoteReq(svc, "Authorization: Bearer agk_nope\r\n"), heads: one},
		{name: "revoked key", raw: quoteReq(svc, "Authorization: Bearer {revoked}\r\n"), heads: one},
		{name: "key without the scope", raw: quoteReq(svc, "Authorization: Bearer {unscoped}\r\n"), heads: one},
		{name: "no key", raw: quoteReq(svc), heads: one},
		{name: "malformed", raw: quoteReq(`{"projectId":"{project}","items":[`, key), heads: one},
		{name: "invalid", raw: quoteReq(`{"projectId":"{project}","items":[]}`, key), heads: one},
		{name: "unknown member", raw: quoteReq(`{"projectId":"{project}","items":[{"kind":"service"}],"x":1}`, key), heads: one},
		{name: "escaped string", raw: quoteReq(`{"projectId":"{project}","items":[{"kind":"serv\u0069ce"}]}`, key), heads: one},
		{name: "text body", raw: apiReq("POST", "/v1/quotes", "Content-Type: text/plain\r\nContent-Length: {clen}\r\n", key) + svc, heads: one},
		{name: "charset", raw: apiReq("POST", "/v1/quotes", "Content-Type: application/json; charset=utf-8\r\nContent-Length: {clen}\r\n", key) + svc, heads: one},
		{name: "query", raw: strings.Replace(quoteReq(svc, key), "/v1/quotes", "/v1/quotes?x=1", 1), heads: one},
		{name: "Accept HTML", raw: quoteReq(svc, key, "Accept: text/html\r\n"), heads: one},
		{name: "GET", raw: apiReq("GET", "/v1/quotes/quo_nothing", key), heads: one},
		{name: "over TLS", raw: quoteReq(svc, key), heads: one, tls: true, fast: 1},
		// The bucket holds 40; what is left of it goes, then the rest is
		// refused, with and without a key, on the fast path.
		{name: "rate-limited", raw: strings.Repeat(quoteReq(svc, key), 20) + quoteReq(svc, key, "Idempotency-Key: r-1\r\n"), heads: make([]bool, 21), fast: 21},
		{name: "rate-limited, malformed", raw: quoteReq(`{"projectId":1}`, key), heads: one},
		// Two seconds refill a token.
		{name: "a moment later", raw: quoteReq(svc, key) + quoteReq(svc, key), heads: two, fast: 2, before: func() { clock.Advance(2 * time.Second) }},
	}
}
