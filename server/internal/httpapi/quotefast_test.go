package httpapi

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/ratelimit"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

// A panic in create_quote is answered on the listener's fast path as
// Handler.ServeHTTP answers it on net/http: the same 500 envelope, which is
// retryable and retries create_quote, with the rate limit's headers the
// chain had set.
func TestQuoteDoorAnswersAPanicAsTheHandler(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := func() time.Time { return time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC) }
	svc := service.New(service.Config{Store: st, Now: now})
	h, err := New(Config{Service: svc, Store: st, Now: now, Log: slog.New(slog.DiscardHandler),
		Limiter: ratelimit.New(map[string]ratelimit.Policy{"quotes": {PerSecond: 1, Burst: 10}}, now)})
	if err != nil {
		t.Fatal(err)
	}
	o, err := st.Accounts().CreateOrganization(ctx, auth.ID("org"), "t", now())
	if err != nil {
		t.Fatal(err)
	}
	secret, hash := auth.NewKey()
	if err := st.Keys().Create(ctx, store.APIKey{ID: auth.ID("key"), OrgID: o.ID, Name: "t", Scopes: []string{"quote"}, CreatedAt: now()}, hash); err != nil {
		t.Fatal(err)
	}
	svc.Quotes = nil // create_quote panics, on either path
	const body = `{"projectId":"prj_a","items":[{"kind":"service","workload":"dynamic_service","months":1}]}`

	r := httptest.NewRequest("POST", "/v1/quotes", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+secret)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)

	head, got, ok := CreateQuoteDoor(h).Answer(nil, &QuoteRequest{KeptRequest: KeptRequest{Method: "POST", Path: []byte("/v1/quotes"),
		ContentType: []byte("application/json"), Authorization: []byte("Bearer " + secret), Body: []byte(body), ClientIP: "192.0.2.1"}})
	if !ok || !strings.HasPrefix(string(head), "HTTP/1.1 500 ") || w.Code != 500 {
		t.Fatalf("fast path %v %q, net/http %d", ok, head, w.Code)
	}
	if string(got) != w.Body.String() {
		t.Errorf("fast path's body %s\nnet/http's %s", got, w.Body)
	}
	if b := w.Body.String(); !strings.Contains(b, `"retryable":true`) || !strings.Contains(b, `"kind":"tool"`) ||
		!strings.Contains(b, `"create_quote"`) || strings.Contains(b, `"kind":"stop"`) {
		t.Errorf("a panic's envelope should be retryable and retry create_quote: %s", b)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSuffix(string(head), "\r\n"), "\r\n")[1:] {
		if name, _, _ := strings.Cut(line, ":"); name != "Content-Length" {
			names = append(names, name)
		}
	}
	want := slices.Sorted(func(yield func(string) bool) {
		for k := range w.Header() {
			if !yield(k) {
				return
			}
		}
	})
	if slices.Sort(names); !slices.Equal(names, want) {
		t.Errorf("fast path's headers %v, net/http's %v", names, want)
	}
}
