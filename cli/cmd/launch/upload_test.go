package launch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
	"github.com/pierhq/pier/sdk"
)

// fakeBundleAPI serves the digest upload and answers upload_assets once
// every content of the manifest was uploaded.
func fakeBundleAPI(t *testing.T, fb *clitest.FakeBlobs) *httptest.Server {
	mux := http.NewServeMux()
	fb.Register(t, mux)
	fb.Bundles = map[string]map[string]string{}
	mux.HandleFunc("POST /v1/bundles", func(w http.ResponseWriter, r *http.Request) {
		type file struct {
			Path   string `json:"path"`
			SHA256 string `json:"sha256"`
		}
		var req struct {
			Manifest     []file   `json:"manifest"`
			Files        []any    `json:"files"`
			BaseBundleID *string  `json:"baseBundleId"`
			Changes      []file   `json:"changes"`
			Removed      []string `json:"removed"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if req.Files != nil {
			t.Errorf("the CLI sent content inline")
		}
		fb.Mu.Lock()
		defer fb.Mu.Unlock()
		// A bundle from a base is the base's files with the changes and
		// without the removed paths; every content of it must be there
		// (as the server looks up after content was lost).
		files := map[string]string{}
		fb.EntriesSent += len(req.Manifest) + len(req.Changes) + len(req.Removed)
		if req.BaseBundleID != nil {
			fb.FromBase++
			base, ok := fb.Bundles[*req.BaseBundleID]
			if !ok {
				clitest.WriteEnvelope(w, 404, `{"actions":[{"kind":"stop","reason":"done"}],"blockedBy":"not_found:resource","message":"no bundle","retryable":false,"formatVersion":"1"}`)
				return
			}
			for p, h := range base {
				files[p] = h
			}
			for _, p := range req.Removed {
				delete(files, p)
			}
			for _, f := range req.Changes {
				files[f.Path] = f.SHA256
			}
		}
		for _, f := range req.Manifest {
			files[f.Path] = f.SHA256
		}
		for _, h := range files {
			if _, ok := fb.Stored[h]; !ok {
				clitest.WriteEnvelope(w, 409, fmt.Sprintf(`{"actions":[{"kind":"stop","reason":"done"}],"blockedBy":"conflict:blobs_missing","message":"missing","details":[{"field":"body.manifest","problem":"missing %s"}],"retryable":true,"formatVersion":"1"}`, h))
				return
			}
		}
		id := fmt.Sprintf("bnd_%d", len(fb.Bundles)+1)
		fb.Bundles[id] = files
		clitest.WriteEnvelope(w, 201, fmt.Sprintf(`{"actions":[{"kind":"stop","reason":"done"}],"data":{"budgetRemainingUsd":100,"bundleId":%q,"deduplicated":false,"fileCount":%d,"receipt":{"action":"upload_assets","costs":[],"createdAt":"2026-11-25T07:16:17Z","createdResources":[{"id":%q,"type":"bundle"}],"id":"rcp_0","totalUsd":0},"sha256":"4838855e096961ec713e4d2b32cf6aa636cce04ffae0da5ee293d3c32641e1e7","totalBytes":2,"undo":{"command":null,"irreversible":true}},"formatVersion":"1"}`, id, len(files), id))
	})
	h := clitest.Validated(mux, func(p []string) { t.Errorf("the fake API drifted from the contract: %v", p) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fb.Active.Add(1)
		defer fb.Active.Add(-1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func writeSite(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBundlesUploadSendsOnlyWhatIsMissing: the first upload streams every
// distinct content, at most four at a time; after one file changes, the
// second upload sends that file alone; an interrupted upload resumes with
// only what is still missing.
func TestBundlesUploadSendsOnlyWhatIsMissing(t *testing.T) {
	fb := &clitest.FakeBlobs{}
	srv := fakeBundleAPI(t, fb)
	dir := t.TempDir()
	files := map[string]string{"index.html": "<h1>home</h1>", "same.html": "<h1>home</h1>", ".hidden": "never", ".well-known/security.txt": "Contact: x",
		"big.bin": strings.Repeat("b", batchFileBytes+1)}
	for i := range 30 {
		files[fmt.Sprintf("assets/%02d.css", i)] = fmt.Sprintf("p%d{}", i)
	}
	writeSite(t, dir, files)
	upload := func() (int, string) {
		f, ts := clitest.NewFactory(map[string]string{"PIER_BASE_URL": srv.URL, "PIER_API_KEY": "agk_test"})
		code := clitest.RunWith(t, f, NewCmdBundlesUpload(f, nil), dir, "--project", "prj_1")
		return code, ts.Out.String() + ts.Err.String()
	}

	code, out := upload()
	if code != 0 || !strings.Contains(out, "uploaded 33 of 34 files") {
		t.Fatalf("first upload: exit %d\n%s", code, out)
	}
	// The 32 small contents in four batches, the large one alone.
	if len(fb.Puts) != 33 || fb.MaxInflight > uploadParallelism || fb.MaxInflight < 2 || fb.Chunked != 0 || fb.Batches != 4 || fb.Singles != 1 {
		t.Fatalf("first upload: %d uploads in %d batches and %d alone, %d at once, %d without a length", len(fb.Puts), fb.Batches, fb.Singles, fb.MaxInflight, fb.Chunked)
	}

	writeSite(t, dir, map[string]string{"assets/07.css": "p7{color:red}"})
	fb.Puts = nil
	code, out = upload()
	if code != 0 || !strings.Contains(out, "uploaded 1 of 34 files") || len(fb.Puts) != 1 {
		t.Fatalf("after a one-file change: exit %d, %d uploads\n%s", code, len(fb.Puts), out)
	}

	// Ten files change; the connection fails after four of them.
	for i := range 10 {
		writeSite(t, dir, map[string]string{fmt.Sprintf("assets/%02d.css", i+10): fmt.Sprintf("q%d{}", i)})
	}
	fb.Puts, fb.FailAfter = nil, 4
	f, ts := clitest.NewFactory(map[string]string{"PIER_BASE_URL": srv.URL, "PIER_API_KEY": "agk_test"})
	f.SDKOptions = append(f.SDKOptions, sdk.WithMaxRetries(0))
	if code := clitest.RunWith(t, f, NewCmdBundlesUpload(f, nil), dir, "--project", "prj_1"); code == 0 {
		t.Fatalf("an upload that failed exited 0:\n%s", ts.Out)
	}
	// Uploads the server had begun finish on its side; no more can begin.
	srv.CloseClientConnections()
	for deadline := time.Now().Add(5 * time.Second); fb.Active.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	sent := slices.Clone(fb.Puts)
	fb.Puts, fb.FailAfter = nil, 0
	code, out = upload()
	if code != 0 || len(sent)+len(fb.Puts) != 10 || !strings.Contains(out, fmt.Sprintf("uploaded %d of 34 files", 10-len(sent))) {
		t.Fatalf("resumed: exit %d, %d then %d uploads\n%s", code, len(sent), len(fb.Puts), out)
	}
	for _, h := range fb.Puts {
		if slices.Contains(sent, h) {
			t.Fatalf("resumed upload sent %s again", h)
		}
	}
}

// TestDigestCache: after an upload, the next one to the same project
// hashes only the files whose size, times or inode changed and sends
// what the last bundle did not hold without asking find_missing_blobs; a
// content the server lost since is refused with the bundle, and the upload
// then asks and sends it.
func TestDigestCache(t *testing.T) {
	c := newDigestCacheRun(t)
	c.firstUploadSendsEveryFile()
	c.oneChangedFileIsSentAlone()
	c.addedAndRemovedFilesAreTwoEntries()
	c.withoutTheLastBundleTheWholeManifest()
	c.sameSizeChangeIsSeenByTheTime()
	c.timeSetBackIsSeenByTheChangeTime()
	c.lostContentIsAskedForAndSent()
	c.garbledCacheIsNoCache()
}

// digestCacheRun uploads one site of 30 files again and again, with one
// digest cache, to a fake API.
type digestCacheRun struct {
	t             *testing.T
	fb            *clitest.FakeBlobs
	srv           *httptest.Server
	dir, cacheDir string
	// old is the modification time the site's files were written at.
	old time.Time
}

func newDigestCacheRun(t *testing.T) *digestCacheRun {
	c := &digestCacheRun{t: t, fb: &clitest.FakeBlobs{}, dir: t.TempDir(), cacheDir: t.TempDir()}
	c.srv = fakeBundleAPI(t, c.fb)
	files := map[string]string{}
	for i := range 30 {
		files[fmt.Sprintf("p/%02d.html", i)] = fmt.Sprintf("<p>page %02d</p>", i)
	}
	writeSite(t, c.dir, files)
	// Written well before the uploads, as a site usually is: a file
	// modified just before the cache was written is hashed again.
	c.old = time.Now().Add(-time.Hour)
	for p := range files {
		if err := os.Chtimes(filepath.Join(c.dir, p), c.old, c.old); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// upload runs pier bundles upload on the site and answers its output;
// fb.Puts then holds what this upload sent.
func (c *digestCacheRun) upload() string {
	c.t.Helper()
	c.fb.Puts = nil
	f, ts := clitest.NewFactory(map[string]string{"PIER_BASE_URL": c.srv.URL, "PIER_API_KEY": "agk_test", "PIER_CACHE_DIR": c.cacheDir})
	if code := clitest.RunWith(c.t, f, NewCmdBundlesUpload(f, nil), c.dir, "--project", "prj_1"); code != 0 {
		c.t.Fatalf("upload: exit %d\n%s%s", code, ts.Out, ts.Err)
	}
	return ts.Out.String()
}

func sha256Hex(content string) string {
	h := sha256.Sum256([]byte(content))
	return hex.EncodeToString(h[:])
}

func (c *digestCacheRun) firstUploadSendsEveryFile() {
	c.t.Helper()
	fb := c.fb
	if out := c.upload(); fb.Finds.Load() != 1 || len(fb.Puts) != 30 || !strings.Contains(out, "uploaded 30 of 30 files") {
		c.t.Fatalf("first upload: %d finds, %d uploads\n%s", fb.Finds.Load(), len(fb.Puts), out)
	}
}

// One file changes, its size too: sent alone, nothing asked, and the
// bundle is made from the last one with that one entry.
func (c *digestCacheRun) oneChangedFileIsSentAlone() {
	c.t.Helper()
	fb := c.fb
	writeSite(c.t, c.dir, map[string]string{"p/07.html": "<p>page seven</p>"})
	fb.EntriesSent = 0
	if out := c.upload(); fb.Finds.Load() != 1 || !slices.Equal(fb.Puts, []string{sha256Hex("<p>page seven</p>")}) || !strings.Contains(out, "uploaded 1 of 30 files") ||
		fb.FromBase != 1 || fb.EntriesSent != 1 {
		c.t.Fatalf("after a one-file change: %d finds, uploads %v, %d from a base, %d entries sent\n%s", fb.Finds.Load(), fb.Puts, fb.FromBase, fb.EntriesSent, out)
	}
	if got := fb.Bundles["bnd_2"]["p/07.html"]; got != sha256Hex("<p>page seven</p>") || len(fb.Bundles["bnd_2"]) != 30 {
		c.t.Fatalf("the bundle made from the base: %v", fb.Bundles["bnd_2"])
	}
}

// A file added and one removed: two entries.
func (c *digestCacheRun) addedAndRemovedFilesAreTwoEntries() {
	c.t.Helper()
	fb := c.fb
	writeSite(c.t, c.dir, map[string]string{"p/new.html": "<p>new</p>"})
	if err := os.Remove(filepath.Join(c.dir, "p/29.html")); err != nil {
		c.t.Fatal(err)
	}
	fb.EntriesSent = 0
	if c.upload(); !slices.Equal(fb.Puts, []string{sha256Hex("<p>new</p>")}) || fb.EntriesSent != 2 || len(fb.Bundles["bnd_3"]) != 30 || fb.Bundles["bnd_3"]["p/29.html"] != "" {
		c.t.Fatalf("after adding and removing: uploads %v, %d entries sent, bundle %v", fb.Puts, fb.EntriesSent, fb.Bundles["bnd_3"])
	}
}

// The server no longer has the last bundle: the whole manifest. (The
// file back is sent again: the last bundle did not hold it.)
func (c *digestCacheRun) withoutTheLastBundleTheWholeManifest() {
	c.t.Helper()
	fb := c.fb
	fb.Mu.Lock()
	delete(fb.Bundles, "bnd_3")
	fb.Mu.Unlock()
	fb.EntriesSent = 0
	writeSite(c.t, c.dir, map[string]string{"p/29.html": "<p>page 29</p>"})
	if c.upload(); len(fb.Puts) != 1 || fb.EntriesSent != 1+31 {
		c.t.Fatalf("without the last bundle: uploads %v, %d entries sent", fb.Puts, fb.EntriesSent)
	}
}

// A change that keeps the size is seen by the modification time.
func (c *digestCacheRun) sameSizeChangeIsSeenByTheTime() {
	c.t.Helper()
	writeSite(c.t, c.dir, map[string]string{"p/08.html": "<p>page 8x</p>"})
	if c.upload(); !slices.Equal(c.fb.Puts, []string{sha256Hex("<p>page 8x</p>")}) {
		c.t.Fatalf("a same-size change: uploads %v", c.fb.Puts)
	}
}

// What the cache trusts: a file whose size, modification time, inode and
// change time are as they were is not read again. A same-size rewrite
// with its modification time set back still moved its change time, which
// no call sets back: where the system tells it (Linux), the file is read
// again and sent; elsewhere size and time are trusted.
func (c *digestCacheRun) timeSetBackIsSeenByTheChangeTime() {
	c.t.Helper()
	writeSite(c.t, c.dir, map[string]string{"p/09.html": "<p>page 9x</p>"})
	if err := os.Chtimes(filepath.Join(c.dir, "p/09.html"), c.old, c.old); err != nil {
		c.t.Fatal(err)
	}
	var want []string
	if runtime.GOOS == "linux" {
		want = []string{sha256Hex("<p>page 9x</p>")}
	}
	if c.upload(); !slices.Equal(c.fb.Puts, want) || c.fb.Finds.Load() != 1 {
		c.t.Fatalf("a same-size rewrite, its time set back: uploads %v, %d finds", c.fb.Puts, c.fb.Finds.Load())
	}
}

// The server lost a content the last bundle held: the bundle is refused,
// the upload asks and sends it.
func (c *digestCacheRun) lostContentIsAskedForAndSent() {
	c.t.Helper()
	fb := c.fb
	fb.Mu.Lock()
	delete(fb.Stored, sha256Hex("<p>page 03</p>"))
	fb.Mu.Unlock()
	if c.upload(); fb.Finds.Load() != 2 || !slices.Equal(fb.Puts, []string{sha256Hex("<p>page 03</p>")}) {
		c.t.Fatalf("a lost content: %d finds, uploads %v", fb.Finds.Load(), fb.Puts)
	}
}

// A cache that cannot be read is no cache: the upload reads every file
// and asks, and sends the change the cache had hidden (where the change
// time did not already show it).
func (c *digestCacheRun) garbledCacheIsNoCache() {
	c.t.Helper()
	caches, _ := filepath.Glob(filepath.Join(c.cacheDir, "digests", "*"))
	if len(caches) != 1 {
		c.t.Fatalf("caches %v, want one for one directory, project and server", caches)
	}
	if err := os.WriteFile(caches[0], []byte("pier-digests 2 x 0 bnd_1\n\x00garbled"), 0o600); err != nil {
		c.t.Fatal(err)
	}
	var want []string
	if runtime.GOOS != "linux" {
		want = []string{sha256Hex("<p>page 9x</p>")}
	}
	if c.upload(); c.fb.Finds.Load() != 3 || !slices.Equal(c.fb.Puts, want) {
		c.t.Fatalf("a garbled cache: %d finds, uploads %v", c.fb.Finds.Load(), c.fb.Puts)
	}
}

// Off a terminal (a CI log) an upload prints where it is every
// uploadLineEvery, so that a long one is seen going on; a short one
// prints only its first line.
func TestUploadOffATerminalPrintsWhereItIs(t *testing.T) {
	defer func(d time.Duration) { uploadLineEvery = d }(uploadLineEvery)
	counts := regexp.MustCompile(`uploading (\d+)/40 files, `)
	for _, c := range []struct {
		every time.Duration
		lines bool
	}{{0, true}, {time.Hour, false}} {
		uploadLineEvery = c.every
		fb := &clitest.FakeBlobs{}
		srv := fakeBundleAPI(t, fb)
		f, ts := clitest.NewFactory(map[string]string{"PIER_BASE_URL": srv.URL, "PIER_API_KEY": "agk_test",
			"PIER_CACHE_DIR": t.TempDir(), "PIER_WATCHER": "off"})
		dir := t.TempDir()
		for i := range 40 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := uploadDir(context.Background(), f, cmdutil.NewProgress(f), dir, "prj_1"); err != nil {
			t.Fatal(err)
		}
		got := counts.FindAllStringSubmatch(ts.Err.String(), -1)
		if !strings.Contains(ts.Err.String(), "uploading 40 files") {
			t.Errorf("every %v: no first line:\n%s", c.every, ts.Err)
		}
		if c.lines != (len(got) > 0) {
			t.Errorf("every %v: %d progress lines:\n%s", c.every, len(got), ts.Err)
		}
		for _, m := range got {
			if m[1] == "40" {
				t.Errorf("every %v: the last count printed as progress:\n%s", c.every, ts.Err)
			}
		}
	}
}
