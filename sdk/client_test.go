package sdk_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/pierhq/pier/sdk"
)

// A write that declares Idempotency-Key gets one automatically, and keeps
// it across retries of a 503, a 429 and an in-flight 409.
func TestRetriesKeepIdempotencyKey(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	answers := []func(w http.ResponseWriter){
		func(w http.ResponseWriter) { w.WriteHeader(503) },
		func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "0")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(429)
			w.Write([]byte(`{"blockedBy":"rate:limited","message":"slow down","retryable":true,"actions":[{"kind":"stop","reason":"done"}],"formatVersion":"1"}`))
		},
		func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(409)
			w.Write([]byte(`{"blockedBy":"idempotency:in_flight","message":"running","retryable":true,"actions":[{"kind":"stop","reason":"done"}],"formatVersion":"1"}`))
		},
		func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(501)
			w.Write([]byte(`{"blockedBy":"plan:not_implemented","message":"later","retryable":false,"actions":[{"kind":"stop","reason":"not_implemented"}],"formatVersion":"1"}`))
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := len(keys)
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer agk_test" {
			t.Errorf("Authorization %q", r.Header.Get("Authorization"))
		}
		answers[n](w)
	}))
	defer srv.Close()

	c, err := sdk.NewClient(srv.URL, sdk.WithAPIKey("agk_test"), sdk.WithBackoff(time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateQuote(context.Background(), &sdk.CreateQuoteParams{}, sdk.CreateQuoteJSONRequestBody{ProjectId: "prj_1", Items: []sdk.QuoteItem{{Kind: "domain"}}})
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) || apiErr.BlockedBy != "plan:not_implemented" || apiErr.StatusCode != 501 {
		t.Fatalf("err %v", err)
	}
	if len(keys) != 4 {
		t.Fatalf("%d attempts, want 4", len(keys))
	}
	for _, k := range keys {
		if k == "" || k != keys[0] {
			t.Fatalf("keys %v: want one key kept across retries", keys)
		}
	}
}

// A failure with an unknown outcome is not retried for a write without an
// Idempotency-Key: resending could act twice.
func TestNoRetryOfUnsafeWrite(t *testing.T) {
	var n int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		w.WriteHeader(500)
	}))
	defer srv.Close()
	c, _ := sdk.NewClient(srv.URL, sdk.WithBackoff(time.Millisecond, time.Millisecond))
	_, err := c.CreateSignup(context.Background(), sdk.CreateSignupJSONRequestBody{})
	if err == nil || n != 1 {
		t.Fatalf("attempts %d, err %v", n, err)
	}
}

// A POST that only asks (find_missing_blobs) is resent after a connection
// drops without an answer, as a GET would be: a server that closed an idle
// keep-alive connection must not fail a deploy.
func TestReadOnlyPostRetriedAfterADroppedConnection(t *testing.T) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close() // no answer at all: the outcome is unknown
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"data":{"missing":[],"present":0},"actions":[{"kind":"stop","reason":"done"}],"formatVersion":"1"}`))
	}))
	defer srv.Close()
	c, _ := sdk.NewClient(srv.URL, sdk.WithAPIKey("agk_test"), sdk.WithBackoff(time.Millisecond, time.Millisecond))
	if _, err := c.FindMissingBlobs(context.Background(), sdk.FindMissingBlobsJSONRequestBody{ProjectId: "prj_1", Manifest: []sdk.ManifestFile{}}); err != nil || n != 2 {
		t.Fatalf("attempts %d, err %v", n, err)
	}
}
