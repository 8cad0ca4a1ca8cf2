package edge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

// countingPages counts the manifest pages the edge reads from the store.
type countingPages struct {
	storeSites
	asked []string
}

func (c *countingPages) Pages(ctx context.Context, shas []string) (map[string][]byte, error) {
	c.asked = append(c.asked, shas...)
	return c.storeSites.Pages(ctx, shas)
}

// TestSitesAreBuiltFromPagesTheyShare: a site whose bundle is kept in
// pages is built from them, and another version (here another site) that
// shares a page reads only the pages it does not share.
func TestSitesAreBuiltFromPagesTheyShare(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	bodies := map[string][]byte{"a": []byte("<p>a</p>"), "b": []byte("<p>b</p>"), "b2": []byte("<p>b, changed</p>")}
	page := func(path, body string) store.PageRef {
		sum := sha256.Sum256(bodies[body])
		sha := hex.EncodeToString(sum[:])
		if err := st.Bundles().PutBlob(ctx, sha, bodies[body], now); err != nil {
			t.Fatal(err)
		}
		j, _ := json.Marshal([]File{{Path: path, SHA256: sha, Size: int64(len(bodies[body]))}})
		psum := sha256.Sum256(j)
		ref := store.PageRef{SHA256: hex.EncodeToString(psum[:]), First: path, Files: 1, Bytes: int64(len(bodies[body]))}
		if err := st.Bundles().PutPages(ctx, []store.Page{{SHA256: ref.SHA256, Entries: j}}, now); err != nil {
			t.Fatal(err)
		}
		return ref
	}
	pa, pb, pb2 := page("a.html", "a"), page("b.html", "b"), page("b.html", "b2")
	for i, refs := range [][]store.PageRef{{pa, pb}, {pa, pb2}} {
		liveSite(t, st, i, fmt.Sprintf("h%d--p.localhost", i), store.Bundle{SHA256: fmt.Sprintf("bnd_%d", i), FileCount: 2, Pages: refs, CreatedAt: now})
	}
	sites := &countingPages{storeSites: storeSites{st}}
	e := NewWithLimits(sites, slog.New(slog.DiscardHandler), Limits{HotCacheBytes: 1 << 20})
	fetch(t, e, "h0--p.localhost", "/a.html", bodies["a"])
	fetch(t, e, "h0--p.localhost", "/b.html", bodies["b"])
	if !slices.Equal(sites.asked, []string{pa.SHA256, pb.SHA256}) {
		t.Fatalf("the first site read pages %v", sites.asked)
	}
	fetch(t, e, "h1--p.localhost", "/b.html", bodies["b2"])
	fetch(t, e, "h1--p.localhost", "/a.html", bodies["a"])
	if !slices.Equal(sites.asked, []string{pa.SHA256, pb.SHA256, pb2.SHA256}) {
		t.Fatalf("the second site read pages %v; want only the one it does not share", sites.asked)
	}
}
