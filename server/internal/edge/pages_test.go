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
		org, prj, bnd, svc, host := fmt.Sprintf("org_%d", i), fmt.Sprintf("prj_%d", i), fmt.Sprintf("bnd_%d", i), fmt.Sprintf("svc_%d", i), fmt.Sprintf("h%d--p.localhost", i)
		if _, err := st.Accounts().CreateOrganization(ctx, org, "org", now); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.Bundles().Put(ctx, store.Bundle{ID: bnd, OrgID: org, SHA256: bnd, FileCount: 2, Pages: refs, CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
		err = st.InTx(ctx, func(tx *store.Tx) error {
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
