package service

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pierhq/pier/server/internal/site"
	"github.com/pierhq/pier/server/internal/store"
)

// What is remembered is believed only by the same organisation at the
// same loss count; a loss forgets it all, an older count sees nothing.
func TestKnownBlobs(t *testing.T) {
	k := newKnownBlobs()
	x, y := shaOf("x"), shaOf("y")
	files := []site.File{{SHA256: x}, {SHA256: y}}
	k.add("org_a", 3, map[string]int64{x: 1})
	look := func(org string, losses int64) ([]string, map[string]int64) {
		sizes := map[string]int64{}
		return k.lookUp(org, losses, files, sizes), sizes
	}
	if rest, sizes := look("org_a", 3); !slices.Equal(rest, []string{y}) || sizes[x] != 1 {
		t.Fatalf("same count: %v %v", rest, sizes)
	}
	for _, c := range []struct {
		org    string
		losses int64
	}{{"org_b", 3}, {"org_a", 2}, {"org_a", 4}, {"org_a", 3}} {
		if rest, sizes := look(c.org, c.losses); len(rest) != 2 || len(sizes) != 0 {
			t.Fatalf("%s at %d: %v %v", c.org, c.losses, rest, sizes)
		}
	}
	k.add("org_a", 3, map[string]int64{x: 1}) // as of a count since passed
	if rest, _ := look("org_a", 4); len(rest) != 2 {
		t.Fatalf("remembered as of an older count: %v", rest)
	}
	var nilK *knownBlobs
	nilK.add("org_a", 4, map[string]int64{x: 1})
	if rest := nilK.lookUp("org_a", 4, files, map[string]int64{}); len(rest) != 2 {
		t.Fatalf("none: %v", rest)
	}
}

// A deploy's upload_assets believes what its find_missing_blobs and
// upload_blobs learnt only until content is lost.
func TestBundleByDigestAfterALoss(t *testing.T) {
	h := newHarness(t)
	a, b := h.tenant(10, DefaultPolicy()), h.tenant(10, DefaultPolicy())
	manifest := []ManifestEntry{mf("a.html", "kept"), mf("b.html", "lost")}
	_, err := h.svc.Bundles.PutBlobs(h.ctx, a.agent, []store.BlobContent{{SHA256: shaOf("kept"), Data: []byte("kept")}})
	h.must(err)
	miss, err := h.svc.Bundles.FindMissing(h.ctx, a.agent, a.project, h.intake(a.agent, manifest, false))
	h.must(err)
	if !slices.Equal(miss.Missing, []string{shaOf("lost")}) {
		t.Fatalf("missing %v", miss.Missing)
	}
	_, err = h.svc.Bundles.PutBlobs(h.ctx, a.agent, []store.BlobContent{{SHA256: shaOf("lost"), Data: []byte("lost")}})
	h.must(err)
	if m, _ := h.svc.Bundles.FindMissing(h.ctx, b.agent, b.project, h.intake(b.agent, manifest, false)); len(m.Missing) != 2 {
		t.Fatalf("org B sees A's blobs: %+v", m)
	}
	if _, err := h.st.DB().ExecContext(h.ctx, `DELETE FROM blobs WHERE sha256 = ?`, shaOf("lost")); err != nil {
		t.Fatal(err)
	}
	_, err = h.svc.Bundles.Upload(h.ctx, a.agent, UploadRequest{ProjectID: a.project, Manifest: h.manifest(a.agent, manifest)})
	if e := wantCode(t, err, "conflict:blobs_missing"); !strings.Contains(fmt.Sprintf("%+v", e.Details), shaOf("lost")) {
		t.Fatalf("refusal %+v", e.Details)
	}
	_, err = h.svc.Bundles.PutBlobs(h.ctx, a.agent, []store.BlobContent{{SHA256: shaOf("lost"), Data: []byte("lost")}})
	h.must(err)
	bnd, err := h.svc.Bundles.Upload(h.ctx, a.agent, UploadRequest{ProjectID: a.project, Manifest: h.manifest(a.agent, manifest)})
	h.must(err)
	if bnd.FileCount != 2 {
		t.Fatalf("bundle %+v", bnd)
	}
}

// What is remembered stays within maxKnownBlobs entries across
// organisations, however many deploys teach it.
func TestKnownBlobsAreBounded(t *testing.T) {
	k := newKnownBlobs()
	batch := map[string]int64{}
	for i := range maxKnownBlobs + maxKnownBlobs/2 {
		batch[shaOf(fmt.Sprint(i))] = 1
		if len(batch) == 50_000 {
			k.add(fmt.Sprintf("org_%d", i%3), 1, batch)
			batch = map[string]int64{}
			n := 0
			for _, org := range k.orgs {
				n += len(org)
			}
			if n != k.n || n > maxKnownBlobs {
				t.Fatalf("%d remembered (counted %d), bound %d", n, k.n, maxKnownBlobs)
			}
		}
	}
}
