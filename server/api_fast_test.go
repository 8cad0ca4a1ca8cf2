package server_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/rawhttp"
	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/ratelimit"
)

// apiExchange writes raw on a new connection (over TLS when tlsOn), in
// two writes a moment apart when split is set, and reads an answer for
// each of heads (true for a HEAD), then whether the connection ends.
func apiExchange(t *testing.T, addr string, tlsOn bool, raw string, split int, heads ...bool) (out []rawhttp.Answer, closed bool) {
	t.Helper()
	var c net.Conn
	var err error
	if tlsOn {
		c, err = tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, ServerName: "localhost", NextProtos: []string{"http/1.1"}})
	} else {
		c, err = net.Dial("tcp", addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if split > 0 {
		io.WriteString(c, raw[:split])
		time.Sleep(50 * time.Millisecond)
		raw = raw[split:]
	}
	io.WriteString(c, raw)
	return rawhttp.Read(c, heads...)
}

// fastPair is the same Pier twice, on one clock: with the listeners' fast
// path and without it.
type fastPair struct {
	slow, fast *testserver.Server
	clock      *testserver.Clock
}

func startFastPair(t *testing.T, limits map[string]ratelimit.Policy) *fastPair {
	return startFastPairOn(t, limits, "", "")
}

// startFastPairOn is startFastPair on two databases (PostgreSQL, where
// rate limits are shared buckets, when not empty): fastDB for the server
// with the fast path, slowDB for the other.
func startFastPairOn(t *testing.T, limits map[string]ratelimit.Policy, fastDB, slowDB string) *fastPair {
	clock := testserver.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	cfg := server.Config{Now: clock.Now, RateLimits: limits, DatabaseURL: fastDB}
	p := &fastPair{clock: clock, fast: start(t, cfg)}
	cfg.DisableEdgeFastPath, cfg.DatabaseURL = true, slowDB
	p.slow = start(t, cfg)
	return p
}

type fastCase struct {
	name string
	// raw is sent as it is; {host} becomes the server's address, {key}
	// an agent key of its own.
	raw   string
	split int // where raw is cut in two writes, if anywhere
	heads []bool
	tls   bool
	// fast is how many answers the fast path gives.
	fast int64
	// before runs before the case, once for both servers.
	before func()
}

// run sends c to both servers, without and then with the fast path, and
// compares what a client sees.
func (p *fastPair) run(t *testing.T, c fastCase, keys map[*testserver.Server]string) {
	t.Helper()
	if c.before != nil {
		c.before()
	}
	addr := func(ts *testserver.Server) string {
		if c.tls {
			return ts.HTTPSAddr()
		}
		return ts.Addr()
	}
	raw := func(ts *testserver.Server) string {
		r := strings.ReplaceAll(c.raw, "{host}", ts.Addr())
		return strings.ReplaceAll(r, "{key}", keys[ts])
	}
	want, wantClosed := apiExchange(t, addr(p.slow), c.tls, raw(p.slow), c.split, c.heads...)
	before := p.fast.APIFastAnswers()
	got, gotClosed := apiExchange(t, addr(p.fast), c.tls, raw(p.fast), c.split, c.heads...)
	// Links and challenges name the server's own address.
	for _, x := range []struct {
		ts *testserver.Server
		as []rawhttp.Answer
	}{{p.slow, want}, {p.fast, got}} {
		_, port, _ := net.SplitHostPort(x.ts.Addr())
		for i := range x.as {
			x.as[i].Body = strings.ReplaceAll(x.as[i].Body, "localhost:"+port, "localhost:PORT")
			for _, vs := range x.as[i].Header {
				for j := range vs {
					vs[j] = strings.ReplaceAll(vs[j], "localhost:"+port, "localhost:PORT")
				}
			}
		}
	}
	sameAnswers(t, want, got, wantClosed, gotClosed)
	if n := p.fast.APIFastAnswers() - before; n != c.fast {
		t.Errorf("%d answers on the fast path, want %d", n, c.fast)
	}
}

func apiReq(method, target string, extra ...string) string {
	return method + " " + target + " HTTP/1.1\r\nHost: {host}\r\n" + strings.Join(extra, "") + "\r\n"
}

func estimateReq(body string, extra ...string) string {
	return apiReq("POST", "/v1/estimate", append([]string{fmt.Sprintf("Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))}, extra...)...) + body
}

// The fast path answers kept API reads exactly as net/http and the
// handler chain do, and hands everything else to net/http: a table of
// requests, sent to a server with the fast path and to one without, in
// the same order on the same clock.
func TestAPIFastPathMatchesNetHTTP(t *testing.T) {
	p := startFastPair(t, map[string]ratelimit.Policy{"search": {PerSecond: 1, Burst: 1000}})
	keys := map[*testserver.Server]string{p.slow: p.slow.Key(t), p.fast: p.fast.Key(t)}
	const search = "/v1/domains/search?q=acme&tldAllowlist=com,dev,io"
	const est = `{"workload":"database_backed_app","monthlyRequests":2000000}`
	one := []bool{false}
	three := []bool{false, false, false}
	get := apiReq("GET", search)
	cases := []fastCase{
		{name: "search miss", raw: get, heads: one},
		{name: "search hit", raw: get, heads: one, fast: 1},
		{name: "estimate miss", raw: estimateReq(est), heads: one},
		{name: "estimate hit", raw: estimateReq(est), heads: one, fast: 1},
		{name: "estimate hit, body in a later write", raw: estimateReq(est), split: len(estimateReq(est)) - len(est), heads: one, fast: 1},
		{name: "estimate hit, head in two writes", raw: estimateReq(est), split: 20, heads: one, fast: 1},
		{name: "keep-alive", raw: get + estimateReq(est) + get, heads: three, fast: 3},
		{name: "pipelined, then a miss", raw: get + get + apiReq("GET", "/v1/domains/search?q=other") + get, heads: []bool{false, false, false, false}, fast: 2},
		{name: "pipelined, a HEAD among them", raw: get + apiReq("HEAD", search) + get, heads: []bool{false, true, false}, fast: 1},
		{name: "close", raw: apiReq("GET", search, "Connection: close\r\n"), heads: one, fast: 1},
		{name: "keep-alive token", raw: apiReq("GET", search, "Connection: keep-alive\r\n"), heads: one, fast: 1},
		{name: "estimate close", raw: estimateReq(est, "Connection: close\r\n"), heads: one, fast: 1},
		{name: "Accept */*", raw: apiReq("GET", search, "Accept: */*\r\n"), heads: one, fast: 1},
		{name: "Accept JSON", raw: apiReq("GET", search, "Accept: Application/JSON\r\n"), heads: one, fast: 1},
		{name: "Accept JSON with q", raw: apiReq("GET", search, "Accept: application/json;q=0.5\r\n"), heads: one},
		{name: "Accept HTML", raw: apiReq("GET", search, "Accept: text/html\r\n"), heads: one},
		{name: "Accept q=0", raw: apiReq("GET", search, "Accept: application/json;q=0\r\n"), heads: one},
		{name: "two Accepts", raw: apiReq("GET", search, "Accept: text/html\r\nAccept: */*\r\n"), heads: one},
		{name: "Accept-Encoding", raw: apiReq("GET", search, "Accept-Encoding: gzip, br\r\n"), heads: one, fast: 1},
		{name: "other headers", raw: apiReq("GET", search, "User-Agent: agent/1.0 (x)\r\nX-Request-Id: abc\r\nCookie: a=b\r\n"), heads: one, fast: 1},
		{name: "If-None-Match", raw: apiReq("GET", search, "If-None-Match: \"x\"\r\n"), heads: one},
		{name: "HEAD", raw: apiReq("HEAD", search), heads: []bool{true}},
		{name: "HTTP/1.0", raw: "GET " + search + " HTTP/1.0\r\nHost: {host}\r\n\r\n", heads: one},
		{name: "host localhost", raw: strings.Replace(get, "{host}", "localhost", 1), heads: one, fast: 1},
		{name: "bad query", raw: apiReq("GET", "/v1/domains/search?q="), heads: one},
		{name: "bad query again", raw: apiReq("GET", "/v1/domains/search?q="), heads: one},
		{name: "unknown parameter", raw: apiReq("GET", "/v1/domains/search?q=acme&x=1"), heads: one},
		{name: "semicolon", raw: apiReq("GET", "/v1/domains/search?q=acme;x"), heads: one},
		{name: "escaped path", raw: apiReq("GET", "/v1/domains/%73earch?q=acme&tldAllowlist=com,dev,io"), heads: one},
		{name: "unclean path", raw: apiReq("GET", "/v1/domains/./search?q=acme&tldAllowlist=com,dev,io"), heads: one},
		{name: "query reordered", raw: apiReq("GET", "/v1/domains/search?tldAllowlist=com,dev,io&q=acme"), heads: one},
		{name: "query reordered hit", raw: apiReq("GET", "/v1/domains/search?tldAllowlist=com,dev,io&q=acme"), heads: one, fast: 1},
		{name: "GET with a body", raw: apiReq("GET", search, "Content-Length: 2\r\n") + "{}", heads: one},
		{name: "GET with an empty body", raw: apiReq("GET", search, "Content-Length: 0\r\n"), heads: one, fast: 1},
		{name: "wrong key", raw: apiReq("GET", search, "Authorization: Bearer agk_nope\r\n"), heads: one},
		{name: "not a key", raw: apiReq("GET", search, "Authorization: Basic eDp5\r\n"), heads: one},
		{name: "wrong key again", raw: apiReq("GET", search, "Authorization: Bearer agk_nope\r\n"), heads: one},
		// A live key is answered on the fast path, from the key's own
		// rate-limit bucket.
		{name: "a key", raw: apiReq("GET", search, "Authorization: Bearer {key}\r\n"), heads: one, fast: 1},
		{name: "a key again", raw: apiReq("GET", search, "Authorization: Bearer {key}\r\n"), heads: one, fast: 1},
		{name: "a key, scheme in lower case", raw: apiReq("GET", search, "Authorization: bearer {key}\r\n"), heads: one, fast: 1},
		{name: "a key on estimate", raw: estimateReq(est, "Authorization: Bearer {key}\r\n"), heads: one, fast: 1},
		{name: "a key twice", raw: apiReq("GET", search, "Authorization: Bearer {key}\r\nAuthorization: Bearer {key}\r\n"), heads: one},
		{name: "a key without its scheme", raw: apiReq("GET", search, "Authorization: {key}\r\n"), heads: one},
		{name: "an empty Authorization", raw: apiReq("GET", search, "Authorization: \r\n"), heads: one},
		{name: "unauthenticated", raw: apiReq("GET", "/v1/projects"), heads: one},
		{name: "estimate other body", raw: estimateReq(`{"workload":"static_site"}`), heads: one},
		{name: "estimate bad body", raw: estimateReq(`{"workload":1}`), heads: one},
		{name: "estimate bad body again", raw: estimateReq(`{"workload":1}`), heads: one},
		{name: "estimate body as text", raw: apiReq("POST", "/v1/estimate", fmt.Sprintf("Content-Type: text/plain\r\nContent-Length: %d\r\n", len(est))) + est, heads: one},
		{name: "estimate body with charset", raw: apiReq("POST", "/v1/estimate", fmt.Sprintf("Content-Type: application/json; charset=utf-8\r\nContent-Length: %d\r\n", len(est))) + est, heads: one},
		{name: "estimate without type", raw: apiReq("POST", "/v1/estimate", fmt.Sprintf("Content-Length: %d\r\n", len(est))) + est, heads: one},
		{name: "estimate without body", raw: apiReq("POST", "/v1/estimate"), heads: one},
		{name: "estimate chunked", raw: apiReq("POST", "/v1/estimate", "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n") + fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(est), est), heads: one},
		{name: "estimate expect", raw: estimateReq(est, "Expect: 100-continue\r\n"), heads: []bool{false, false}},
		{name: "estimate large body", raw: estimateReq(`{"workload":"static_site","x":"` + strings.Repeat("a", 5000) + `"}`), heads: one},
		{name: "estimate GET", raw: apiReq("GET", "/v1/estimate"), heads: one},
		{name: "search POST", raw: apiReq("POST", search, "Content-Length: 0\r\n"), heads: one},
		// A kept search is good for a second, then made again.
		{name: "a second later", raw: get + get, heads: []bool{false, false}, fast: 2, before: func() { p.clock.Advance(1100 * time.Millisecond) }},
		{name: "a second later, over TLS", raw: get, heads: one, tls: true, fast: 1, before: func() { p.clock.Advance(1100 * time.Millisecond) }},
		{name: "a second later, handed off", raw: apiReq("GET", search, "Accept: text/html\r\n") + get, heads: []bool{false, false}, before: func() { p.clock.Advance(1100 * time.Millisecond) }},
		{name: "a second later, estimate is still kept", raw: estimateReq(est), heads: one, fast: 1, before: func() { p.clock.Advance(1100 * time.Millisecond) }},
		{name: "over TLS", raw: get + estimateReq(est), heads: []bool{false, false}, tls: true, fast: 2},
		{name: "over TLS, handed off", raw: apiReq("GET", search, "Accept: text/plain\r\n") + get, heads: []bool{false, false}, tls: true},
		{name: "site host", raw: strings.Replace(get, "{host}", "nothing--prj.localhost", 1), heads: one},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { p.run(t, c, keys) })
	}
}

// Rate limits hold on the fast path: kept answers take from the caller's
// bucket, and a refusal of a kept read is answered there as net/http
// answers it.
func TestAPIFastPathRateLimit(t *testing.T) {
	p := startFastPair(t, map[string]ratelimit.Policy{"search": {PerSecond: 0.5, Burst: 4}})
	get := apiReq("GET", "/v1/domains/search?q=acme")
	est := estimateReq(`{"workload":"static_site"}`)
	one := []bool{false}
	for _, c := range []fastCase{
		{name: "miss", raw: get, heads: one},
		{name: "hit", raw: get + get, heads: []bool{false, false}, fast: 2},
		{name: "the last token, then limited", raw: get + get, heads: []bool{false, false}, fast: 2},
		// Not kept yet, but refused: no answer is needed.
		{name: "estimate limited too", raw: est, heads: one, fast: 1},
		// The kept search is too old a second later, and not made again
		// for a caller without a token: it is refused on the fast path.
		{name: "stale and limited", raw: get, heads: one, fast: 1, before: func() { p.clock.Advance(1100 * time.Millisecond) }},
		// Two tokens: the search is made again on the fast path, and
		// the third is refused there.
		{name: "refilled", raw: get + get + get, heads: []bool{false, false, false}, fast: 3, before: func() { p.clock.Advance(3 * time.Second) }},
	} {
		t.Run(c.name, func(t *testing.T) { p.run(t, c, nil) })
	}
	r := p.fast.Client.Do("GET", "/v1/domains/search?q=acme", nil, nil)
	if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "2" {
		t.Fatalf("after the bucket ran out: %d, Retry-After %q", r.StatusCode, r.Header.Get("Retry-After"))
	}
}

// With shared buckets (PostgreSQL) too: a stale kept search for a caller
// holding no lease is made again on the fast path once the database
// allows it, and a refusal is answered there, as net/http answers both.
func TestAPIFastPathSharedRateLimit(t *testing.T) {
	p := startFastPairOn(t, map[string]ratelimit.Policy{"search": {PerSecond: 0.5, Burst: 4}}, testpg.NewDatabase(t), testpg.NewDatabase(t))
	get := apiReq("GET", "/v1/domains/search?q=acme")
	one := []bool{false}
	for _, c := range []fastCase{
		{name: "miss", raw: get, heads: one},
		{name: "hit", raw: get, heads: one, fast: 1},
		{name: "stale, no lease in hand", raw: get, heads: one, fast: 1, before: func() { p.clock.Advance(1100 * time.Millisecond) }},
		{name: "the last token, then limited", raw: get + get, heads: []bool{false, false}, fast: 2},
		{name: "stale and limited", raw: get, heads: one, fast: 1, before: func() { p.clock.Advance(1100 * time.Millisecond) }},
	} {
		t.Run(c.name, func(t *testing.T) { p.run(t, c, nil) })
	}
}

// A search answered on the fast path sees a name claimed a moment before,
// on the same connection: the write makes the kept answer stale, and the
// fast path makes it again.
func TestAPIFastPathSeesDomainWrites(t *testing.T) {
	ts := start(t, server.Config{})
	const target = "/v1/domains/search?q=acme&tldAllowlist=dev"
	available := func(body string) bool { return searchSaysAvailable(t, []byte(body), "acme.dev") }
	if r := ts.Client.Do("GET", target, nil, nil); r.StatusCode != 200 || !available(string(r.Body)) {
		t.Fatalf("first search: %d %s", r.StatusCode, r.Body)
	}
	c, err := net.Dial("tcp", ts.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	search := func() string {
		io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: "+ts.Addr()+"\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("search: %d %s", resp.StatusCode, b)
		}
		return string(b)
	}
	before := ts.APIFastAnswers()
	if !available(search()) {
		t.Fatal("acme.dev taken before the claim")
	}
	if err := ts.Store().Domains().Claim(context.Background(), "acme.dev", "org_x", "tsk_x", time.Now()); err != nil {
		t.Fatal(err)
	}
	if available(search()) {
		t.Fatal("the fast path answers a search from before the claim")
	}
	if n := ts.APIFastAnswers() - before; n != 2 {
		t.Fatalf("%d searches answered on the fast path, want 2", n)
	}
}

// searchSaysAvailable reads a search_domains envelope and reports whether
// it shows domain as available; a search without it fails the test.
func searchSaysAvailable(t *testing.T, envelope []byte, domain string) bool {
	t.Helper()
	var env struct {
		Data struct {
			Candidates []struct {
				Domain    string `json:"domain"`
				Available bool   `json:"available"`
			} `json:"candidates"`
		} `json:"data"`
	}
	if err := json.Unmarshal(envelope, &env); err != nil {
		t.Fatal(err)
	}
	for _, c := range env.Data.Candidates {
		if c.Domain == domain {
			return c.Available
		}
	}
	t.Fatalf("%s not in %s", domain, envelope)
	return false
}

// sameAnswers fails t where the fast path's answers on one connection
// (got, and whether it was closed) differ from net/http's (want).
func sameAnswers(t *testing.T, want, got []rawhttp.Answer, wantClosed, gotClosed bool) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%d answers, net/http %d", len(got), len(want))
	}
	for i := range want {
		if w, g := want[i].String(), got[i].String(); w != g {
			t.Errorf("answer %d:\nfast path:\n%s\nnet/http:\n%s", i+1, g, w)
		}
		if want[i].Err != "" {
			t.Errorf("answer %d: %s", i+1, want[i].Err)
		}
	}
	if testing.Verbose() {
		t.Logf("%v", got)
	}
	if gotClosed != wantClosed {
		t.Errorf("connection closed: %v, net/http %v", gotClosed, wantClosed)
	}
}
