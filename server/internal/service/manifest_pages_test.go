package service

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"testing"

	"github.com/pierhq/pier/server/internal/site"
)

// TestDerivedPagesAreCanonical: a bundle derived from a base, whatever the
// changes (files replaced, added before, between and after the pages,
// removed, a page's last entry among them), has the pages, and so the
// digest, of the same files sent whole; it is the same bundle.
func TestDerivedPagesAreCanonical(t *testing.T) {
	h := newHarness(t)
	a := h.tenant(10, DefaultPolicy())
	contents := []string{"one", "two", "three"}
	for _, c := range contents {
		_, err := h.svc.Bundles.UploadBlob(h.ctx, a.agent, shaOf(c), []byte(c))
		h.must(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	files := map[string]string{}
	for i := range 6000 {
		files[fmt.Sprintf("d%02d/f%05d.html", i%37, i)] = contents[i%3]
	}
	whole := func() []ManifestEntry {
		out := make([]ManifestEntry, 0, len(files))
		for p, c := range files {
			out = append(out, mf(p, c))
		}
		return out
	}
	m := whole()
	base, err := h.svc.Bundles.Upload(h.ctx, a.agent, UploadRequest{ProjectID: a.project, Manifest: h.manifest(a.agent, m)})
	h.must(err)
	root, err := h.st.Bundles().Root(h.ctx, a.org, base.ID)
	h.must(err)
	if len(root.Pages) < 4 {
		t.Fatalf("6,000 files in %d pages", len(root.Pages))
	}
	for round := range 8 {
		paths := slices.Sorted(maps.Keys(files))
		var changes []ManifestEntry
		var removed []string
		taken := map[string]bool{}
		for range 5 { // replaced
			p := paths[rng.IntN(len(paths))]
			if !taken[p] {
				taken[p] = true
				files[p] = contents[(rng.IntN(2)+1)%3]
				changes = append(changes, mf(p, files[p]))
			}
		}
		for i, p := range []string{"0first.html", fmt.Sprintf("d%02d/new%d.html", rng.IntN(37), round), "zz/last.html"} { // added
			p = fmt.Sprintf("%s.%d.%d", p, round, i)
			files[p] = contents[i]
			changes = append(changes, mf(p, files[p]))
		}
		// Removed: the first entry, a page's last entry, and some others.
		ends := []string{paths[0]}
		for _, r := range root.Pages[1:] {
			ends = append(ends, paths[sort.SearchStrings(paths, r.First)-1])
		}
		for _, p := range append(ends[:2], paths[rng.IntN(len(paths))], paths[len(paths)-1]) {
			if !taken[p] {
				taken[p] = true
				delete(files, p)
				removed = append(removed, p)
			}
		}
		next, err := h.svc.Bundles.Upload(h.ctx, a.agent, UploadRequest{ProjectID: a.project, BaseBundleID: base.ID, Changes: changes, Removed: removed})
		h.must(err)
		m := whole()
		same, err := h.svc.Bundles.Upload(h.ctx, a.agent, UploadRequest{ProjectID: a.project, Manifest: h.manifest(a.agent, m)})
		h.must(err)
		if !same.Deduplicated || same.ID != next.ID || next.FileCount != len(files) {
			t.Fatalf("round %d: derived %+v, whole %+v", round, next, same)
		}
		base = next
		if root, err = h.st.Bundles().Root(h.ctx, a.org, base.ID); err != nil {
			t.Fatal(err)
		}
	}
	// A path removed that the base does not hold is refused, naming it.
	_, err = h.svc.Bundles.Upload(h.ctx, a.agent, UploadRequest{ProjectID: a.project, BaseBundleID: base.ID, Changes: []ManifestEntry{}, Removed: []string{"d01/f00001.html", "no/such.html"}})
	if e := wantCode(t, err, "input:invalid"); e.Details[0].Field != "body.removed.1" {
		t.Fatalf("details %+v", e.Details)
	}
}

// TestManifestOf200000FilesStreamedInBoundedMemory: a 200,000-file
// manifest (about 20 MB of JSON, twice that decoded) is written page by
// page, and a bundle made from it with one file changed reads and writes
// one page: the heap never holds the manifest.
func TestManifestOf200000FilesStreamedInBoundedMemory(t *testing.T) {
	h := newHarness(t)
	a := h.tenant(10, DefaultPolicy())
	for _, c := range []string{"x", "changed"} {
		_, err := h.svc.Bundles.UploadBlob(h.ctx, a.agent, shaOf(c), []byte(c))
		h.must(err)
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	runtime.GC()
	before, peak := heap(), uint64(0)
	w := newPageWriter(h.ctx, h.st.Bundles(), h.clock.Now())
	// Each entry its own content, as a real site's: the base is recorded
	// as checked, so only the change's content is looked up.
	for i := range MaxManifestFiles {
		p := fmt.Sprintf("assets/%03d/file-%06d.html", i/1000, i)
		h.must(w.add(site.File{Path: p, SHA256: shaOf(p), Size: 1, ContentType: site.ContentType(p)}))
		if i%10000 == 0 {
			peak = max(peak, heap())
		}
	}
	refs, err := w.finish()
	h.must(err)
	t.Logf("writing 200,000 entries: heap grew %d KiB at most", (peak-min(peak, before))>>10)
	if grown := peak - min(peak, before); grown > 16<<20 {
		t.Errorf("writing 200,000 entries grew the heap by %d MiB", grown>>20)
	}
	losses, err := h.st.Bundles().Losses(h.ctx)
	h.must(err)
	b, _, err := h.svc.Bundles.putBundle(h.ctx, a.agent, refs, losses, "")
	h.must(err)
	if b.FileCount != MaxManifestFiles || len(refs) < 200 {
		t.Fatalf("bundle of %d files in %d pages", b.FileCount, len(refs))
	}

	change := []ManifestEntry{mf("assets/123/file-123456.html", "changed")}
	req := UploadRequest{ProjectID: a.project, BaseBundleID: b.ID, Changes: change, Removed: []string{}}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	next, err := h.svc.Bundles.Upload(h.ctx, a.agent, req)
	runtime.ReadMemStats(&m1)
	h.must(err)
	t.Logf("a one-file change: %d KiB allocated", (m1.TotalAlloc-m0.TotalAlloc)>>10)
	if allocated := m1.TotalAlloc - m0.TotalAlloc; allocated > 4<<20 {
		t.Errorf("a one-file change to 200,000 files allocated %d KiB", allocated>>10)
	}
	root, err := h.st.Bundles().Root(h.ctx, a.org, next.ID)
	h.must(err)
	differ := 0
	for i := range refs {
		if i >= len(root.Pages) || root.Pages[i] != refs[i] {
			differ++
		}
	}
	if next.FileCount != MaxManifestFiles || len(root.Pages) != len(refs) || differ != 1 {
		t.Fatalf("derived %d files, %d pages of %d, %d pages rewritten", next.FileCount, len(root.Pages), len(refs), differ)
	}
	f, ok, err := bundleFile(h.ctx, h.st.Bundles(), root, "assets/123/file-123456.html")
	if err != nil || !ok || f.SHA256 != shaOf("changed") {
		t.Fatalf("the changed file: %+v %v %v", f, ok, err)
	}
}
