package server_test

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// A bundle made from a previous bundle plus changes (upload_assets with
// baseBundleId, changes and removed).

func entry(path, content string) map[string]any {
	return map[string]any{"path": path, "size": len(content), "sha256": sha(content)}
}

// TestBundleFromBase: added, changed and removed files give the bundle the
// whole manifest would; only the changes' content is looked up and must
// be the organisation's; the base must be a bundle of the organisation,
// whoever else's it is; paths must not conflict.
func TestBundleFromBase(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
		b := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
		site := newDigestSite([][2]string{{"index.html", "<h1>v1</h1>"}, {"a.css", "a{}"}, {"b.css", "b{}"}, {"old.txt", "old"}})
		for _, h := range site.order {
			if st, body := putBlob(t, ts, a, h, []byte(site.content[h])); st != 200 {
				t.Fatalf("upload: %d %v", st, body)
			}
		}
		create := func(acc account, body map[string]any) (int, map[string]any) { return createBundle(t, ts, acc, body) }
		st, body := create(a, map[string]any{"manifest": site.manifest})
		if st != 201 {
			t.Fatalf("base: %d %v", st, body)
		}
		base := body["data"].(map[string]any)["bundleId"].(string)

		// index.html changes, new.js is added, old.txt goes. The changed
		// content is not uploaded yet: refused naming it alone.
		derived := map[string]any{"baseBundleId": base,
			"changes": []any{entry("index.html", "<h1>v2</h1>"), entry("js/new.js", "x()")},
			"removed": []any{"old.txt"}}
		st, body = create(a, derived)
		if st != 409 || body["blockedBy"] != "conflict:blobs_missing" || body["retryable"] != true ||
			!strings.HasPrefix(body["message"].(string), "2 of the bundle's contents") || len(body["details"].([]any)) != 2 ||
			body["details"].([]any)[0].(map[string]any)["field"] != "body.changes" {
			t.Fatalf("changes not uploaded: %d %v", st, body)
		}
		if acts := body["actions"].([]any); len(acts) == 0 {
			t.Fatalf("no actions: %v", body)
		}
		for _, c := range []string{"<h1>v2</h1>", "x()"} {
			if st, body := putBlob(t, ts, a, sha(c), []byte(c)); st != 200 {
				t.Fatalf("upload: %d %v", st, body)
			}
		}
		st, body = create(a, derived)
		if st != 201 || body["data"].(map[string]any)["fileCount"] != 4.0 || body["data"].(map[string]any)["deduplicated"] != false {
			t.Fatalf("derived: %d %v", st, body)
		}
		made := body["data"].(map[string]any)
		got := bundleFiles(t, ts, a, made["bundleId"].(string))
		want := []string{"a.css=" + sha("a{}"), "b.css=" + sha("b{}"), "index.html=" + sha("<h1>v2</h1>"), "js/new.js=" + sha("x()")}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("derived manifest\n%v\nwant\n%v", got, want)
		}
		// The whole manifest of the same files is the same bundle.
		whole := []any{entry("a.css", "a{}"), entry("b.css", "b{}"), entry("index.html", "<h1>v2</h1>"), entry("js/new.js", "x()")}
		if st, body := create(a, map[string]any{"manifest": whole}); st != 201 || body["data"].(map[string]any)["bundleId"] != made["bundleId"] ||
			body["data"].(map[string]any)["deduplicated"] != true {
			t.Fatalf("the whole manifest: %d %v, want %v", st, body, made["bundleId"])
		}
		// No change at all is the base itself.
		if st, body := create(a, map[string]any{"baseBundleId": base, "changes": []any{}}); st != 201 || body["data"].(map[string]any)["bundleId"] != base {
			t.Fatalf("no change: %d %v", st, body)
		}

		// Another organisation's bundle is not found, as an unknown one;
		// and its content, though stored, is not this organisation's.
		for _, id := range []string{base, "bnd_nosuchbundle"} {
			st, body := create(b, map[string]any{"baseBundleId": id, "changes": []any{}})
			if st != 404 || body["blockedBy"] != "not_found:resource" || body["message"] != "no bundle "+id+" in your organisation" || len(body["actions"].([]any)) == 0 {
				t.Fatalf("base %s from another organisation: %d %v", id, st, body)
			}
		}

		badDerivationsRefused(t, ts, a, base, site.manifest)
	})
}

// createBundle calls create_bundle, in acc's project unless body names
// one, and answers the status and envelope.
func createBundle(t *testing.T, ts *testServer, acc account, body map[string]any) (int, map[string]any) {
	t.Helper()
	if _, ok := body["projectId"]; !ok {
		body["projectId"] = acc.project
	}
	r := ts.Client.Do("POST", "/v1/bundles", body, acc.header())
	return r.StatusCode, r.JSON()
}

// bundleFiles answers the bundle's files as path=sha256.
func bundleFiles(t *testing.T, ts *testServer, a account, id string) []string {
	t.Helper()
	info := ts.Client.Do("GET", "/v1/bundles/"+id, nil, a.header()).JSON()["data"].(map[string]any)
	var got []string
	for _, f := range info["files"].([]any) {
		f := f.(map[string]any)
		got = append(got, fmt.Sprintf("%s=%s", f["path"], f["sha256"]))
	}
	return got
}

// Conflicting paths, and changes without a base, are refused before
// anything is looked up.
func badDerivationsRefused(t *testing.T, ts *testServer, a account, base string, manifest any) {
	t.Helper()
	for name, c := range map[string]struct {
		body  map[string]any
		field string
	}{
		"removed and changed": {map[string]any{"baseBundleId": base, "changes": []any{entry("a.css", "a{}")}, "removed": []any{"a.css"}}, "body.removed.0"},
		"removed twice":       {map[string]any{"baseBundleId": base, "removed": []any{"a.css", "a.css"}}, "body.removed.1"},
		"removed, not there":  {map[string]any{"baseBundleId": base, "removed": []any{"nope.css"}}, "body.removed.0"},
		"changed twice":       {map[string]any{"baseBundleId": base, "changes": []any{entry("a.css", "a{}"), entry("a.css", "b{}")}}, "body.changes.1.path"},
		"unsafe path":         {map[string]any{"baseBundleId": base, "changes": []any{entry("../x", "a{}")}}, "body.changes.0.path"},
		"everything removed":  {map[string]any{"baseBundleId": base, "removed": []any{"a.css", "b.css", "index.html", "old.txt"}}, "body.removed"},
		"changes, no base":    {map[string]any{"changes": []any{entry("a.css", "a{}")}}, "body.changes"},
		"base and manifest":   {map[string]any{"baseBundleId": base, "manifest": manifest}, "body.baseBundleId"},
	} {
		st, body := createBundle(t, ts, a, c.body)
		if st != 400 || body["blockedBy"] != "input:invalid" || body["retryable"] != false || body["details"].([]any)[0].(map[string]any)["field"] != c.field {
			t.Errorf("%s: %d %v", name, st, body)
		}
	}
}

// TestBundleFromBaseFileCap: the file cap holds for the bundle a base
// and its changes make, and is checked before any content is looked up.
func TestBundleFromBaseFileCap(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
	content := "<p>same</p>"
	if st, body := putBlob(t, ts, a, sha(content), []byte(content)); st != 200 {
		t.Fatalf("upload: %d %v", st, body)
	}
	manifest := make([]any, service.MaxManifestFiles-1)
	for i := range manifest {
		manifest[i] = entry(fmt.Sprintf("p/%05d.html", i), content)
	}
	r := ts.Client.Do("POST", "/v1/bundles", map[string]any{"projectId": a.project, "manifest": manifest}, a.header())
	if r.StatusCode != 201 {
		t.Fatalf("base: %d %s", r.StatusCode, r.Body)
	}
	base := r.JSON()["data"].(map[string]any)["bundleId"].(string)
	// Two files added to one under the cap, their content never
	// uploaded: too many files, not missing content.
	over := map[string]any{"projectId": a.project, "baseBundleId": base, "changes": []any{entry("new/1.html", "one"), entry("new/2.html", "two")}}
	r = ts.Client.Do("POST", "/v1/bundles", over, a.header())
	if r.StatusCode != 400 || r.JSON()["blockedBy"] != "input:invalid" || !strings.Contains(r.JSON()["message"].(string), fmt.Sprintf("would hold %d", service.MaxManifestFiles+1)) {
		t.Fatalf("over the cap: %d %s", r.StatusCode, r.Body)
	}
	// One added and one removed stays within it.
	within := map[string]any{"projectId": a.project, "baseBundleId": base, "changes": []any{entry("new/1.html", content), entry("new/2.html", content)}, "removed": []any{"p/00000.html"}}
	if r := ts.Client.Do("POST", "/v1/bundles", within, a.header()); r.StatusCode != 201 || r.JSON()["data"].(map[string]any)["fileCount"] != float64(service.MaxManifestFiles) {
		t.Fatalf("at the cap: %d %s", r.StatusCode, r.Body)
	}
}

// TestBundleFromBaseAfterLoss: content of the base lost since it was
// checked is looked up again, whether the bundle is made from the base or
// launched: a missing content is refused at launch, however the bundle
// was made.
func TestBundleFromBaseAfterLoss(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
		site := newDigestSite([][2]string{{"index.html", "<h1>v1</h1>"}, {"a.css", "a{}"}, {"b.css", "b{}"}})
		for _, h := range site.order {
			if st, body := putBlob(t, ts, a, h, []byte(site.content[h])); st != 200 {
				t.Fatalf("upload: %d %v", st, body)
			}
		}
		r := ts.Client.Do("POST", "/v1/bundles", map[string]any{"projectId": a.project, "manifest": site.manifest}, a.header())
		base := r.JSON()["data"].(map[string]any)["bundleId"].(string)
		v2 := "<h1>v2</h1>"
		if st, body := putBlob(t, ts, a, sha(v2), []byte(v2)); st != 200 {
			t.Fatalf("upload: %d %v", st, body)
		}
		derive := func(changes ...any) (int, map[string]any) {
			r := ts.Client.Do("POST", "/v1/bundles", map[string]any{"projectId": a.project, "baseBundleId": base, "changes": changes}, a.header())
			return r.StatusCode, r.JSON()
		}
		st, body := derive(entry("index.html", v2))
		if st != 201 {
			t.Fatalf("derived: %d %v", st, body)
		}
		derived := body["data"].(map[string]any)["bundleId"].(string)

		// a.css is lost: the bundle made before, launched, is refused.
		lost := sha("a{}")
		if _, err := ts.Store().DB().Exec(fmt.Sprintf(`DELETE FROM blobs WHERE sha256 = '%s'`, lost)); err != nil {
			t.Fatal(err)
		}
		launch := map[string]any{"name": "site", "target": "edge", "bundleId": derived}
		r = ts.Client.Do("POST", "/v1/projects/"+a.project+"/launch", launch, a.header())
		if r.StatusCode != 409 || r.JSON()["blockedBy"] != "conflict:blobs_missing" || !strings.Contains(string(r.Body), "missing "+lost) {
			t.Fatalf("launch with a lost base content: %d %s", r.StatusCode, r.Body)
		}
		// A bundle made from the base now looks up the base's content too.
		st, body = derive(entry("b.css", "b{}"))
		if st != 409 || body["blockedBy"] != "conflict:blobs_missing" || !strings.Contains(fmt.Sprint(body["details"]), "missing "+lost) ||
			body["details"].([]any)[0].(map[string]any)["field"] != "body.baseBundleId" {
			t.Fatalf("derived after a loss: %d %v", st, body)
		}
		// Sent again, everything goes through and is served.
		if st, body := putBlob(t, ts, a, lost, []byte("a{}")); st != 200 {
			t.Fatalf("upload again: %d %v", st, body)
		}
		if st, body := derive(entry("index.html", v2)); st != 201 || body["data"].(map[string]any)["bundleId"] != derived {
			t.Fatalf("derived after repair: %d %v", st, body)
		}
		r = ts.Client.Do("POST", "/v1/projects/"+a.project+"/launch", launch, a.header())
		if r.StatusCode != 202 {
			t.Fatalf("launch after repair: %d %s", r.StatusCode, r.Body)
		}
		task := waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
		host := strings.Split(strings.TrimPrefix(task["previewUrl"].(string), "https://"), ":")[0]
		for path, want := range map[string]string{"/": v2, "/a.css": "a{}"} {
			resp, err := httpsClient(ts).Get("https://" + host + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != want {
				t.Fatalf("%s served %d %q", path, resp.StatusCode, b)
			}
		}
	})
}

// TestBundleFromBaseSizeMismatch: a change whose size is not its
// content's is refused naming changes, the field sent.
func TestBundleFromBaseSizeMismatch(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
	for _, c := range []string{"a{}", "b{}"} {
		if st, body := putBlob(t, ts, a, sha(c), []byte(c)); st != 200 {
			t.Fatalf("upload: %d %v", st, body)
		}
	}
	r := ts.Client.Do("POST", "/v1/bundles", map[string]any{"projectId": a.project, "manifest": []any{entry("a.css", "a{}")}}, a.header())
	if r.StatusCode != 201 {
		t.Fatalf("base: %d %s", r.StatusCode, r.Body)
	}
	base := r.JSON()["data"].(map[string]any)["bundleId"].(string)
	wrong := entry("b.css", "b{}")
	wrong["size"] = 7
	r = ts.Client.Do("POST", "/v1/bundles", map[string]any{"projectId": a.project, "baseBundleId": base, "changes": []any{wrong}}, a.header())
	if body := r.JSON(); r.StatusCode != 400 || body["blockedBy"] != "input:invalid" || body["details"].([]any)[0].(map[string]any)["field"] != "body.changes" {
		t.Fatalf("a change of the wrong size: %d %s", r.StatusCode, r.Body)
	}
}
