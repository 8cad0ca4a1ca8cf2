package server_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// The digest upload: find_missing_blobs, upload_blob, then upload_assets
// with a manifest.

func sha(content string) string {
	s := sha256.Sum256([]byte(content))
	return hex.EncodeToString(s[:])
}

// digestSite is a site as a manifest and its content by hash.
type digestSite struct {
	manifest []any
	content  map[string]string // sha256 → content
	order    []string          // distinct hashes in manifest order
}

func newDigestSite(files [][2]string) digestSite {
	d := digestSite{content: map[string]string{}}
	for _, f := range files {
		h := sha(f[1])
		d.manifest = append(d.manifest, map[string]any{"path": f[0], "size": len(f[1]), "sha256": h})
		if _, ok := d.content[h]; !ok {
			d.order = append(d.order, h)
		}
		d.content[h] = f[1]
	}
	return d
}

// putBlob sends content raw, as application/octet-stream.
func putBlob(t *testing.T, ts *testServer, a account, hash string, content []byte) (int, map[string]any) {
	t.Helper()
	h := a.header()
	h.Set("Content-Type", "application/octet-stream")
	r := ts.Client.Do("PUT", "/v1/blobs/"+hash, content, h)
	return r.StatusCode, r.JSON()
}

func findMissing(t *testing.T, ts *testServer, a account, manifest []any) []string {
	t.Helper()
	r := ts.Client.Do("POST", "/v1/bundles/missing", map[string]any{"projectId": a.project, "manifest": manifest}, a.header())
	if r.StatusCode != 200 {
		t.Fatalf("find_missing_blobs: %d %s", r.StatusCode, r.Body)
	}
	var out []string
	for _, h := range r.JSON()["data"].(map[string]any)["missing"].([]any) {
		out = append(out, h.(string))
	}
	return out
}

// TestFindMissingIsPerOrganisation: content another organisation uploaded
// is still missing for this one, and uploading it tells nothing of the
// other's copy; the inline form counts new content per organisation too.
func TestFindMissingIsPerOrganisation(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
		b := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
		site := newDigestSite([][2]string{{"index.html", "<h1>secret plan of A</h1>"}, {"a.css", "body{}"}})
		secret := site.order[0]

		if st, body := putBlob(t, ts, a, secret, []byte(site.content[secret])); st != 200 || body["data"].(map[string]any)["alreadyUploaded"] != false {
			t.Fatalf("A uploads: %d %v", st, body)
		}
		if got := findMissing(t, ts, a, site.manifest); len(got) != 1 || got[0] != site.order[1] {
			t.Fatalf("A's missing: %v", got)
		}
		// B has uploaded nothing: everything is missing for B, A's content
		// included.
		if got := findMissing(t, ts, b, site.manifest); len(got) != 2 || got[0] != secret || got[1] != site.order[1] {
			t.Fatalf("B's missing: %v, want both", got)
		}
		// B cannot make a bundle of content it never uploaded.
		r := ts.Client.Do("POST", "/v1/bundles", map[string]any{"projectId": b.project, "manifest": site.manifest}, b.header())
		if r.StatusCode != 409 || r.JSON()["blockedBy"] != "conflict:blobs_missing" || !strings.Contains(string(r.Body), "missing "+secret) {
			t.Fatalf("B's bundle of A's content: %d %s", r.StatusCode, r.Body)
		}
		acts := r.JSON()["actions"].([]any)
		if acts[0].(map[string]any)["tool"] != "find_missing_blobs" || acts[1].(map[string]any)["tool"] != "upload_blob" {
			t.Fatalf("actions %v", acts)
		}
		// B uploading the same content learns nothing of A's copy.
		if st, body := putBlob(t, ts, b, secret, []byte(site.content[secret])); st != 200 || body["data"].(map[string]any)["alreadyUploaded"] != false {
			t.Fatalf("B uploads A's content: %d %v", st, body)
		}
		// Nor does the inline form: newBlobs counts B's own uploads.
		c := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
		r = ts.Client.Do("POST", "/v1/bundles", uploadBody(c.project, map[string]string{"index.html": site.content[secret]}), c.header())
		if r.StatusCode != 201 || r.JSON()["data"].(map[string]any)["newBlobs"] != 1.0 {
			t.Fatalf("inline upload of content A has: %d %s", r.StatusCode, r.Body)
		}
		// An unknown project is not found, before anything else.
		r = ts.Client.Do("POST", "/v1/bundles/missing", map[string]any{"projectId": a.project, "manifest": site.manifest}, b.header())
		if r.StatusCode != 404 {
			t.Fatalf("another organisation's project: %d %s", r.StatusCode, r.Body)
		}
	})
}

// TestDigestUploadResumesAndIsIdempotent: an upload cut halfway resumes
// with only the rest missing; uploading twice is a success that changes
// nothing; the bundle made by digest is the bundle the inline form makes.
func TestDigestUploadResumesAndIsIdempotent(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
		var files [][2]string
		for i := range 10 {
			files = append(files, [2]string{fmt.Sprintf("page/%02d.html", i), fmt.Sprintf("<p>page %d</p>", i)})
		}
		files = append(files, [2]string{"copy.html", "<p>page 3</p>"}) // the same content twice
		site := newDigestSite(files)

		firstAskListsEveryContent(t, ts, a, site)

		// Half the content, then the connection drops.
		for _, h := range site.order[:5] {
			if st, body := putBlob(t, ts, a, h, []byte(site.content[h])); st != 200 {
				t.Fatalf("upload: %d %v", st, body)
			}
		}
		if got := findMissing(t, ts, a, site.manifest); strings.Join(got, ",") != strings.Join(site.order[5:], ",") {
			t.Fatalf("after half: missing %v, want %v", got, site.order[5:])
		}
		// The bundle is refused until the rest is there.
		r := ts.Client.Do("POST", "/v1/bundles", map[string]any{"projectId": a.project, "manifest": site.manifest}, a.header())
		if r.StatusCode != 409 || !strings.Contains(r.JSON()["message"].(string), "5 of the manifest's 10") {
			t.Fatalf("bundle with content missing: %d %s", r.StatusCode, r.Body)
		}
		// Uploading again what is there is a success that changes nothing.
		if st, body := putBlob(t, ts, a, site.order[0], []byte(site.content[site.order[0]])); st != 200 || body["data"].(map[string]any)["alreadyUploaded"] != true {
			t.Fatalf("second upload: %d %v", st, body)
		}
		for _, h := range site.order[5:] {
			if st, body := putBlob(t, ts, a, h, []byte(site.content[h])); st != 200 {
				t.Fatalf("upload: %d %v", st, body)
			}
		}
		if got := findMissing(t, ts, a, site.manifest); len(got) != 0 {
			t.Fatalf("missing after everything: %v", got)
		}
		r = ts.Client.Do("POST", "/v1/bundles", map[string]any{"projectId": a.project, "manifest": site.manifest}, a.header())
		bundle := r.JSON()["data"].(map[string]any)
		if r.StatusCode != 201 || bundle["fileCount"] != 11.0 || bundle["deduplicated"] != false {
			t.Fatalf("bundle: %d %s", r.StatusCode, r.Body)
		}
		if _, ok := bundle["newBlobs"]; ok {
			t.Fatalf("a manifest bundle stores no content: %v", bundle)
		}
		inline := map[string]string{}
		for _, f := range files {
			inline[f[0]] = f[1]
		}
		again := ts.Client.Do("POST", "/v1/bundles", uploadBody(a.project, inline), a.header()).JSON()["data"].(map[string]any)
		if again["bundleId"] != bundle["bundleId"] || again["deduplicated"] != true || again["newBlobs"] != 0.0 {
			t.Fatalf("the inline form of the same files: %v, want %v", again, bundle["bundleId"])
		}
		info := ts.Client.Do("GET", "/v1/bundles/"+bundle["bundleId"].(string), nil, a.header()).JSON()["data"].(map[string]any)
		if f := info["files"].([]any)[0].(map[string]any); f["path"] != "copy.html" || f["contentType"] != "text/html; charset=utf-8" {
			t.Fatalf("manifest %v", f)
		}
		lyingAndMixedBundlesRefused(t, ts, a, site, inline)
	})
}

// firstAskListsEveryContent wants find_missing_blobs to name each distinct
// content once, and to offer the first upload, then upload_assets after it.
func firstAskListsEveryContent(t *testing.T, ts *testServer, a account, site digestSite) {
	t.Helper()
	r := ts.Client.Do("POST", "/v1/bundles/missing", map[string]any{"projectId": a.project, "manifest": site.manifest}, a.header())
	d := r.JSON()["data"].(map[string]any)
	if r.StatusCode != 200 || len(d["missing"].([]any)) != 10 || d["fileCount"] != 11.0 {
		t.Fatalf("first ask: %d %s", r.StatusCode, r.Body)
	}
	acts := r.JSON()["actions"].([]any)
	if first := acts[0].(map[string]any); first["tool"] != "upload_blob" || first["arguments"].(map[string]any)["sha256"] != site.order[0] {
		t.Fatalf("first action %v", first)
	}
	if next := acts[1].(map[string]any); next["tool"] != "upload_assets" || next["after"].([]any)[0] != acts[0].(map[string]any)["id"] {
		t.Fatalf("second action %v", next)
	}
}

// A manifest that lies about a size is refused: sizes are what the
// storage quota counts. Both forms at once, or neither, are refused.
func lyingAndMixedBundlesRefused(t *testing.T, ts *testServer, a account, site digestSite, inline map[string]string) {
	t.Helper()
	lie := []any{map[string]any{"path": "x.html", "size": 1, "sha256": site.order[0]}}
	if r := ts.Client.Do("POST", "/v1/bundles", map[string]any{"projectId": a.project, "manifest": lie}, a.header()); r.StatusCode != 400 {
		t.Fatalf("a wrong size: %d %s", r.StatusCode, r.Body)
	}
	// Both forms at once, or neither, are refused.
	both := uploadBody(a.project, inline)
	both["manifest"] = site.manifest
	for _, body := range []map[string]any{both, {"projectId": a.project}} {
		if r := ts.Client.Do("POST", "/v1/bundles", body, a.header()); r.StatusCode != 400 || r.JSON()["blockedBy"] != "input:invalid" {
			t.Fatalf("%v: %d %s", body, r.StatusCode, r.Body)
		}
	}
}

// TestUploadBlobRefusals: content that does not match its hash, a path
// that is no hash, another media type, and an announced length over the
// limit (before any of it is read).
func TestUploadBlobRefusals(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
	content := []byte("<h1>hello</h1>")
	h := sha(string(content))
	other := sha("something else")

	st, body := putBlob(t, ts, a, other, content)
	if st != 400 || body["blockedBy"] != "input:invalid" || !strings.Contains(fmt.Sprint(body["details"]), h) {
		t.Fatalf("mismatch: %d %v", st, body)
	}
	site := []any{map[string]any{"path": "index.html", "size": len(content), "sha256": other}}
	if got := findMissing(t, ts, a, site); len(got) != 1 {
		t.Fatalf("a refused upload stored something: %v", got)
	}
	for _, bad := range []string{"ABC", strings.ToUpper(h), h + "0", "../" + h} {
		if st, _ := putBlob(t, ts, a, bad, content); st != 400 && st != 404 {
			t.Errorf("path %q: %d", bad, st)
		}
	}
	hdr := a.header()
	hdr.Set("Content-Type", "text/plain")
	if r := ts.Client.Do("PUT", "/v1/blobs/"+h, content, hdr); r.StatusCode != 415 {
		t.Fatalf("text/plain: %d %s", r.StatusCode, r.Body)
	}
	// The JSON form, for clients that send only JSON.
	r := ts.Client.Do("PUT", "/v1/blobs/"+h, map[string]any{"contentBase64": base64.StdEncoding.EncodeToString(content)}, a.header())
	if r.StatusCode != 200 || r.JSON()["data"].(map[string]any)["size"] != float64(len(content)) {
		t.Fatalf("JSON form: %d %s", r.StatusCode, r.Body)
	}
	if r := ts.Client.Do("PUT", "/v1/blobs/"+h, map[string]any{"contentBase64": "!!"}, a.header()); r.StatusCode != 400 {
		t.Fatalf("bad base64: %d %s", r.StatusCode, r.Body)
	}
	// Without the launch scope.
	ro := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "read")
	if st, _ := putBlob(t, ts, ro, h, content); st != 403 {
		t.Fatalf("read-only key: %d", st)
	}
	// The empty file is content too.
	if st, body := putBlob(t, ts, a, sha(""), nil); st != 200 {
		t.Fatalf("empty file: %d %v", st, body)
	}

	// 64 MiB announced: refused before the body is read.
	const size = 64 << 20
	cr := &countingReader{r: &zeros{left: size}}
	req, _ := http.NewRequest("PUT", ts.URL+"/v1/blobs/"+h, cr)
	req.ContentLength = size
	req.Header = a.header()
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 || !bytes.Contains(b, []byte("input:body_too_large")) {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	}
	// Whatever the client pushed into socket buffers, the server read a
	// few MiB at most and closed the connection.
	if n := cr.n.Load(); n > 8<<20 {
		t.Fatalf("the client sent %d MiB before the answer", n>>20)
	}
	// Chunked, with no length announced: cut at the limit.
	req, _ = http.NewRequest("PUT", ts.URL+"/v1/blobs/"+h, io.LimitReader(&zeros{left: size}, size))
	req.Header = a.header()
	req.Header.Set("Content-Type", "application/octet-stream")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 {
			t.Fatalf("chunked: %d %s", resp.StatusCode, b)
		}
	}
}

// TestManifestRefusedBeforeContent: a manifest over 20,000 files, a bad
// path or size, or one over the storage quota is refused by
// find_missing_blobs and upload_assets alike, before any content is sent;
// 20,000 files are fine.
func TestManifestRefusedBeforeContent(t *testing.T) {
	ts := start(t, server.Config{Quotas: service.Quotas{StorageBytes: 64 << 20}})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
	manifest := func(n, size int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]any{"path": fmt.Sprintf("f/%06d.html", i), "size": size, "sha256": sha(fmt.Sprint(i))}
		}
		return out
	}
	refused := func(what string, m []any, code string) {
		t.Helper()
		for _, path := range []string{"/v1/bundles/missing", "/v1/bundles"} {
			r := ts.Client.Do("POST", path, map[string]any{"projectId": a.project, "manifest": m}, a.header())
			if r.StatusCode < 400 || r.JSON()["blockedBy"] != code {
				t.Fatalf("%s, %s: %d %.300s", what, path, r.StatusCode, r.Body)
			}
		}
	}
	refused("one file over the cap", manifest(service.MaxManifestFiles+1, 1), "input:invalid")
	refused("a path with ..", []any{map[string]any{"path": "a/../b.html", "size": 1, "sha256": sha("x")}}, "input:invalid")
	refused("a duplicate path", append(manifest(2, 1), manifest(1, 1)...), "input:invalid")
	refused("a file over 25 MiB", []any{map[string]any{"path": "big.bin", "size": 26<<20 + 1, "sha256": sha("x")}}, "input:invalid")
	refused("a hash in capitals", []any{map[string]any{"path": "a.html", "size": 1, "sha256": strings.ToUpper(sha("x"))}}, "input:invalid")
	refused("over the storage quota", manifest(10, 8<<20), "quota:storage")

	r := ts.Client.Do("POST", "/v1/bundles/missing", map[string]any{"projectId": a.project, "manifest": manifest(20000, 1024)}, a.header())
	if d := r.JSON()["data"].(map[string]any); r.StatusCode != 200 || len(d["missing"].([]any)) != 20000 || d["totalBytes"] != 20000.0*1024 {
		t.Fatalf("20,000 files: %d %.300s", r.StatusCode, r.Body)
	}
}

// TestLaunchRefusesMissingBlob: content lost from storage (an object store
// losing objects; here the row is deleted) is refused at launch with how
// much is missing, and uploading it again makes the launch go through.
func TestLaunchRefusesMissingBlob(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
		site := newDigestSite([][2]string{{"index.html", "<h1>lost and found</h1>"}, {"a.css", "p{}"}, {"b.css", "q{}"}})
		for _, h := range site.order {
			if st, body := putBlob(t, ts, a, h, []byte(site.content[h])); st != 200 {
				t.Fatalf("upload: %d %v", st, body)
			}
		}
		r := ts.Client.Do("POST", "/v1/bundles", map[string]any{"projectId": a.project, "manifest": site.manifest}, a.header())
		if r.StatusCode != 201 {
			t.Fatalf("bundle: %d %s", r.StatusCode, r.Body)
		}
		bundle := r.JSON()["data"].(map[string]any)["bundleId"].(string)
		lost := site.order[1]
		if _, err := ts.Store().DB().Exec(fmt.Sprintf(`DELETE FROM blobs WHERE sha256 = '%s'`, lost)); err != nil {
			t.Fatal(err)
		}

		launch := map[string]any{"name": "site", "target": "edge", "bundleId": bundle}
		r = ts.Client.Do("POST", "/v1/projects/"+a.project+"/launch", launch, a.header())
		if r.StatusCode != 409 || r.JSON()["blockedBy"] != "conflict:blobs_missing" || !strings.HasPrefix(r.JSON()["message"].(string), "1 of bundle "+bundle) ||
			!strings.Contains(string(r.Body), "missing "+lost) {
			t.Fatalf("launch with a lost blob: %d %s", r.StatusCode, r.Body)
		}
		if svcs := ts.Client.Do("GET", "/v1/services", nil, a.header()).JSON()["data"].(map[string]any)["services"].([]any); len(svcs) != 0 {
			t.Fatalf("a refused launch created %v", svcs)
		}
		// The organisation's record does not hide the loss: the content is
		// missing again, and sending it again repairs the bundle.
		if got := findMissing(t, ts, a, site.manifest); len(got) != 1 || got[0] != lost {
			t.Fatalf("missing after the loss: %v", got)
		}
		if st, body := putBlob(t, ts, a, lost, []byte(site.content[lost])); st != 200 || body["data"].(map[string]any)["alreadyUploaded"] != false {
			t.Fatalf("upload again: %d %v", st, body)
		}
		r = ts.Client.Do("POST", "/v1/projects/"+a.project+"/launch", launch, a.header())
		if r.StatusCode != 202 {
			t.Fatalf("launch after repair: %d %s", r.StatusCode, r.Body)
		}
		task := waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
		host := strings.Split(strings.TrimPrefix(task["previewUrl"].(string), "https://"), ":")[0]
		resp, err := httpsClient(ts).Get("https://" + host + "/a.css")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "p{}" {
			t.Fatalf("served %d %q", resp.StatusCode, b)
		}
	})
}

// TestUploadBlobOverMCP: a client that speaks only MCP sends content as
// base64 in the tool's arguments.
func TestUploadBlobOverMCP(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
	content := "<h1>over MCP</h1>"
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "upload_blob",
		"arguments": map[string]any{"sha256": sha(content), "contentBase64": base64.StdEncoding.EncodeToString([]byte(content))}}})
	req, _ := http.NewRequest("POST", ts.URL+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+a.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(raw, []byte(`"alreadyUploaded":false`)) || bytes.Contains(raw, []byte(`"isError":true`)) {
		t.Fatalf("MCP upload_blob: %d %s", resp.StatusCode, raw)
	}
	if got := findMissing(t, ts, a, []any{map[string]any{"path": "index.html", "size": len(content), "sha256": sha(content)}}); len(got) != 0 {
		t.Fatalf("missing after the MCP upload: %v", got)
	}
}
