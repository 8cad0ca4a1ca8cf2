package service

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/store"
)

func mf(path, content string) ManifestEntry {
	return ManifestEntry{Path: path, SHA256: shaOf(content), Size: len(content)}
}

// manifest is a manifest of entries, taken as a request's body brings them.
func (h *harness) manifest(p *auth.Principal, entries []ManifestEntry) *ManifestIntake {
	return h.intake(p, entries, true)
}

// intake takes a manifest for upload_assets (upload) or
// find_missing_blobs, as p.
func (h *harness) intake(p *auth.Principal, entries []ManifestEntry, upload bool) *ManifestIntake {
	m := h.svc.Bundles.NewManifest(h.ctx, p, upload)
	for _, e := range entries {
		m.Add(e)
	}
	return m
}

// By digest: find what is missing, upload it once (again is a no-op),
// then record the bundle; the same manifest again is deduplicated.
func TestBundleByDigest(t *testing.T) {
	h := newHarness(t)
	a, b := h.tenant(10, DefaultPolicy()), h.tenant(10, DefaultPolicy())
	files := map[string]string{"index.html": "<h1>hi</h1>", "app.css": "body{}", "copy.html": "<h1>hi</h1>"}
	var manifest []ManifestEntry
	for p, c := range files {
		manifest = append(manifest, mf(p, c))
	}
	miss, err := h.svc.Bundles.FindMissing(h.ctx, a.agent, a.project, h.intake(a.agent, manifest, false))
	h.must(err)
	if len(miss.Missing) != 2 || miss.FileCount != 3 {
		t.Fatalf("missing %+v", miss)
	}
	_, err = h.svc.Bundles.Upload(h.ctx, a.agent, UploadRequest{ProjectID: a.project, Manifest: h.manifest(a.agent, manifest)})
	if e := wantCode(t, err, "conflict:blobs_missing"); !hasAction(e.Actions, "find_missing_blobs") {
		t.Fatalf("actions %v", names(e.Actions))
	}
	for _, c := range []string{"<h1>hi</h1>", "body{}"} {
		blob, err := h.svc.Bundles.UploadBlob(h.ctx, a.agent, shaOf(c), []byte(c))
		h.must(err)
		again, err := h.svc.Bundles.UploadBlob(h.ctx, a.agent, shaOf(c), []byte(c))
		h.must(err)
		if blob.AlreadyUploaded || !again.AlreadyUploaded {
			t.Fatalf("uploads %+v %+v", blob, again)
		}
	}
	// Another organisation's uploads are not B's.
	if m, _ := h.svc.Bundles.FindMissing(h.ctx, b.agent, b.project, h.intake(b.agent, manifest, false)); len(m.Missing) != 2 {
		t.Fatalf("org B sees A's blobs: %+v", m)
	}
	bnd, err := h.svc.Bundles.Upload(h.ctx, a.agent, UploadRequest{ProjectID: a.project, Manifest: h.manifest(a.agent, manifest)})
	h.must(err)
	if bnd.Deduplicated || bnd.FileCount != 3 || bnd.Target != "edge" {
		t.Fatalf("bundle %+v", bnd)
	}
	dup, err := h.svc.Bundles.Upload(h.ctx, a.agent, UploadRequest{ProjectID: a.project, Manifest: h.manifest(a.agent, manifest)})
	h.must(err)
	if !dup.Deduplicated || dup.ID != bnd.ID {
		t.Fatalf("same manifest again: %+v", dup)
	}
	info, err := h.svc.Bundles.Get(h.ctx, a.org, bnd.ID)
	h.must(err)
	if len(info.Files) != 3 || info.Files[0].Path != "app.css" {
		t.Fatalf("manifest %+v", info.Files)
	}
	_, err = h.svc.Bundles.Get(h.ctx, b.org, bnd.ID)
	wantCode(t, err, "not_found:resource")
	if _, err := h.svc.Bundles.Version(h.ctx, b.agent, bnd.ID); err == nil {
		t.Fatal("org B reads A's bundle version")
	}
	if v, _ := h.svc.Bundles.Version(h.ctx, a.agent, bnd.ID); v != bnd.SHA256 {
		t.Fatalf("version %s", v)
	}
	l, err := h.svc.Bundles.List(h.ctx, a.org, store.Filter{Limit: 1})
	h.must(err)
	if len(l.Items) != 1 || l.NextCursor == nil {
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
	_, err := h.svc.Bundles.UploadBlob(h.ctx, a.agent, shaOf("v2"), []byte("v2"))
	h.must(err)
	changes := []ManifestEntry{mf("index.html", "v2"), mf("new.html", "v2")}
	removed := []string{"old.html"}
	d, err := h.svc.Bundles.Upload(h.ctx, a.agent, UploadRequest{ProjectID: a.project, BaseBundleID: base, Changes: changes, Removed: removed})
	h.must(err)
	info, _ := h.svc.Bundles.Get(h.ctx, a.org, d.ID)
	if len(info.Files) != 3 || info.Files[1].Path != "index.html" || info.Files[1].SHA256 != shaOf("v2") || info.Files[2].Path != "new.html" {
		t.Fatalf("derived %+v", info.Files)
	}
	unknown := []ManifestEntry{mf("x.html", "never uploaded")}
	for _, c := range []struct {
		name string
		p    tenant
		req  UploadRequest
		code models.BlockedBy
	}{
		{"another org's base", b, UploadRequest{ProjectID: b.project, BaseBundleID: base, Changes: changes}, "not_found:resource"},
		{"content missing", a, UploadRequest{ProjectID: a.project, BaseBundleID: base, Changes: unknown}, "conflict:blobs_missing"},
		{"removes what is not there", a, UploadRequest{ProjectID: a.project, BaseBundleID: base, Removed: []string{"nope.html"}}, "input:invalid"},
		{"removes twice", a, UploadRequest{ProjectID: a.project, BaseBundleID: base, Removed: []string{"old.html", "old.html"}}, "input:invalid"},
		{"removes and changes", a, UploadRequest{ProjectID: a.project, BaseBundleID: base, Changes: changes, Removed: []string{"index.html"}}, "input:invalid"},
		{"removes everything", a, UploadRequest{ProjectID: a.project, BaseBundleID: base, Removed: []string{"index.html", "about.html", "old.html"}}, "input:invalid"},
		{"changes without base", a, UploadRequest{ProjectID: a.project, Changes: changes}, "input:invalid"},
		{"removed without base", a, UploadRequest{ProjectID: a.project, Removed: removed}, "input:invalid"},
		{"two forms", a, UploadRequest{ProjectID: a.project, BaseBundleID: base, Manifest: h.manifest(a.agent, changes)}, "input:invalid"},
		{"no form", a, UploadRequest{ProjectID: a.project}, "input:invalid"},
		{"unknown project", a, UploadRequest{ProjectID: "prj_nope", Manifest: h.manifest(a.agent, changes)}, "not_found:resource"},
	} {
		_, err := h.svc.Bundles.Upload(h.ctx, c.p.agent, c.req)
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
	inline := func(fs ...InlineFile) UploadRequest {
		return UploadRequest{ProjectID: tn.project, Files: fs}
	}
	digest := func(fs ...ManifestEntry) UploadRequest {
		return UploadRequest{ProjectID: tn.project, Manifest: h.manifest(tn.agent, fs)}
	}
	h.svc.Bundles.UploadBlob(h.ctx, tn.agent, shaOf("abc"), []byte("abc"))
	for _, c := range []struct {
		name string
		req  UploadRequest
		code models.BlockedBy
	}{
		{"climbing path", inline(InlineFile{Path: "../etc/passwd", ContentBase64: enc("x")}), "input:invalid"},
		{"duplicate path", inline(InlineFile{Path: "a", ContentBase64: enc("x")}, InlineFile{Path: "a", ContentBase64: enc("y")}), "input:invalid"},
		{"not base64", inline(InlineFile{Path: "a", ContentBase64: "!!"}), "input:invalid"},
		{"empty manifest", digest(), "input:invalid"},
		{"bad hash", digest(ManifestEntry{Path: "a", SHA256: "XYZ", Size: 1}), "input:invalid"},
		{"bad size", digest(ManifestEntry{Path: "a", SHA256: shaOf("a"), Size: -1}), "input:invalid"},
		{"wrong size", digest(ManifestEntry{Path: "a", SHA256: shaOf("abc"), Size: 4}), "input:invalid"},
		{"dup manifest path", digest(mf("a", "abc"), mf("a", "abc")), "input:invalid"},
		{"backslash", digest(mf(`a\b`, "abc")), "input:invalid"},
	} {
		_, err := h.svc.Bundles.Upload(h.ctx, tn.agent, c.req)
		if wantCode(t, err, c.code) == nil {
			t.Fatal(c.name)
		}
	}
	for _, c := range []struct {
		sha, data string
		code      models.BlockedBy
	}{{"nothex", "x", "input:invalid"}, {shaOf("y"), "x", "input:invalid"}} {
		_, err := h.svc.Bundles.UploadBlob(h.ctx, tn.agent, c.sha, []byte(c.data))
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
	_, err = h.svc.Bundles.FindMissing(h.ctx, tn.agent, "prj_nope", h.intake(tn.agent, []ManifestEntry{mf("a", "b")}, false))
	wantCode(t, err, "not_found:resource")
}

// Bundle and storage quotas hold per organisation.
func TestBundleQuotas(t *testing.T) {
	h := newHarness(t, withQuotas(Quotas{Bundles: 1, StorageBytes: 100}))
	tn := h.tenant(10, DefaultPolicy())
	big := strings.Repeat("x", 200)
	fs := []InlineFile{{Path: "big.txt", ContentBase64: base64.StdEncoding.EncodeToString([]byte(big))}}
	_, err := h.svc.Bundles.Upload(h.ctx, tn.agent, UploadRequest{ProjectID: tn.project, Files: fs})
	wantCode(t, err, "quota:storage")
	_, err = h.svc.Bundles.FindMissing(h.ctx, tn.agent, tn.project, h.intake(tn.agent, []ManifestEntry{mf("big.txt", big)}, false))
	wantCode(t, err, "quota:storage")
	h.site(tn, map[string]string{"a.txt": "small"})
	_, err = h.svc.Bundles.Upload(h.ctx, tn.agent, UploadRequest{ProjectID: tn.project, Files: []InlineFile{{Path: "b.txt", ContentBase64: "eA=="}}})
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
