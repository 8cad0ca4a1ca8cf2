package edge

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/pierhq/pier/server/internal/nameindex"
	"github.com/pierhq/pier/server/internal/store"
)

// hostLookups counts the store lookups of hosts.
type hostLookups struct {
	Sites
	lookups atomic.Int64
}

func (c *hostLookups) ServiceByHost(ctx context.Context, host string) (store.Service, error) {
	c.lookups.Add(1)
	return c.Sites.ServiceByHost(ctx, host)
}

func hostIndex(st *store.Store) *nameindex.Index {
	return nameindex.New("hosts", st.Services().HostsSince, slog.New(slog.DiscardHandler))
}

// TestUnknownHostsCostNoStoreWork: with the host index loaded, a flood of
// random hosts is answered 404 without one store lookup, while a known
// host is served as before.
func TestUnknownHostsCostNoStoreWork(t *testing.T) {
	engines(t, func(t *testing.T, databaseURL string) {
		const known = "shop--p.localhost"
		st := sites(t, databaseURL, map[string][]byte{"index.html": []byte("<h1>shop</h1>")}, known)
		c := &hostLookups{Sites: FromStore(st)}
		e := New(c, slog.New(slog.DiscardHandler))
		x := hostIndex(st)
		if err := x.Load(context.Background()); err != nil {
			t.Fatal(err)
		}
		e.UseNames(x)
		for i := range 500 {
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, httptest.NewRequest("GET", fmt.Sprintf("http://r%d-%x.localhost/", i, i*7919), nil))
			if rec.Code != 404 {
				t.Fatalf("random host: %d", rec.Code)
			}
		}
		if n := c.lookups.Load(); n != 0 {
			t.Fatalf("500 random hosts cost %d store lookups; want none", n)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest("GET", "http://"+known+"/", nil))
		if rec.Code != 200 || c.lookups.Load() != 1 {
			t.Fatalf("known host: %d after %d lookups", rec.Code, c.lookups.Load())
		}
	})
}

// TestHostLaunchedAfterTheIndexLoaded: a site launched once the index is
// loaded is served at once, through the invalidation every launch makes.
func TestHostLaunchedAfterTheIndexLoaded(t *testing.T) {
	const host = "later--p.localhost"
	st := sites(t, "", map[string][]byte{"index.html": []byte("<h1>later</h1>")}, host)
	ctx := context.Background()
	// An index loaded before the launch: it holds no host.
	x := nameindex.New("hosts", func(context.Context, int64) ([]nameindex.Name, error) { return nil, nil }, slog.New(slog.DiscardHandler))
	if err := x.Load(ctx); err != nil {
		t.Fatal(err)
	}
	e := New(FromStore(st), slog.New(slog.DiscardHandler))
	e.UseNames(x)
	if e.Has(ctx, host) {
		t.Fatal("an index that never heard of the host served it")
	}
	e.Invalidate(host) // what the launch, or another replica's notification, does
	if !e.Has(ctx, host) {
		t.Fatal("after the launch's invalidation, the host is still unknown")
	}
}

// BenchmarkHosts times the edge's answer, in-process (ns/op is its CPU
// per request), for a known site's page against random hosts that no
// site has (404): with the in-memory host index (index), and without it
// (store), as before the index, where each random host costs a store
// lookup. On SQLite; bench/README.md has a run.
func BenchmarkHosts(b *testing.B) {
	const known = "shop--p.localhost"
	for _, c := range []struct {
		name      string
		random    bool
		withIndex bool
	}{{"known", false, true}, {"random-404/index", true, true}, {"random-404/store", true, false}} {
		b.Run(c.name, func(b *testing.B) {
			st := sites(b, "", map[string][]byte{"index.html": []byte("<h1>shop</h1>")}, known)
			e := New(FromStore(st), slog.New(slog.DiscardHandler))
			if c.withIndex {
				x := hostIndex(st)
				if err := x.Load(context.Background()); err != nil {
					b.Fatal(err)
				}
				e.UseNames(x)
			}
			req := httptest.NewRequest("GET", "http://"+known+"/", nil)
			w := httptest.NewRecorder()
			e.ServeHTTP(w, req)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if c.random {
					req.Host = fmt.Sprintf("r%x.localhost", uint64(i)*2654435761)
				}
				w.Body.Reset()
				e.ServeHTTP(w, req)
			}
		})
	}
}
