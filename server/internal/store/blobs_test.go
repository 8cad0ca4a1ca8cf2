package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/pierhq/pier/server/internal/store"
)

func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestOrgBlobs: what an organisation uploaded is its own to ask about;
// another organisation's upload of the same content does not count, and
// content lost from storage counts as missing for everyone.
func TestOrgBlobs(t *testing.T) {
	suite(t, func(t *testing.T, open func() *store.Store) {
		ctx := context.Background()
		st := open()
		a, b := newWorld(t, st, "org_a"), newWorld(t, st, "org_b")
		bundles := st.Bundles()
		x, y, z := hashOf("x"), hashOf("yy"), hashOf("zzz")

		if had, err := bundles.PutOrgBlob(ctx, a.org, x, []byte("x"), t0); err != nil || had {
			t.Fatalf("first upload: had %v, %v", had, err)
		}
		if had, err := bundles.PutOrgBlob(ctx, a.org, x, []byte("x"), t0); err != nil || !had {
			t.Fatalf("second upload: had %v, %v", had, err)
		}
		// B uploading A's content is told nothing of A's copy.
		if had, err := bundles.PutOrgBlob(ctx, b.org, x, []byte("x"), t0); err != nil || had {
			t.Fatalf("another organisation's upload: had %v, %v", had, err)
		}
		if _, err := bundles.PutOrgBlob(ctx, a.org, y, []byte("yy"), t0); err != nil {
			t.Fatal(err)
		}
		sizes, err := bundles.OrgBlobSizes(ctx, a.org, []string{x, y, z})
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
		bd, _, err := bundles.Put(ctx, store.Bundle{ID: "bnd_1", OrgID: a.org, SHA256: hashOf(manifest), FileCount: 3, TotalBytes: 4, Manifest: manifest, CreatedAt: t0})
		if err != nil {
			t.Fatal(err)
		}
		if missing, err := bundles.BundleMissingBlobs(ctx, a.org, bd.ID); err != nil || len(missing) != 0 {
			t.Fatalf("bundle missing %v, %v", missing, err)
		}
		if _, err := st.DB().Exec(fmt.Sprintf(`DELETE FROM blobs WHERE sha256 = '%s'`, y)); err != nil {
			t.Fatal(err)
		}
		if missing, err := bundles.BundleMissingBlobs(ctx, a.org, bd.ID); err != nil || !slices.Equal(missing, []string{y}) {
			t.Fatalf("bundle missing after the loss %v, %v", missing, err)
		}
		if missing, err := bundles.BundleMissingBlobs(ctx, b.org, bd.ID); err != nil || len(missing) != 0 {
			t.Fatalf("another organisation's bundle id: %v, %v", missing, err)
		}
		if sizes, _ := bundles.OrgBlobSizes(ctx, a.org, []string{y}); len(sizes) != 0 {
			t.Fatalf("lost content still counts as uploaded: %v", sizes)
		}
		if had, err := bundles.PutOrgBlob(ctx, a.org, y, []byte("yy"), t0); err != nil || had {
			t.Fatalf("upload after the loss: had %v, %v", had, err)
		}
		if missing, _ := bundles.BundleMissingBlobs(ctx, a.org, bd.ID); len(missing) != 0 {
			t.Fatalf("still missing after the upload: %v", missing)
		}
	})
}

// TestConcurrentBlobWrites: many uploads at once, as a digest upload
// sends them, all commit (together, on SQLite), each told its own answer.
func TestConcurrentBlobWrites(t *testing.T) {
	suite(t, func(t *testing.T, open func() *store.Store) {
		ctx := context.Background()
		st := open()
		w := newWorld(t, st, "org_c")
		var wg sync.WaitGroup
		errs := make(chan error, 400)
		for i := range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				content := fmt.Sprintf("file %d", i%100) // each content twice
				if _, err := st.Bundles().PutOrgBlob(ctx, w.org, hashOf(content), []byte(content), t0); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		var shas []string
		for i := range 100 {
			shas = append(shas, hashOf(fmt.Sprintf("file %d", i)))
		}
		sizes, err := st.Bundles().OrgBlobSizes(ctx, w.org, shas)
		if err != nil || len(sizes) != 100 {
			t.Fatalf("%d of 100 recorded, %v", len(sizes), err)
		}
		for i, sha := range shas {
			if b, err := st.Bundles().Blob(ctx, sha); err != nil || string(b) != fmt.Sprintf("file %d", i) {
				t.Fatalf("blob %d: %q %v", i, b, err)
			}
		}
	})
}

// TestBlobForms: a blob's compressed forms are kept by its hash and read
// back with it in one call; keeping them again changes nothing; a blob
// with no forms made reads as such, and one whose forms did not gain
// records that they were made.
func TestBlobForms(t *testing.T) {
	suite(t, func(t *testing.T, open func() *store.Store) {
		ctx := context.Background()
		st := open()
		bundles := st.Bundles()
		x, y := hashOf("x"), hashOf("y")
		if _, err := bundles.BlobWithForms(ctx, x); err != store.ErrNotFound {
			t.Fatalf("no blob: %v", err)
		}
		for _, sha := range []string{x, y} {
			if err := bundles.PutBlob(ctx, sha, []byte("content "+sha), t0); err != nil {
				t.Fatal(err)
			}
		}
		got, err := bundles.BlobWithForms(ctx, x)
		if err != nil || got.Made || string(got.Data) != "content "+x || got.Forms.Gzip != nil || got.Forms.Brotli != nil {
			t.Fatalf("before forms: %+v, %v", got, err)
		}
		forms := store.Forms{Gzip: []byte("gz"), Brotli: []byte("brotli")}
		for range 2 {
			if err := bundles.PutBlobForms(ctx, x, forms, t0); err != nil {
				t.Fatal(err)
			}
		}
		// A later, different making does not replace the first.
		if err := bundles.PutBlobForms(ctx, x, store.Forms{Gzip: []byte("other")}, t0); err != nil {
			t.Fatal(err)
		}
		got, err = bundles.BlobWithForms(ctx, x)
		if err != nil || !got.Made || string(got.Data) != "content "+x || string(got.Forms.Gzip) != "gz" || string(got.Forms.Brotli) != "brotli" {
			t.Fatalf("with forms: %+v, %v", got, err)
		}
		if err := bundles.PutBlobForms(ctx, y, store.Forms{}, t0); err != nil {
			t.Fatal(err)
		}
		got, err = bundles.BlobWithForms(ctx, y)
		if err != nil || !got.Made || got.Forms.Gzip != nil || got.Forms.Brotli != nil || string(got.Data) != "content "+y {
			t.Fatalf("forms that did not gain: %+v, %v", got, err)
		}
	})
}
