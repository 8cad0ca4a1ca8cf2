package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/contracttest"
	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/ratelimit"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

func TestMain(m *testing.M) { os.Exit(testpg.Run(m)) }

func engines(t *testing.T, f func(t *testing.T, st *store.Store)) {
	open := func(t *testing.T, url string) *store.Store {
		st, err := store.Open(context.Background(), t.TempDir(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	t.Run("sqlite", func(t *testing.T) { f(t, open(t, "")) })
	t.Run("postgres", func(t *testing.T) { f(t, open(t, testpg.NewDatabase(t))) })
}

// countingServer serves the contract with the operation replaced by a
// handler that counts executions, so the test sees exactly how often the
// idempotency layer lets a request through.
func countingServer(t *testing.T, st *store.Store, now func() time.Time) (*httptest.Server, string, *atomic.Int64) {
	t.Helper()
	h, err := New(Config{Service: service.New(service.Config{Store: st, Now: now}), Store: st, Limiter: ratelimit.New(nil, now), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	var count atomic.Int64
	h.inner = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ProjectID string `json:"projectId"`
			Fail      bool
		}
		json.Unmarshal(body, &req)
		n := count.Add(1)
		time.Sleep(30 * time.Millisecond) // hold the claim while others arrive
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{
			"data": map[string]any{
				"quoteId": "quo_" + req.ProjectID, "projectId": req.ProjectID, "decision": "ALLOW", "amountUsd": 12.5,
				"reasons": []any{}, "budgetRemainingUsd": 87.5, "execution": n,
				"receipt": map[string]any{"id": "rcp_1", "action": "create_quote", "costs": []any{}, "totalUsd": 12.5, "createdResources": []any{}, "createdAt": "2026-11-21T00:00:00Z"},
				"undo":    map[string]any{"command": nil, "irreversible": true},
			},
			"actions":       []any{map[string]any{"kind": "stop", "reason": "done"}},
			"formatVersion": "1",
		})
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	o, err := st.Accounts().CreateOrganization(context.Background(), auth.ID("org"), "t", now())
	if err != nil {
		t.Fatal(err)
	}
	secret, hash := auth.NewKey()
	if err := st.Keys().Create(context.Background(), store.APIKey{ID: auth.ID("key"), OrgID: o.ID, Name: "t", Scopes: []string{"quote"}, CreatedAt: now()}, hash); err != nil {
		t.Fatal(err)
	}
	return srv, secret, &count
}

func quoteBody(project string) []byte {
	b, _ := json.Marshal(map[string]any{"projectId": project, "items": []any{map[string]any{"kind": "domain", "domain": "acme.dev", "years": 1}}})
	return b
}

func post(t *testing.T, c *contracttest.Client, key, idem string, body []byte) *contracttest.Response {
	t.Helper()
	return c.Do("POST", "/v1/quotes", body, http.Header{"Authorization": {"Bearer " + key}, "Idempotency-Key": {idem}})
}

func TestIdempotencyConcurrentSameKeyExecutesOnce(t *testing.T) {
	engines(t, func(t *testing.T, st *store.Store) {
		srv, key, count := countingServer(t, st, time.Now)
		c := &contracttest.Client{T: t, BaseURL: srv.URL}
		body := quoteBody("prj_a")

		const n = 50
		var wg sync.WaitGroup
		statuses := make([]int, n)
		bodies := make([][]byte, n)
		start := make(chan struct{})
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				req, _ := http.NewRequest("POST", srv.URL+"/v1/quotes", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Idempotency-Key", "idk-concurrent")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				bodies[i], _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				statuses[i] = resp.StatusCode
				contracttest.Check(t, req, &contracttest.Response{Response: resp, Body: bodies[i]})
			}(i)
		}
		close(start)
		wg.Wait()
		if got := count.Load(); got != 1 {
			t.Fatalf("executed %d times, want exactly 1", got)
		}
		created := 0
		for i, s := range statuses {
			switch s {
			case http.StatusCreated:
				created++
			case http.StatusConflict:
				var env map[string]any
				json.Unmarshal(bodies[i], &env)
				if env["blockedBy"] != "idempotency:in_flight" || env["retryable"] != true {
					t.Fatalf("409 envelope %s", bodies[i])
				}
			default:
				t.Fatalf("status %d: %s", s, bodies[i])
			}
		}
		if created < 1 {
			t.Fatal("no request succeeded")
		}

		// Afterwards the same key and body replay the stored response.
		r := post(t, c, key, "idk-concurrent", body)
		if r.StatusCode != http.StatusCreated || r.Header.Get("Idempotency-Replayed") != "true" || r.JSON()["replayed"] != true {
			t.Fatalf("replay: %d %q %s", r.StatusCode, r.Header.Get("Idempotency-Replayed"), r.Body)
		}
		if count.Load() != 1 {
			t.Fatal("replay executed again")
		}
	})
}

func TestIdempotencyRules(t *testing.T) {
	engines(t, func(t *testing.T, st *store.Store) {
		var mu sync.Mutex
		now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
		srv, key, count := countingServer(t, st, clock)
		c := &contracttest.Client{T: t, BaseURL: srv.URL}

		if r := post(t, c, key, "k1", quoteBody("prj_a")); r.StatusCode != 201 || r.JSON()["replayed"] != nil {
			t.Fatalf("first: %d %s", r.StatusCode, r.Body)
		}
		// Same key, same body in another serialisation: a replay.
		if r := post(t, c, key, "k1", []byte(`{"items":[{"years":1,"domain":"acme.dev","kind":"domain"}],  "projectId":"prj_a"}`)); r.Header.Get("Idempotency-Replayed") != "true" {
			t.Fatalf("reordered body not replayed: %d %s", r.StatusCode, r.Body)
		}
		// Numbers compare by value (RFC 8785): 1.0 and 1e0 are 1.
		for _, spelt := range []string{`1.0`, `1e0`, `1.000`} {
			b := []byte(`{"projectId":"prj_a","items":[{"kind":"domain","domain":"acme.dev","years":` + spelt + `}]}`)
			if r := post(t, c, key, "k1", b); r.Header.Get("Idempotency-Replayed") != "true" {
				t.Fatalf("years %s not replayed: %d %s", spelt, r.StatusCode, r.Body)
			}
		}
		// Same key, another body: 422.
		r := post(t, c, key, "k1", quoteBody("prj_b"))
		if r.StatusCode != 422 || r.JSON()["blockedBy"] != "idempotency:key_reused" || r.JSON()["retryable"] != false {
			t.Fatalf("reused: %d %s", r.StatusCode, r.Body)
		}
		if count.Load() != 1 {
			t.Fatalf("count %d", count.Load())
		}
		// A validation failure is not stored: the key stays usable.
		if r := post(t, c, key, "k2", []byte(`{"projectId":"prj_c"}`)); r.StatusCode != 400 {
			t.Fatalf("invalid: %d", r.StatusCode)
		}
		if r := post(t, c, key, "k2", quoteBody("prj_c")); r.StatusCode != 201 || r.Header.Get("Idempotency-Replayed") != "" {
			t.Fatalf("after invalid: %d %s", r.StatusCode, r.Body)
		}
		if count.Load() != 2 {
			t.Fatalf("count %d", count.Load())
		}
		// Keys are per caller: the same key from another key is independent.
		// After 24 hours a key is forgotten and runs again.
		advance(24*time.Hour + time.Second)
		if r := post(t, c, key, "k1", quoteBody("prj_b")); r.StatusCode != 201 || r.Header.Get("Idempotency-Replayed") != "" {
			t.Fatalf("after expiry: %d %s", r.StatusCode, r.Body)
		}
		if count.Load() != 3 {
			t.Fatalf("count %d", count.Load())
		}
		if n, err := st.Idempotency().Purge(context.Background(), clock().Add(25*time.Hour)); err != nil || n == 0 {
			t.Fatalf("purge: %d %v", n, err)
		}
	})
}

func TestIdempotencyInFlightLeaseTakeover(t *testing.T) {
	engines(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		now := time.Now()
		claim := store.IdempotencyClaim{Principal: "key:x", Key: "k", Operation: "create_quote", RequestHash: "h"}
		if o, _, err := st.Idempotency().Begin(ctx, claim, now, time.Minute, 24*time.Hour); err != nil || o != store.IdempotencyAcquired {
			t.Fatalf("first: %v %v", o, err)
		}
		if o, _, _ := st.Idempotency().Begin(ctx, claim, now.Add(time.Second), time.Minute, 24*time.Hour); o != store.IdempotencyInFlight {
			t.Fatalf("second: %v", o)
		}
		// The holder died: after its lease, the claim can be taken over.
		if o, _, _ := st.Idempotency().Begin(ctx, claim, now.Add(2*time.Minute), time.Minute, 24*time.Hour); o != store.IdempotencyAcquired {
			t.Fatalf("takeover: %v", o)
		}
		if err := st.Idempotency().Complete(ctx, claim, store.StoredResponse{Status: 201, ContentType: "application/json", Body: []byte(`{"a":1}`)}); err != nil {
			t.Fatal(err)
		}
		o, stored, _ := st.Idempotency().Begin(ctx, claim, now.Add(3*time.Minute), time.Minute, 24*time.Hour)
		if o != store.IdempotencyReplay || stored.Status != 201 || string(stored.Body) != `{"a":1}` {
			t.Fatalf("replay: %v %+v", o, stored)
		}
	})
}

func TestMarkReplayed(t *testing.T) {
	for in, want := range map[string]string{
		`{"data":{}}`: `{"replayed":true,"data":{}}`,
		`{}`:          `{"replayed":true}`,
		`[]`:          `[]`,
	} {
		if got := string(markReplayed([]byte(in))); got != want {
			t.Errorf("%s: got %s want %s", in, got, want)
		}
	}
}
