package edge

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/server/internal/store"
)

func TestMain(m *testing.M) { os.Exit(testpg.Run(m)) }

func engines(t *testing.T, f func(t *testing.T, databaseURL string)) {
	t.Run("sqlite", func(t *testing.T) { f(t, "") })
	t.Run("postgres", func(t *testing.T) { f(t, testpg.NewDatabase(t)) })
}

// sites stores one bundle of files per host, each host a live service of
// its own organisation, and returns the store.
func sites(t testing.TB, databaseURL string, files map[string][]byte, hosts ...string) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	var manifest []File
	for p, data := range files {
		sum := sha256.Sum256(data)
		sha := hex.EncodeToString(sum[:])
		if err := st.Bundles().PutBlob(ctx, sha, data, now); err != nil {
			t.Fatal(err)
		}
		manifest = append(manifest, File{Path: p, SHA256: sha, Size: int64(len(data))})
	}
	mj, _ := json.Marshal(manifest)
	for i, host := range hosts {
		liveSite(t, st, i, host, store.Bundle{SHA256: "x", FileCount: len(manifest), Manifest: string(mj), CreatedAt: now})
	}
	return st
}

// liveSite makes organisation, project, bundle (b, given ids of number i)
// and live edge service number i, serving at host.
func liveSite(t testing.TB, st *store.Store, i int, host string, b store.Bundle) {
	t.Helper()
	ctx, now := context.Background(), b.CreatedAt
	org, prj, bnd, svc := fmt.Sprintf("org_%d", i), fmt.Sprintf("prj_%d", i), fmt.Sprintf("bnd_%d", i), fmt.Sprintf("svc_%d", i)
	if _, err := st.Accounts().CreateOrganization(ctx, org, "org", now); err != nil {
		t.Fatal(err)
	}
	b.ID, b.OrgID = bnd, org
	if _, _, err := st.Bundles().Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	err := st.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.Projects().Create(ctx, store.Project{ID: prj, OrgID: org, Name: "p", Policy: "{}", CreatedAt: now}); err != nil {
			return err
		}
		if err := tx.Services().Insert(ctx, store.Service{ID: svc, OrgID: org, ProjectID: prj, Name: "site", Target: "edge",
			PreviewHost: host, BundleID: bnd, State: "live", TaskID: "tsk_" + svc, CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		return tx.Services().ClaimHost(ctx, host, svc, org, now)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func fetch(t *testing.T, e *Edge, host, path string, want []byte) {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	req.Host = host
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	if rec.Code != 200 || !bytes.Equal(rec.Body.Bytes(), want) {
		t.Fatalf("%s%s: %d, %d bytes, want %d", host, path, rec.Code, rec.Body.Len(), len(want))
	}
}

// The hot cache holds file bodies by SHA-256 within its byte budget, across
// sites: two organisations' sites with the same files share one copy; more
// files than the budget holds are all served, from the store's blobs, with
// the cache never over budget; a file larger than the whole budget is
// served without being kept.
func TestHotCacheIsBoundedAndShared(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		files := map[string][]byte{}
		for i := range 6 {
			b := make([]byte, 300<<10)
			rand.Read(b) // incompressible: no gzip variant
			files[fmt.Sprintf("f%d.bin", i)] = b
		}
		huge := make([]byte, 2<<20)
		rand.Read(huge)
		files["huge.bin"] = huge
		const a, b = "a--p.localhost", "b--q.localhost"
		st := sites(t, db, files, a, b)
		log := slog.New(slog.DiscardHandler)

		// Shared: the second site's request adds nothing.
		e := NewWithLimits(FromStore(st), log, Limits{HotCacheBytes: 64 << 20})
		fetch(t, e, a, "/f0.bin", files["f0.bin"])
		one := e.HotCacheBytes()
		fetch(t, e, b, "/f0.bin", files["f0.bin"])
		if got := e.HotCacheBytes(); got != one || e.blobs.Len() != 1 || one < 300<<10 || one > 301<<10 {
			t.Fatalf("one file served for two sites: %d bytes in %d entries, want one copy of %d", got, e.blobs.Len(), 300<<10)
		}

		// Bounded: 1 MiB holds three of the six files.
		const budget = 1 << 20
		e = NewWithLimits(FromStore(st), log, Limits{HotCacheBytes: budget})
		for range 3 {
			for _, host := range []string{a, b} {
				for i := range 6 {
					p := fmt.Sprintf("f%d.bin", i)
					fetch(t, e, host, "/"+p, files[p])
					if got := e.HotCacheBytes(); got > budget {
						t.Fatalf("hot cache at %d bytes, over its %d budget", got, budget)
					}
				}
			}
		}
		if e.HotCacheBytes() < budget/2 {
			t.Errorf("hot cache at %d bytes: it keeps too little of its %d budget", e.HotCacheBytes(), budget)
		}
		fetch(t, e, a, "/huge.bin", huge)
		if e.HotCacheBytes() > budget {
			t.Errorf("a file over the budget was kept: %d bytes", e.HotCacheBytes())
		}
	})
}

// lateLookup answers its first lookup with "no site", late: as a lookup
// that read the store just before a launch committed would.
type lateLookup struct {
	Sites
	calls   atomic.Int32
	release chan struct{}
	asked   chan struct{}
}

func (l *lateLookup) ServiceByHost(ctx context.Context, host string) (store.Service, error) {
	if l.calls.Add(1) == 1 {
		close(l.asked)
		<-l.release
		return store.Service{}, store.ErrNotFound
	}
	return l.Sites.ServiceByHost(ctx, host)
}

// TestInvalidateDuringLookup: a lookup under way when its host is
// invalidated (a launch put a site there meanwhile) answers its own
// request, but is not remembered: the next request looks again and finds
// the site, instead of "no site here" for a revalidation period.
func TestInvalidateDuringLookup(t *testing.T) {
	const host = "late--p.localhost"
	st := sites(t, "", map[string][]byte{"index.html": []byte("<h1>here</h1>")}, host)
	l := &lateLookup{Sites: FromStore(st), release: make(chan struct{}), asked: make(chan struct{})}
	e := New(l, slog.New(slog.DiscardHandler))
	done := make(chan bool)
	go func() { done <- e.Has(context.Background(), host) }()
	<-l.asked
	e.Invalidate(host)
	close(l.release)
	if <-done {
		t.Fatal("the late lookup found a site")
	}
	if !e.Has(context.Background(), host) {
		t.Fatal("after the invalidation, the host is still remembered as having no site")
	}
}
