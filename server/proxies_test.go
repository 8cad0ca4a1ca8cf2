package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"

	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
)

// from is an HTTP client whose connections leave from a loopback address
// of their own (127.0.0.2, 127.0.0.3…), as separate machines would.
func from(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// statuses sends n requests and counts the answers by status.
func statuses(t *testing.T, c *http.Client, n int, req func(i int) *http.Request) map[int]int {
	t.Helper()
	got := map[int]int{}
	for i := range n {
		res, err := c.Do(req(i))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		got[res.StatusCode]++
	}
	return got
}

func search(base, forged string) func(int) *http.Request {
	return func(i int) *http.Request {
		req, _ := http.NewRequest("GET", base+"/v1/domains/search?q=proxied", nil)
		if forged != "" {
			req.Header.Set("X-Forwarded-For", fmt.Sprintf(forged, i))
		}
		return req
	}
}

func signup(base, who string) func(int) *http.Request {
	return func(i int) *http.Request {
		body := fmt.Sprintf(`{"email":"%s%d@example.com","organizationName":"%s %d"}`, who, i, who, i)
		req, _ := http.NewRequest("POST", base+"/v1/signup", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		return req
	}
}

// The proxies' burst: searches and signups refill too slowly to matter
// within the test.
const proxiedSearches, proxiedSignups = 3, 1

// Two replicas on one PostgreSQL behind nginx, which they name as their
// trusted proxy: two clients on different addresses each get their own
// rate limit and signup limit, though every request reaches the replicas
// from nginx. A client that forges X-Forwarded-For, through nginx or
// straight to a replica, or sends a PROXY header straight to a replica,
// changes nothing; a PROXY header from the trusted address is honoured.
func TestTrustedProxiesGiveEachClientItsLimit(t *testing.T) {
	db := testpg.NewDatabase(t)
	limits := map[string]server.RateLimit{
		"search": {PerSecond: 0.001, Burst: proxiedSearches},
		"signup": {PerSecond: 0.001, Burst: proxiedSignups},
	}
	var replicas []*testServer
	for range 2 {
		replicas = append(replicas, start(t, server.Config{DatabaseURL: db, RateLimits: limits, TrustedProxies: []string{"127.0.0.1/32"}}))
	}
	lb := "http://" + testserver.Nginx(t, replicas...)
	fastBefore := replicas[0].APIFastAnswers() + replicas[1].APIFastAnswers()
	want := func(what string, got map[int]int, ok, okStatus int) {
		t.Helper()
		if got[okStatus] != ok || len(got) > 2 || got[okStatus]+got[429] != sum(got) {
			t.Fatalf("%s: %v, want %d × %d and the rest 429", what, got, ok, okStatus)
		}
		t.Logf("%s: %v", what, got)
	}
	a, b, c := from("127.0.0.2"), from("127.0.0.3"), from("127.0.0.4")
	want("client A's searches through nginx", statuses(t, a, 6, search(lb, "")), proxiedSearches, 200)
	want("client B's searches through nginx", statuses(t, b, 6, search(lb, "")), proxiedSearches, 200)
	// C names a new client in every request; nginx appends C's address,
	// the rightmost untrusted hop, which the replicas take.
	want("client C's forged searches through nginx", statuses(t, c, 6, search(lb, "198.51.100.%d")), proxiedSearches, 200)
	if n := replicas[0].APIFastAnswers() + replicas[1].APIFastAnswers() - fastBefore; n == 0 {
		t.Fatal("no search was answered on the listeners' fast path")
	} else {
		t.Logf("%d searches answered on the fast path", n)
	}
	want("client A's signups through nginx", statuses(t, a, 3, signup(lb, "a")), proxiedSignups, 201)
	want("client B's signups through nginx", statuses(t, b, 3, signup(lb, "b")), proxiedSignups, 201)

	// Straight to a replica from an address it does not trust, forged
	// headers change nothing.
	d := from("127.0.0.5")
	want("client D's forged searches straight to a replica", statuses(t, d, 6, search(replicas[0].URL, "127.0.0.1, 198.51.100.%d")), proxiedSearches, 200)
	if got := statuses(t, d, 2, search(replicas[1].URL, "203.0.113.%d")); got[429] != 2 {
		t.Fatalf("client D's forged searches on the other replica: %v, want 429s", got)
	}
	if code := proxied(t, "127.0.0.5", replicas[0].Addr(), "203.0.113.50"); code != 400 {
		t.Fatalf("a PROXY header from an untrusted peer: %d, want 400", code)
	}
	// From the trusted address a PROXY header names the client: a new
	// one gets its burst, and A, already refused, is still refused.
	if code := proxied(t, "127.0.0.1", replicas[0].Addr(), "203.0.113.60"); code != 200 {
		t.Fatalf("a PROXY header from the trusted proxy for a new client: %d, want 200", code)
	}
	if code := proxied(t, "127.0.0.1", replicas[1].Addr(), "127.0.0.2"); code != 429 {
		t.Fatalf("a PROXY header from the trusted proxy for client A: %d, want 429", code)
	}
}

func sum(m map[int]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// proxied sends one search from local to addr over a connection that
// opens with a PROXY protocol v2 header naming client, and answers the
// status, or 400 when the server cut the connection.
func proxied(t *testing.T, local, addr, client string) int {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	var out bytes.Buffer
	proxyproto.HeaderProxyFromAddrs(2, &net.TCPAddr{IP: net.ParseIP(client), Port: 40000}, conn.RemoteAddr()).WriteTo(&out)
	fmt.Fprintf(&out, "GET /v1/domains/search?q=proxied HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", addr)
	if _, err := conn.Write(out.Bytes()); err != nil {
		t.Fatal(err)
	}
	reply, _ := io.ReadAll(conn)
	var code int
	if _, err := fmt.Sscanf(string(reply), "HTTP/1.1 %d", &code); err != nil {
		return 400
	}
	return code
}
