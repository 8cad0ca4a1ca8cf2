package server_test

import (
	"database/sql"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// Three replicas on one PostgreSQL resolve keys from memory, and a key
// changed through one of them is changed on every one by the very next
// request: a scope granted on one is usable on the others, and a key
// revoked on one is refused by all three, with no retry and no wait.
func TestKeyChangesReachEveryReplicaAtOnce(t *testing.T) {
	db := testpg.NewDatabase(t)
	replicas := []*testServer{
		start(t, server.Config{DatabaseURL: db}),
		start(t, server.Config{DatabaseURL: db}),
		start(t, server.Config{DatabaseURL: db}),
	}
	sqlDB, err := sql.Open("pgx", db)
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	waitForListeners(t, sqlDB, len(replicas))

	a := newAccount(t, replicas[0], 100_000_000, service.DefaultPolicy(), "read")
	for _, ts := range replicas {
		// A connection net/http answered once stays with net/http: each
		// request comes on a new one, for the listener's fast path to
		// answer create_quote.
		ts.Client.HTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	}
	each := func(what string, do func(ts *testServer) int, want func(int) bool) {
		t.Helper()
		for i, ts := range replicas {
			if code := do(ts); !want(code) {
				t.Fatalf("%s: replica %d answered %d", what, i, code)
			}
		}
	}
	list := func(ts *testServer) int { return ts.Client.Do("GET", "/v1/projects", nil, a.header()).StatusCode }
	quote := func(ts *testServer) int {
		return ts.Client.Do("POST", "/v1/quotes", domainQuote(a.project, availableDomains(1, "dev", "replkeys")[0], 1), a.header()).StatusCode
	}
	is := func(want int) func(int) bool { return func(c int) bool { return c == want } }
	each("the key before any change", list, is(200))
	each("a quote without the quote scope", quote, is(403))

	// Behind the replicas' backs (no announcement), a revocation is not
	// seen: the keys come from memory.
	if _, err := sqlDB.Exec(`UPDATE api_keys SET revoked_at = 1 WHERE id = $1`, a.keyID); err != nil {
		t.Fatal(err)
	}
	each("a revocation nobody announced", list, is(200))
	if _, err := sqlDB.Exec(`UPDATE api_keys SET revoked_at = NULL WHERE id = $1`, a.keyID); err != nil {
		t.Fatal(err)
	}

	b := signIn(t, replicas[1], a.org)
	token := csrfOf(t, b.get("/keys"))
	if p := b.post("/keys/"+a.keyID+"/grant", url.Values{"csrf": {token}, "scope": {"quote"}}); p.status != 200 {
		t.Fatalf("grant: %d %s", p.status, p.body)
	}
	fastQuote := func(ts *testServer) int {
		before := ts.APIFastAnswers()
		code := quote(ts)
		if ts.APIFastAnswers() != before+1 {
			return -code // not on the fast path
		}
		return code
	}
	each("a quote after the scope was granted on another replica, on the fast path", fastQuote, func(c int) bool { return c > 0 && c != 403 && c != 401 })

	if p := b.post("/keys/"+a.keyID+"/revoke", url.Values{"csrf": {token}}); p.status != 200 {
		t.Fatalf("revoke: %d", p.status)
	}
	each("the next request after the revocation", list, is(http.StatusUnauthorized))
	each("the next quote after the revocation", quote, is(http.StatusUnauthorized))
}

// waitForListeners waits until n replicas listen for invalidations (each
// serves keys from memory from then on).
func waitForListeners(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var got int
		db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN pier_invalidate'`).Scan(&got)
		if got >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d replicas listen for invalidations, want %d", got, n)
		}
	}
	// The listener marks its store as listening just after LISTEN returns.
	time.Sleep(100 * time.Millisecond)
}

// A key the listener's fast path answers from memory stops working there
// too on the next request after it is revoked.
func TestRevokedKeyIsRefusedOnTheFastPath(t *testing.T) {
	ts := start(t, server.Config{RateLimits: map[string]server.RateLimit{"search": {PerSecond: 1000, Burst: 1000}}})
	a := newAccount(t, ts, 1_000_000, service.DefaultPolicy(), "read")
	// A connection net/http answered once stays with net/http: each
	// request here comes on a new one.
	ts.Client.HTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	const search = "/v1/domains/search?q=acme&tldAllowlist=com,dev,io"
	for range 2 { // the answer kept, the key in memory
		if r := ts.Client.Do("GET", search, nil, a.header()); r.StatusCode != 200 {
			t.Fatalf("search: %d", r.StatusCode)
		}
	}
	before := ts.APIFastAnswers()
	if r := ts.Client.Do("GET", search, nil, a.header()); r.StatusCode != 200 || ts.APIFastAnswers() != before+1 {
		t.Fatalf("a keyed kept read: %d, %d answers on the fast path", r.StatusCode, ts.APIFastAnswers()-before)
	}
	b := signIn(t, ts, a.org)
	if p := b.post("/keys/"+a.keyID+"/revoke", url.Values{"csrf": {csrfOf(t, b.get("/keys"))}}); p.status != 200 {
		t.Fatalf("revoke: %d", p.status)
	}
	if r := ts.Client.Do("GET", search, nil, a.header()); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the next keyed read after the revocation: %d", r.StatusCode)
	}
}
