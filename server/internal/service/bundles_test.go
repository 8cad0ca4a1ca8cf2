package service

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/store"
)

func mf(path, content string) models.ManifestFile {
	return models.ManifestFile{Path: path, Sha256: shaOf(content), Size: len(content)}
}

// By digest: find what is missing, upload it once (again is a no-op),
// then record the bundle; the same manifest again is deduplicated.
func TestBundleByDigest(t *testing.T) {
	h := newHarness(t)
	a, b := h.tenant(10, DefaultPolicy()), h.tenant(10, DefaultPolicy())
	files := map[string]string{"index.html": "<h1>hi</h1>", "app.css": "body{}", "copy.html": "<h1>hi</h1>"}
	var manifest []models.ManifestFile
	for p, c := range files {
		manifest = append(manifest, mf(p, c))
	}
	miss, next, err := h.svc.Bundles.FindMissing(h.ctx, a.agent, models.FindMissingBlobsRequest{ProjectId: a.project, Manifest: manifest})
	h.must(err)
	if len(miss.Missing) != 2 || miss.FileCount != 3 || names(next)[0] != "upload_blob" {
		t.Fatalf("missing %+v %v", miss, names(next))
	}
	_, _, err = h.svc.Bundles.Upload(h.ctx, a.agent, models.UploadAssetsRequest{ProjectId: a.project, Manifest: &manifest})
	if e := wantCode(t, err, "conflict:blobs_missing"); !hasAction(e.Actions, "find_missing_blobs") {
		t.Fatalf("actions %v", names(e.Actions))
	}
	for _, c := range []string{"<h1>hi</h1>", "body{}"} {
		blob, _, err := h.svc.Bundles.UploadBlob(h.ctx, a.agent, shaOf(c), []byte(c))
		h.must(err)
		again, _, err := h.svc.Bundles.UploadBlob(h.ctx, a.agent, shaOf(c), []byte(c))
		h.must(err)
		if blob.AlreadyUploaded || !again.AlreadyUploaded {
			t.Fatalf("uploads %+v %+v", blob, again)
		}
	}
	// Another organisation's uploads are not B's.
	if m, _, _ := h.svc.Bundles.FindMissing(h.ctx, b.agent, models.FindMissingBlobsRequest{ProjectId: b.project, Manifest: manifest}); len(m.Missing) != 2 {
		t.Fatalf("org B sees A's blobs: %+v", m)
	}
	bnd, next, err := h.svc.Bundles.Upload(h.ctx, a.agent, models.UploadAssetsRequest{ProjectId: a.project, Manifest: &manifest})
	h.must(err)
	if *bnd.Deduplicated || bnd.FileCount != 3 || !hasAction(next, "launch_service") {
		t.Fatalf("bundle %+v", bnd)
	}
	dup, _, err := h.svc.Bundles.Upload(h.ctx, a.agent, models.UploadAssetsRequest{ProjectId: a.project, Manifest: &manifest})
	h.must(err)
	if !*dup.Deduplicated || dup.BundleId != bnd.BundleId {
		t.Fatalf("same manifest again: %+v", dup)
	}
	info, _, err := h.svc.Bundles.Get(h.ctx, a.org, bnd.BundleId)
	h.must(err)
	if len(info.Files) != 3 || info.Files[0].Path != "app.css" {
		t.Fatalf("manifest %+v", info.Files)
	}
	_, _, err = h.svc.Bundles.Get(h.ctx, b.org, bnd.BundleId)
	wantCode(t, err, "not_found:resource")
	if _, err := h.svc.Bundles.Version(h.ctx, b.agent, bnd.BundleId); err == nil {
		t.Fatal("org B reads A's bundle version")
	}
	if v, _ := h.svc.Bundles.Version(h.ctx, a.agent, bnd.BundleId); v != bnd.Sha256 {
		t.Fatalf("version %s", v)
	}
	l, _, err := h.svc.Bundles.List(h.ctx, a.org, store.Filter{Limit: 1})
	h.must(err)
	if len(l.Bundles) != 1 || l.NextCursor == nil {
		t.Fatalf("list %+v", l)
	}
	if _, err := ParseCursor(*l.NextCursor); err != nil {
		t.Fatal(err)
	}
}

// Derived bundles take a base's files with changes and removals.
func TestBundleDerived(t *testing.T) {
	h := newHarness(t)
	a, b := h.tenant(10, DefaultPolicy()), h.tenant(10, DefaultPolicy())
	base := h.site(a, map[string]string{"index.html": "v1", "about.html": "about", "old.html": "old"})
	_, _, err := h.svc.Bundles.UploadBlob(h.ctx, a.agent, shaOf("v2"), []byte("v2"))
	h.must(err)
	changes := []models.ManifestFile{mf("index.html", "v2"), mf("new.html", "v2")}
	removed := []string{"old.html"}
	d, _, err := h.svc.Bundles.Upload(h.ctx, a.agent, models.UploadAssetsRequest{ProjectId: a.project, BaseBundleId: &base, Changes: &changes, Removed: &removed})
	h.must(err)
	info, _, _ := h.svc.Bundles.Get(h.ctx, a.org, d.BundleId)
	if len(info.Files) != 3 || info.Files[1].Path != "index.html" || info.Files[1].Sha256 != shaOf("v2") || info.Files[2].Path != "new.html" {
		t.Fatalf("derived %+v", info.Files)
	}
	unknown := []models.ManifestFile{mf("x.html", "never uploaded")}
	for _, c := range []struct {
		name string
		p    tenant
		req  models.UploadAssetsRequest
		code models.BlockedBy
	}{
		{"another org's base", b, models.UploadAssetsRequest{ProjectId: b.project, BaseBundleId: &base, Changes: &changes}, "not_found:resource"},
		{"content missing", a, models.UploadAssetsRequest{ProjectId: a.project, BaseBundleId: &base, Changes: &unknown}, "conflict:blobs_missing"},
		{"removes what is not there", a, models.UploadAssetsRequest{ProjectId: a.project, BaseBundleId: &base, Removed: &[]string{"nope.html"}}, "input:invalid"},
		{"removes twice", a, models.UploadAssetsRequest{ProjectId: a.project, BaseBundleId: &base, Removed: &[]string{"old.html", "old.html"}}, "input:invalid"},
		{"removes and changes", a, models.UploadAssetsRequest{ProjectId: a.project, BaseBundleId: &base, Changes: &changes, Removed: &[]string{"index.html"}}, "input:invalid"},
		{"removes everything", a, models.UploadAssetsRequest{ProjectId: a.project, BaseBundleId: &base, Removed: &[]string{"index.html", "about.html", "old.html"}}, "input:invalid"},
		{"changes without base", a, models.UploadAssetsRequest{ProjectId: a.project, Changes: &changes}, "input:invalid"},
		{"removed without base", a, models.UploadAssetsRequest{ProjectId: a.project, Removed: &removed}, "input:invalid"},
		{"two forms", a, models.UploadAssetsRequest{ProjectId: a.project, BaseBundleId: &base, Manifest: &changes}, "input:invalid"},
		{"no form", a, models.UploadAssetsRequest{ProjectId: a.project}, "input:invalid"},
		{"unknown project", a, models.UploadAssetsRequest{ProjectId: "prj_nope", Manifest: &changes}, "not_found:resource"},
	} {
		_, _, err := h.svc.Bundles.Upload(h.ctx, c.p.agent, c.req)
		if e := wantCode(t, err, c.code); e == nil {
			t.Fatal(c.name)
		}
	}
}

// Paths, hashes, sizes and contents are checked before anything is kept.
func TestBundleRefusals(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(10, DefaultPolicy())
	enc := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	inline := func(fs ...models.AssetFile) models.UploadAssetsRequest {
		return models.UploadAssetsRequest{ProjectId: tn.project, Files: &fs}
	}
	digest := func(fs ...models.ManifestFile) models.UploadAssetsRequest {
		return models.UploadAssetsRequest{ProjectId: tn.project, Manifest: &fs}
	}
	h.svc.Bundles.UploadBlob(h.ctx, tn.agent, shaOf("abc"), []byte("abc"))
	for _, c := range []struct {
		name string
		req  models.UploadAssetsRequest
		code models.BlockedBy
	}{
		{"climbing path", inline(models.AssetFile{Path: "../etc/passwd", ContentBase64: enc("x")}), "input:invalid"},
		{"duplicate path", inline(models.AssetFile{Path: "a", ContentBase64: enc("x")}, models.AssetFile{Path: "a", ContentBase64: enc("y")}), "input:invalid"},
		{"not base64", inline(models.AssetFile{Path: "a", ContentBase64: "!!"}), "input:invalid"},
		{"empty manifest", digest(), "input:invalid"},
		{"bad hash", digest(models.ManifestFile{Path: "a", Sha256: "XYZ", Size: 1}), "input:invalid"},
		{"bad size", digest(models.ManifestFile{Path: "a", Sha256: shaOf("a"), Size: -1}), "input:invalid"},
		{"wrong size", digest(models.ManifestFile{Path: "a", Sha256: shaOf("abc"), Size: 4}), "input:invalid"},
		{"dup manifest path", digest(mf("a", "abc"), mf("a", "abc")), "input:invalid"},
		{"backslash", digest(mf(`a\b`, "abc")), "input:invalid"},
	} {
		_, _, err := h.svc.Bundles.Upload(h.ctx, tn.agent, c.req)
		if wantCode(t, err, c.code) == nil {
			t.Fatal(c.name)
		}
	}
	for _, c := range []struct {
		sha, data string
		code      models.BlockedBy
	}{{"nothex", "x", "input:invalid"}, {shaOf("y"), "x", "input:invalid"}} {
		_, _, err := h.svc.Bundles.UploadBlob(h.ctx, tn.agent, c.sha, []byte(c.data))
		wantCode(t, err, c.code)
		if e := CheckBlob("body.0", c.sha, []byte(c.data)); e == nil || e.Code != c.code {
			t.Fatalf("CheckBlob %v", e)
		}
	}
	if e := CheckBlob("body.0", shaOf("ok"), []byte("ok")); e != nil {
		t.Fatal(e)
	}
	out, err := h.svc.Bundles.PutBlobs(h.ctx, tn.agent, []store.BlobContent{{SHA256: shaOf("ok"), Data: []byte("ok")}, {SHA256: shaOf("abc"), Data: []byte("abc")}})
	h.must(err)
	if out[0].AlreadyUploaded || !out[1].AlreadyUploaded {
		t.Fatalf("put blobs %+v", out)
	}
	_, _, err = h.svc.Bundles.FindMissing(h.ctx, tn.agent, models.FindMissingBlobsRequest{ProjectId: "prj_nope", Manifest: []models.ManifestFile{mf("a", "b")}})
	wantCode(t, err, "not_found:resource")
}

// Bundle and storage quotas hold per organisation.
func TestBundleQuotas(t *testing.T) {
	h := newHarness(t, withQuotas(Quotas{Bundles: 1, StorageBytes: 100}))
	tn := h.tenant(10, DefaultPolicy())
	big := strings.Repeat("x", 200)
	fs := []models.AssetFile{{Path: "big.txt", ContentBase64: base64.StdEncoding.EncodeToString([]byte(big))}}
	_, _, err := h.svc.Bundles.Upload(h.ctx, tn.agent, models.UploadAssetsRequest{ProjectId: tn.project, Files: &fs})
	wantCode(t, err, "quota:storage")
	_, _, err = h.svc.Bundles.FindMissing(h.ctx, tn.agent, models.FindMissingBlobsRequest{ProjectId: tn.project, Manifest: []models.ManifestFile{mf("big.txt", big)}})
	wantCode(t, err, "quota:storage")
	h.site(tn, map[string]string{"a.txt": "small"})
	_, _, err = h.svc.Bundles.Upload(h.ctx, tn.agent, models.UploadAssetsRequest{ProjectId: tn.project, Files: &[]models.AssetFile{{Path: "b.txt", ContentBase64: "eA=="}}})
	wantCode(t, err, "quota:bundles")
}

func TestParseCursor(t *testing.T) {
	for _, bad := range []string{"!!", base64.RawURLEncoding.EncodeToString([]byte("nodot")), base64.RawURLEncoding.EncodeToString([]byte("-5.id")), base64.RawURLEncoding.EncodeToString([]byte("5."))} {
		_, err := ParseCursor(bad)
		wantCode(t, err, "input:invalid")
	}
	if c, err := ParseCursor(""); err != nil || c.ID != "" {
		t.Fatalf("empty cursor: %+v %v", c, err)
	}
}
