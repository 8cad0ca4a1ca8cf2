package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// memObjects is an object store in memory: what the store asks of S3,
// kept in a map.
type memObjects struct {
	mu    sync.Mutex
	m     map[string][]byte
	fails bool
}

var errObjects = errors.New("object store down")

func (o *memObjects) put(k string, data []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fails {
		return errObjects
	}
	if o.m == nil {
		o.m = map[string][]byte{}
	}
	o.m[k] = slices.Clone(data)
	return nil
}

func (o *memObjects) get(k string) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, ok := o.m[k]
	if !ok || o.fails {
		return nil, errObjects
	}
	return b, nil
}

func (o *memObjects) Put(_ context.Context, sha string, data []byte) error { return o.put(sha, data) }
func (o *memObjects) Get(_ context.Context, sha string) ([]byte, error)    { return o.get(sha) }
func (o *memObjects) PutForm(_ context.Context, sha, enc string, data []byte) error {
	return o.put(sha+"."+enc, data)
}
func (o *memObjects) GetForm(_ context.Context, sha, enc string) ([]byte, error) {
	return o.get(sha + "." + enc)
}

func bundleIDs(bs []store.Bundle) []string {
	var ids []string
	for _, b := range bs {
		ids = append(ids, b.ID)
	}
	return ids
}

func TestBundles(t *testing.T) { runCases(t, bundlesCases) }

// bundlesCases are TestBundles's cases, each run on every engine.
var bundlesCases = []storeCase{
	{"manifest pages", func(t *testing.T, w world) {
		bundles := w.st.Bundles()
		p1 := store.Page{SHA256: "page_1", Entries: []byte(`[{"path":"a.html","sha256":"sha_a","size":1,"contentType":"text/html"}]`)}
		p2 := store.Page{SHA256: "page_2", Entries: []byte(`[{"path":"b.html","sha256":"sha_b","size":2,"contentType":"text/html"},{"path":"c.html","sha256":"sha_a","size":1,"contentType":"text/html"}]`)}
		for range 2 { // a page stored again is left as it is
			must(t, bundles.PutPages(ctx, []store.Page{p1, p2}, t0))
		}
		pages, err := bundles.Pages(ctx, []string{"page_2", "page_1"})
		if err != nil || string(pages["page_1"]) != string(p1.Entries) || string(pages["page_2"]) != string(p2.Entries) {
			t.Fatalf("pages %q, %v", pages, err)
		}
		if _, err := bundles.Pages(ctx, []string{"page_none"}); err == nil {
			t.Fatal("an unknown page was read")
		}
		refs := []store.PageRef{{SHA256: "page_1", First: "a.html", Files: 1, Bytes: 1}, {SHA256: "page_2", First: "b.html", Files: 2, Bytes: 3}}
		if _, created, err := bundles.Put(ctx, store.Bundle{ID: "bnd_p", OrgID: w.org, SHA256: "sha_p", FileCount: 3, TotalBytes: 4, Pages: refs, CreatedAt: t0}); err != nil || !created {
			t.Fatalf("put %v %v", created, err)
		}
		root, err := bundles.Root(ctx, w.org, "bnd_p")
		if err != nil || !slices.Equal(root.Pages, refs) || root.Manifest != "[]" {
			t.Fatalf("root %+v, %v", root, err)
		}
		got, err := bundles.Get(ctx, w.org, "bnd_p")
		want := `[{"path":"a.html","sha256":"sha_a","size":1,"contentType":"text/html"},{"path":"b.html","sha256":"sha_b","size":2,"contentType":"text/html"},{"path":"c.html","sha256":"sha_a","size":1,"contentType":"text/html"}]`
		if err != nil || got.Manifest != want {
			t.Fatalf("get %q, %v", got.Manifest, err)
		}
		must(t, bundles.PutBlob(ctx, "sha_a", []byte("a"), t0))
		if missing, err := bundles.BundleMissingBlobs(ctx, w.org, "bnd_p"); err != nil || !slices.Equal(missing, []string{"sha_b"}) {
			t.Fatalf("missing %v, %v", missing, err)
		}
	}},
	{"content addressed", func(t *testing.T, w world) {
		bundles := w.st.Bundles()
		for range 2 {
			must(t, bundles.PutBlob(ctx, "sha_x", []byte("hello"), t0))
		}
		if data, err := bundles.Blob(ctx, "sha_x"); err != nil || string(data) != "hello" {
			t.Fatalf("blob %q, %v", data, err)
		}
		_, err := bundles.Blob(ctx, "sha_none")
		wantErr(t, "unknown blob", err, store.ErrNotFound)
		if ok, err := bundles.HasBlob(ctx, "sha_x"); !ok || err != nil {
			t.Fatalf("has %v, %v", ok, err)
		}
		if ok, err := bundles.HasBlob(ctx, "sha_none"); ok || err != nil {
			t.Fatalf("has unknown %v, %v", ok, err)
		}
		must(t, bundles.PutBlob(ctx, "sha_empty", nil, t0))
		if data, err := bundles.Blob(ctx, "sha_empty"); err != nil || len(data) != 0 {
			t.Fatalf("empty blob %q, %v", data, err)
		}
		b1 := store.Bundle{ID: "bnd_1", OrgID: w.org, SHA256: "sha_m", FileCount: 1, TotalBytes: 5, Manifest: "[]", CreatedAt: t0}
		first, created, err := bundles.Put(ctx, b1)
		if err != nil || !created || first.Checked || first.CheckedLosses != -1 {
			t.Fatalf("first put: %+v %v %v", first, created, err)
		}
		again, created, err := bundles.Put(ctx, store.Bundle{ID: "bnd_2", OrgID: w.org, SHA256: "sha_m", FileCount: 1, TotalBytes: 5, Manifest: "[]", CreatedAt: t0})
		if err != nil || created || again.ID != first.ID || again.Checked {
			t.Fatalf("same content made a second bundle: %+v %v %v", again, created, err)
		}
		// The same content, checked: the existing bundle is marked.
		again, created, err = bundles.Put(ctx, store.Bundle{ID: "bnd_3", OrgID: w.org, SHA256: "sha_m", Checked: true, CheckedLosses: 0, CreatedAt: t0})
		if err != nil || created || again.ID != "bnd_1" || !again.Checked || again.CheckedLosses != 0 {
			t.Fatalf("checked put: %+v %v %v", again, created, err)
		}
		// Another organisation's upload of the same content is its own.
		b := w.other(t, "org_b")
		if got, created, err := bundles.Put(ctx, store.Bundle{ID: "bnd_b", OrgID: b.org, SHA256: "sha_m", Manifest: "[]", CreatedAt: t0}); err != nil || !created || got.ID != "bnd_b" {
			t.Fatalf("another organisation's put: %+v %v %v", got, created, err)
		}
		got, err := bundles.Get(ctx, w.org, "bnd_1")
		if err != nil || got.SHA256 != "sha_m" || got.TotalBytes != 5 || got.Manifest != "[]" || !got.Checked || got.BaseID != "" || !got.CreatedAt.Equal(t0) {
			t.Fatalf("get %+v, %v", got, err)
		}
		_, err = bundles.Get(ctx, b.org, "bnd_1")
		wantErr(t, "another organisation's bundle", err, store.ErrNotFound)
		if _, created, err := bundles.Put(ctx, store.Bundle{ID: "bnd_4", OrgID: w.org, SHA256: "sha_n", BaseID: "bnd_1", Manifest: "[]", CreatedAt: t0}); err != nil || !created {
			t.Fatalf("put with a base: %v %v", created, err)
		}
		if got, _ := bundles.Get(ctx, w.org, "bnd_4"); got.BaseID != "bnd_1" {
			t.Fatalf("base %+v", got)
		}
	}},
	{"list and page", func(t *testing.T, w world) {
		bundles := w.st.Bundles()
		for i := range 3 {
			_, _, err := bundles.Put(ctx, store.Bundle{ID: fmt.Sprintf("bnd_%d", i), OrgID: w.org, SHA256: fmt.Sprint(i), FileCount: i, Manifest: "[]", CreatedAt: t0.Add(time.Duration(i) * time.Second)})
			must(t, err)
		}
		got, err := bundles.List(ctx, w.org, store.Filter{})
		if err != nil || !slices.Equal(bundleIDs(got), []string{"bnd_2", "bnd_1", "bnd_0"}) || got[0].FileCount != 2 || got[0].Manifest != "" {
			t.Fatalf("list %v %+v, %v", bundleIDs(got), got, err)
		}
		got, err = bundles.List(ctx, w.org, store.Filter{Limit: 1, After: store.Cursor{At: t0.Add(2 * time.Second).UnixMicro(), ID: "bnd_2"}})
		if err != nil || !slices.Equal(bundleIDs(got), []string{"bnd_1"}) {
			t.Fatalf("page %v, %v", bundleIDs(got), err)
		}
	}},
	{"losses and checks", func(t *testing.T, w world) {
		bundles := w.st.Bundles()
		if n, err := bundles.Losses(ctx); err != nil || n != 0 {
			t.Fatalf("losses %d, %v", n, err)
		}
		must(t, bundles.PutBlob(ctx, "sha_x", []byte("x"), t0))
		if _, err := w.st.DB().Exec(`DELETE FROM blobs`); err != nil {
			t.Fatal(err)
		}
		if n, err := bundles.Losses(ctx); err != nil || n != 1 {
			t.Fatalf("losses after a deletion %d, %v", n, err)
		}
		_, _, err := bundles.Put(ctx, store.Bundle{ID: "bnd_1", OrgID: w.org, SHA256: "m", Manifest: "[]", CreatedAt: t0})
		must(t, err)
		must(t, bundles.MarkChecked(ctx, w.org, "bnd_1", 3))
		must(t, bundles.MarkChecked(ctx, w.org, "bnd_1", 2)) // an older check does not go back
		must(t, bundles.MarkChecked(ctx, "org_other", "bnd_1", 9))
		if got, _ := bundles.Get(ctx, w.org, "bnd_1"); !got.Checked || got.CheckedLosses != 3 {
			t.Fatalf("checked %+v", got)
		}
	}},
	{"an organisation's blobs are its own", func(t *testing.T, w world) {
		b := w.other(t, "org_b")
		bundles := w.st.Bundles()
		x, y, z := hashOf("x"), hashOf("yy"), hashOf("zzz")
		if had, err := bundles.PutOrgBlob(ctx, w.org, x, []byte("x"), t0); err != nil || had {
			t.Fatalf("first upload: had %v, %v", had, err)
		}
		if had, err := bundles.PutOrgBlob(ctx, w.org, x, []byte("x"), t0); err != nil || !had {
			t.Fatalf("second upload: had %v, %v", had, err)
		}
		// B uploading A's content is told nothing of A's copy.
		if had, err := bundles.PutOrgBlob(ctx, b.org, x, []byte("x"), t0); err != nil || had {
			t.Fatalf("another organisation's upload: had %v, %v", had, err)
		}
		_, err := bundles.PutOrgBlob(ctx, w.org, y, []byte("yy"), t0)
		must(t, err)
		sizes, err := bundles.OrgBlobSizes(ctx, w.org, []string{x, y, z})
		if err != nil || len(sizes) != 2 || sizes[x] != 1 || sizes[y] != 2 {
			t.Fatalf("A's sizes %v, %v", sizes, err)
		}
		sizes, err = bundles.OrgBlobSizes(ctx, b.org, []string{x, y, z})
		if err != nil || len(sizes) != 1 || sizes[x] != 1 {
			t.Fatalf("B's sizes %v, %v", sizes, err)
		}
		if missing, err := bundles.MissingBlobs(ctx, []string{z, x, y, z}); err != nil || !slices.Equal(missing, []string{z}) {
			t.Fatalf("missing %v, %v", missing, err)
		}
		// A bundle naming x twice and y; y is lost.
		manifest := fmt.Sprintf(`[{"path":"a","sha256":%q,"size":1,"contentType":""},{"path":"b","sha256":%q,"size":1,"contentType":""},{"path":"c","sha256":%q,"size":2,"contentType":""}]`, x, x, y)
		bd, _, err := bundles.Put(ctx, store.Bundle{ID: "bnd_1", OrgID: w.org, SHA256: hashOf(manifest), FileCount: 3, TotalBytes: 4, Manifest: manifest, CreatedAt: t0})
		must(t, err)
		if missing, err := bundles.BundleMissingBlobs(ctx, w.org, bd.ID); err != nil || len(missing) != 0 {
			t.Fatalf("bundle missing %v, %v", missing, err)
		}
		if _, err := w.st.DB().Exec(fmt.Sprintf(`DELETE FROM blobs WHERE sha256 = '%s'`, y)); err != nil {
			t.Fatal(err)
		}
		if missing, err := bundles.BundleMissingBlobs(ctx, w.org, bd.ID); err != nil || !slices.Equal(missing, []string{y}) {
			t.Fatalf("bundle missing after the loss %v, %v", missing, err)
		}
		if missing, err := bundles.BundleMissingBlobs(ctx, b.org, bd.ID); err != nil || len(missing) != 0 {
			t.Fatalf("another organisation's bundle id: %v, %v", missing, err)
		}
		if sizes, _ := bundles.OrgBlobSizes(ctx, w.org, []string{y}); len(sizes) != 0 {
			t.Fatalf("lost content still counts as uploaded: %v", sizes)
		}
		if had, err := bundles.PutOrgBlob(ctx, w.org, y, []byte("yy"), t0); err != nil || had {
			t.Fatalf("upload after the loss: had %v, %v", had, err)
		}
		if missing, _ := bundles.BundleMissingBlobs(ctx, w.org, bd.ID); len(missing) != 0 {
			t.Fatalf("still missing after the upload: %v", missing)
		}
	}},
	{"many blobs in one call", func(t *testing.T, w world) {
		bundles := w.st.Bundles()
		if had, err := bundles.PutOrgBlobs(ctx, w.org, nil, t0); err != nil || had != nil {
			t.Fatalf("none: %v, %v", had, err)
		}
		_, err := bundles.PutOrgBlob(ctx, w.org, hashOf("b"), []byte("b"), t0)
		must(t, err)
		var contents []store.BlobContent
		for _, s := range []string{"c", "b", "a", "c"} {
			contents = append(contents, store.BlobContent{SHA256: hashOf(s), Data: []byte(s)})
		}
		had, err := bundles.PutOrgBlobs(ctx, w.org, contents, t0)
		if err != nil || !slices.Equal(had, []bool{false, true, false, true}) {
			t.Fatalf("had %v, %v", had, err)
		}
		// Inside a caller's transaction, rolled back with it.
		boom := errors.New("boom")
		err = w.st.InTx(ctx, func(tx *store.Tx) error {
			if _, err := tx.Bundles().PutOrgBlobs(ctx, w.org, []store.BlobContent{{SHA256: hashOf("d"), Data: []byte("d")}}, t0); err != nil {
				return err
			}
			if _, err := tx.Bundles().PutOrgBlob(ctx, w.org, hashOf("e"), []byte("e"), t0); err != nil {
				return err
			}
			return boom
		})
		wantErr(t, "rolled back", err, boom)
		if missing, _ := bundles.MissingBlobs(ctx, []string{hashOf("a"), hashOf("d"), hashOf("e")}); !slices.Equal(missing, []string{hashOf("d"), hashOf("e")}) {
			t.Fatalf("missing %v", missing)
		}
	}},
	{"a call of more writes than one INSERT takes", func(t *testing.T, w world) {
		// 300 writes cross the 256 rows of one multi-row INSERT (and of
		// one group commit on SQLite), and two contents are named twice:
		// one next to its twin, one whose twin sorts into the next
		// INSERT. First all new; then some uploaded before and one lost
		// since, which writes them one at a time.
		manyWrites(t, w, "new", false)
		manyWrites(t, w, "some there", true)
	}},
	{"concurrent uploads all commit, each told its own answer", func(t *testing.T, w world) {
		// As a digest upload sends them: many at once, each content
		// twice, singly and in groups (together, on SQLite).
		race(t, 200, func(i int) error {
			content := fmt.Sprintf("file %d", i%100)
			if i%3 == 0 {
				_, err := w.st.Bundles().PutOrgBlobs(ctx, w.org, []store.BlobContent{{SHA256: hashOf(content), Data: []byte(content)}, {SHA256: hashOf("shared"), Data: []byte("shared")}}, t0)
				return err
			}
			_, err := w.st.Bundles().PutOrgBlob(ctx, w.org, hashOf(content), []byte(content), t0)
			return err
		})
		var shas []string
		for i := range 100 {
			shas = append(shas, hashOf(fmt.Sprintf("file %d", i)))
		}
		sizes, err := w.st.Bundles().OrgBlobSizes(ctx, w.org, shas)
		if err != nil || len(sizes) != 100 {
			t.Fatalf("%d of 100 recorded, %v", len(sizes), err)
		}
		for i, sha := range shas {
			if b, err := w.st.Bundles().Blob(ctx, sha); err != nil || string(b) != fmt.Sprintf("file %d", i) {
				t.Fatalf("blob %d: %q %v", i, b, err)
			}
		}
	}},
	{"one bad write in a group fails only its caller", func(t *testing.T, w world) {
		// An organisation that does not exist breaks its own record's
		// foreign key; the others in the same group commit.
		errs := make([]error, 40)
		race(t, len(errs), func(i int) error {
			org := w.org
			if i == 7 {
				org = "org_none"
			}
			_, errs[i] = w.st.Bundles().PutOrgBlob(ctx, org, hashOf(fmt.Sprint(i)), []byte(fmt.Sprint(i)), t0)
			return nil
		})
		for i, err := range errs {
			if (err != nil) != (i == 7) {
				t.Fatalf("write %d: %v", i, err)
			}
		}
	}},
	{"compressed forms", func(t *testing.T, w world) {
		bundles := w.st.Bundles()
		x, y := hashOf("x"), hashOf("y")
		_, err := bundles.BlobWithForms(ctx, x)
		wantErr(t, "no blob", err, store.ErrNotFound)
		for _, sha := range []string{x, y} {
			must(t, bundles.PutBlob(ctx, sha, []byte("content "+sha), t0))
		}
		got, err := bundles.BlobWithForms(ctx, x)
		if err != nil || got.Made || string(got.Data) != "content "+x || got.Forms.Gzip != nil || got.Forms.Brotli != nil {
			t.Fatalf("before forms: %+v, %v", got, err)
		}
		forms := store.Forms{Gzip: []byte("gz"), Brotli: []byte("brotli")}
		for range 2 {
			must(t, bundles.PutBlobForms(ctx, x, forms, t0))
		}
		// A later, different making does not replace the first.
		must(t, bundles.PutBlobForms(ctx, x, store.Forms{Gzip: []byte("other")}, t0))
		got, err = bundles.BlobWithForms(ctx, x)
		if err != nil || !got.Made || string(got.Data) != "content "+x || string(got.Forms.Gzip) != "gz" || string(got.Forms.Brotli) != "brotli" {
			t.Fatalf("with forms: %+v, %v", got, err)
		}
		must(t, bundles.PutBlobForms(ctx, y, store.Forms{}, t0))
		got, err = bundles.BlobWithForms(ctx, y)
		if err != nil || !got.Made || got.Forms.Gzip != nil || got.Forms.Brotli != nil || string(got.Data) != "content "+y {
			t.Fatalf("forms that did not gain: %+v, %v", got, err)
		}
	}},
	{"bodies in an object store", func(t *testing.T, w world) {
		objs := &memObjects{}
		st := w.open(store.WithObjects(objs))
		bundles := st.Bundles()
		x, y, z := hashOf("x"), hashOf("y"), hashOf("z")
		must(t, bundles.PutBlob(ctx, x, []byte("xx"), t0))
		if had, err := bundles.PutOrgBlob(ctx, w.org, y, []byte("yy"), t0); err != nil || had {
			t.Fatalf("org blob: %v, %v", had, err)
		}
		if _, err := bundles.PutOrgBlobs(ctx, w.org, []store.BlobContent{{SHA256: z, Data: []byte("zz")}}, t0); err != nil {
			t.Fatal(err)
		}
		must(t, bundles.PutBlobForms(ctx, x, store.Forms{Gzip: []byte("gz"), Brotli: []byte("br")}, t0))
		for sha, want := range map[string]string{x: "xx", y: "yy", z: "zz"} {
			if got, err := bundles.Blob(ctx, sha); err != nil || string(got) != want {
				t.Fatalf("blob %q, %v", got, err)
			}
			if len(objs.m[sha]) != 2 {
				t.Fatalf("%s's body is not in the object store", sha)
			}
		}
		got, err := bundles.BlobWithForms(ctx, x)
		if err != nil || string(got.Data) != "xx" || string(got.Forms.Gzip) != "gz" || string(got.Forms.Brotli) != "br" || !got.Made {
			t.Fatalf("with forms %+v, %v", got, err)
		}
		// A server without the object store says where the body is.
		if _, err := w.st.Bundles().Blob(ctx, x); err == nil || errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a body kept elsewhere read as %v", err)
		}
		if _, err := w.st.Bundles().BlobWithForms(ctx, x); err == nil || errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a body kept elsewhere read as %v", err)
		}
		// A form that comes back with another size is refused.
		objs.m[x+".gzip"] = []byte("g")
		if _, err := bundles.BlobWithForms(ctx, x); err == nil {
			t.Fatal("a form of the wrong size was served")
		}
		// The object store refusing a body: no row names it.
		objs.fails = true
		w2 := hashOf("w")
		if err := bundles.PutBlob(ctx, w2, []byte("w"), t0); !errors.Is(err, errObjects) {
			t.Fatalf("put with the object store down: %v", err)
		}
		if _, err := bundles.PutOrgBlob(ctx, w.org, w2, []byte("w"), t0); !errors.Is(err, errObjects) {
			t.Fatalf("org put with the object store down: %v", err)
		}
		if _, err := bundles.PutOrgBlobs(ctx, w.org, []store.BlobContent{{SHA256: w2, Data: []byte("w")}}, t0); !errors.Is(err, errObjects) {
			t.Fatalf("org puts with the object store down: %v", err)
		}
		if err := bundles.PutBlobForms(ctx, w2, store.Forms{Gzip: []byte("g")}, t0); !errors.Is(err, errObjects) {
			t.Fatalf("forms with the object store down: %v", err)
		}
		if ok, _ := bundles.HasBlob(ctx, w2); ok {
			t.Fatal("a row names a body the object store refused")
		}
		if _, err := bundles.Blob(ctx, x); !errors.Is(err, errObjects) {
			t.Fatalf("get with the object store down: %v", err)
		}
		if _, err := bundles.BlobWithForms(ctx, x); !errors.Is(err, errObjects) {
			t.Fatalf("get forms with the object store down: %v", err)
		}
	}},
}

func manyWrites(t *testing.T, w world, name string, someThere bool) {
	t.Helper()
	bundles := w.st.Bundles()
	content := func(i int) string { return fmt.Sprintf("%s %d", name, i) }
	shas := make([]string, 298)
	order := make([]int, len(shas))
	for i := range shas {
		shas[i], order[i] = hashOf(content(i)), i
	}
	sorted := slices.Sorted(slices.Values(shas))
	order = append(order, slices.Index(shas, sorted[255]), slices.Index(shas, sorted[100]))
	there := func(i int) bool { return someThere && i%10 == 0 && i != 20 }
	for i := 0; someThere && i < len(shas); i += 10 {
		_, err := bundles.PutOrgBlob(ctx, w.org, shas[i], []byte(content(i)), t0)
		must(t, err)
	}
	if _, err := w.st.DB().Exec(fmt.Sprintf(`DELETE FROM blobs WHERE sha256 = '%s'`, shas[20])); err != nil {
		t.Fatal(err)
	}
	var contents []store.BlobContent
	var want []bool
	for n, i := range order {
		contents = append(contents, store.BlobContent{SHA256: shas[i], Data: []byte(content(i))})
		want = append(want, n >= len(shas) || there(i))
	}
	had, err := bundles.PutOrgBlobs(ctx, w.org, contents, t0)
	if err != nil || !slices.Equal(had, want) {
		t.Fatalf("%s: had %v, want %v, %v", name, had, want, err)
	}
	sizes, err := bundles.OrgBlobSizes(ctx, w.org, shas)
	if err != nil || len(sizes) != len(shas) {
		t.Fatalf("%s: %d of %d recorded, %v", name, len(sizes), len(shas), err)
	}
	for i, sha := range shas {
		if b, err := bundles.Blob(ctx, sha); err != nil || string(b) != content(i) || sizes[sha] != int64(len(b)) {
			t.Fatalf("%s: blob %d: %q (size %d) %v", name, i, b, sizes[sha], err)
		}
	}
	again, err := bundles.PutOrgBlobs(ctx, w.org, contents, t0)
	if err != nil || slices.Contains(again, false) {
		t.Fatalf("%s: a retry wrote again: %v, %v", name, again, err)
	}
}
