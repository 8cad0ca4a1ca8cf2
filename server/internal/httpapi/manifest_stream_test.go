package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/ratelimit"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

// manifestServer serves the contract over a real service and store, with
// a key of an organisation with a project, and uploads contents.
type manifestServer struct {
	t       *testing.T
	h       *Handler
	url     string
	key     string
	project string
}

func newManifestServer(t *testing.T, contents ...string) *manifestServer {
	t.Helper()
	st, err := store.Open(context.Background(), t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc := service.New(service.Config{Store: st, Now: time.Now})
	h, err := New(Config{Service: svc, Store: st, Limiter: ratelimit.New(nil, time.Now), Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	o, err := st.Accounts().CreateOrganization(ctx, auth.ID("org"), "t", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc.Projects.Create(ctx, service.NewProject{OrgID: o.ID, Name: "main", LimitMicro: 10_000_000, Policy: service.DefaultPolicy(), CreatedBy: "human:usr_t"})
	if err != nil {
		t.Fatal(err)
	}
	secret, hash := auth.NewKey()
	k := store.APIKey{ID: auth.ID("key"), OrgID: o.ID, Name: "t", Scopes: service.SignupScopes, CreatedAt: time.Now()}
	if err := st.Keys().Create(ctx, k, hash); err != nil {
		t.Fatal(err)
	}
	agent := &auth.Principal{Kind: "agent", OrgID: o.ID, KeyID: k.ID, Scopes: k.Scopes, Caller: "key:" + k.ID}
	for _, c := range contents {
		if _, err := svc.Bundles.UploadBlob(ctx, agent, shaHex(c), []byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	return &manifestServer{t: t, h: h, url: srv.URL, key: secret, project: p.ID}
}

func shaHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// answer is what a refusal or success says, as compared between the
// streamed and the whole-body path.
type answer struct {
	Status   int
	Replayed string
	Body     map[string]any
}

func (s *manifestServer) post(path string, body io.Reader, idem string) answer {
	s.t.Helper()
	req, _ := http.NewRequest("POST", s.url+path, body)
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{Status: resp.StatusCode, Replayed: resp.Header.Get("Idempotency-Replayed")}
	if err := json.Unmarshal(raw, &a.Body); err != nil {
		s.t.Fatalf("%s answered %d %q", path, resp.StatusCode, raw)
	}
	delete(a.Body, "requestId")
	return a
}

// entries is a manifest of n entries in path order, naming contents in
// turn, with bad in place of the entries it has (by index).
func entries(n int, contents []string, bad map[int]string) func(w io.Writer) {
	return func(w io.Writer) {
		for i := range n {
			if i > 0 {
				io.WriteString(w, ",")
			}
			if e, ok := bad[i]; ok {
				io.WriteString(w, e)
				continue
			}
			c := contents[i%len(contents)]
			fmt.Fprintf(w, `{"path":"assets/%03d/file-%06d.html","sha256":"%s","size":%d}`, i/1000, i, shaHex(c), len(c))
		}
	}
}

func bodyWith(project string, manifest func(io.Writer)) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"projectId":%q,"manifest":[`, project)
	manifest(&b)
	b.WriteString("]}")
	return b.Bytes()
}

// said is what an answer says that both paths must say alike.
func said(a answer) string {
	if a.Status < 300 {
		d, _ := a.Body["data"].(map[string]any)
		return fmt.Sprintf("%d files=%v missing=%v", a.Status, d["fileCount"], d["missing"])
	}
	j, _ := json.Marshal(map[string]any{"blockedBy": a.Body["blockedBy"], "message": a.Body["message"], "details": a.Body["details"], "actions": a.Body["actions"]})
	return fmt.Sprintf("%d %s", a.Status, j)
}

// A manifest streamed is refused as one read whole was: the same code,
// message and field problems, for entries bad deep in the list, bad by
// the contract or by the service, for bodies that are not JSON and
// bodies that hold no manifest.
func TestManifestStreamedRefusesAsWholeBody(t *testing.T) {
	s := newManifestServer(t, "a", "b")
	a := shaHex("a")
	const n = 1500
	cases := map[string][]byte{
		"sound":             bodyWith(s.project, entries(n, []string{"a", "b"}, nil)),
		"path deep":         bodyWith(s.project, entries(n, []string{"a", "b"}, map[int]string{1234: `{"path":"../x","sha256":"` + a + `","size":1}`})),
		"duplicate deep":    bodyWith(s.project, entries(n, []string{"a", "b"}, map[int]string{1400: `{"path":"assets/000/file-000003.html","sha256":"` + a + `","size":1}`})),
		"several bad":       bodyWith(s.project, entries(n, []string{"a", "b"}, map[int]string{7: `{"path":"a//b","sha256":"` + a + `","size":1}`, 1201: `{"path":"c","sha256":"` + strings.ToUpper(a) + `","size":1}`})),
		"bad then again":    bodyWith(s.project, entries(n, []string{"a", "b"}, map[int]string{10: `{"path":"assets/000/file-000010x","sha256":"` + a + `","size":-1}`, 11: `{"path":"assets/000/file-000010x","sha256":"` + a + `","size":1}`})),
		"size not integer":  bodyWith(s.project, entries(n, []string{"a", "b"}, map[int]string{1000: `{"path":"x.html","sha256":"` + a + `","size":1.5}`})),
		"unknown member":    bodyWith(s.project, entries(n, []string{"a", "b"}, map[int]string{999: `{"path":"y.html","sha256":"` + a + `","size":1,"mode":1}`})),
		"bad hash":          bodyWith(s.project, entries(n, []string{"a", "b"}, map[int]string{500: `{"path":"y.html","sha256":"XYZ","size":1}`})),
		"first entry bad":   bodyWith(s.project, entries(n, []string{"a", "b"}, map[int]string{0: `{"path":"","sha256":"` + a + `","size":1}`})),
		"bidi control":      bodyWith(s.project, entries(n, []string{"a", "b"}, map[int]string{700: `{"path":"a\u202egnp.exe","sha256":"` + a + `","size":1}`})),
		"size mismatch":     bodyWith(s.project, entries(n, []string{"a", "b"}, map[int]string{800: `{"path":"z.html","sha256":"` + a + `","size":5}`})),
		"content missing":   bodyWith(s.project, entries(n, []string{"a", "b"}, map[int]string{900: `{"path":"zz.html","sha256":"` + shaHex("never") + `","size":5}`})),
		"not JSON":          bodyWith(s.project, entries(n, []string{"a"}, nil))[:20000],
		"empty manifest":    []byte(`{"projectId":"` + s.project + `","manifest":[]}`),
		"manifest object":   []byte(`{"projectId":"` + s.project + `","manifest":{"a":[1]}}`),
		"manifest string":   []byte(`{"projectId":"` + s.project + `","manifest":"all"}`),
		"manifest null":     []byte(`{"projectId":"` + s.project + `","manifest":null}`),
		"not an object":     []byte(`[1,2]`),
		"a long array":      []byte("[" + strings.Repeat(`"x",`, 50000) + "1]"),
		"empty body":        []byte(` `),
		"unknown project":   bodyWith("prj_nope", entries(n, []string{"a"}, nil)),
		"no project":        []byte(`{"manifest":[{"path":"a","sha256":"` + a + `","size":1}]}`),
		"unknown top field": append(bodyWith(s.project, entries(3, []string{"a"}, nil))[:0:0], []byte(`{"extra":1,"projectId":"`+s.project+`","manifest":[{"path":"a","sha256":"`+a+`","size":1}]}`)...),
		"invalid UTF-8":     []byte(`{"projectId":"` + s.project + "\",\"manifest\":[{\"path\":\"a\xffb\",\"sha256\":\"" + a + `","size":1}]}`),
		"trailing data":     []byte(`{"projectId":"` + s.project + `","manifest":[{"path":"a","sha256":"` + a + `","size":1}]} {}`),
	}
	for name, body := range cases {
		for _, op := range []struct{ id, path string }{{"find_missing_blobs", "/v1/bundles/missing"}, {"upload_assets", "/v1/bundles"}} {
			s.h.ops[op.id].manifest = false
			whole := s.post(op.path, bytes.NewReader(body), "")
			s.h.ops[op.id].manifest = true
			streamed := s.post(op.path, bytes.NewReader(body), "")
			if w, st := said(whole), said(streamed); w != st {
				t.Errorf("%s, %s:\nwhole    %s\nstreamed %s", name, op.id, w, st)
			}
		}
	}
}

// streamBody is a body written as it is sent, so that the client holds
// none of it; it counts its bytes.
func streamBody(project string, manifest func(io.Writer), size *int64) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		w := &countingWriter{w: pw, n: size}
		fmt.Fprintf(w, `{"projectId":%q,"manifest":[`, project)
		manifest(w)
		io.WriteString(w, "]}")
		pw.Close()
	}()
	return pr
}

type countingWriter struct {
	w io.Writer
	n *int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	*c.n += int64(len(p))
	return c.w.Write(p)
}

// heapPeak runs f and answers by how much the heap in use grew over what
// it was before, at the most, sampled every few milliseconds.
func heapPeak(f func()) uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	before := m.HeapInuse
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
		}
	}()
	f()
	close(done)
	return peak.Load() - min(peak.Load(), before)
}

// TestManifestOf200000FilesStreamedOverHTTP: a 200,000-file manifest
// (about 24 MB of JSON) sent to find_missing_blobs and upload_assets is
// decoded, checked, looked up and written into pages as it arrives: the
// server's heap grows by a fraction of the body, which it never holds
// (what it keeps of each entry is a digest of its path, and only when
// they do not come in path order for an upload).
// A bad entry at the end of as long a list is refused, naming it.
func TestManifestOf200000FilesStreamedOverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 200,000-file manifests")
	}
	contents := make([]string, 64)
	for i := range contents {
		contents[i] = fmt.Sprintf("content %d", i)
	}
	s := newManifestServer(t, contents...)
	// Garbage is collected sooner, so that the peak is what is held.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	for _, op := range []struct{ id, path string }{{"find_missing_blobs", "/v1/bundles/missing"}, {"upload_assets", "/v1/bundles"}} {
		var size int64
		var a answer
		grown := heapPeak(func() {
			a = s.post(op.path, streamBody(s.project, entries(service.MaxManifestFiles, contents, nil), &size), "")
		})
		t.Logf("%s: a %d MiB body of 200,000 entries grew the heap by %d MiB at most", op.id, size>>20, grown>>20)
		d, _ := a.Body["data"].(map[string]any)
		if a.Status >= 300 || d["fileCount"] != float64(service.MaxManifestFiles) {
			t.Fatalf("%s: %d %v", op.id, a.Status, a.Body)
		}
		if grown > uint64(size)/2 {
			t.Errorf("%s: the heap grew by %d MiB for a %d MiB body", op.id, grown>>20, size>>20)
		}
	}
	last := service.MaxManifestFiles - 1
	var size int64
	bad := entries(service.MaxManifestFiles, contents, map[int]string{last: `{"path":"/etc/passwd","sha256":"` + shaHex("x") + `","size":1}`})
	a := s.post("/v1/bundles", streamBody(s.project, bad, &size), "")
	details, _ := a.Body["details"].([]any)
	if a.Status != 400 || a.Body["blockedBy"] != "input:invalid" || len(details) != 1 ||
		details[0].(map[string]any)["field"] != fmt.Sprintf("body.manifest.%d.path", last) {
		t.Fatalf("a bad last entry: %d %v", a.Status, a.Body)
	}
	over := entries(service.MaxManifestFiles+1, contents, nil)
	if a := s.post("/v1/bundles/missing", streamBody(s.project, over, &size), ""); a.Status != 400 || !strings.Contains(fmt.Sprint(a.Body["message"]), "maximum number of items is 200000") {
		t.Fatalf("200,001 entries: %d %v", a.Status, a.Body)
	}
}

// The same key and body streamed again is answered from the first
// answer; the same key with another body is refused.
func TestStreamedManifestIdempotency(t *testing.T) {
	s := newManifestServer(t, "a", "b")
	body := bodyWith(s.project, entries(5000, []string{"a", "b"}, nil))
	first := s.post("/v1/bundles", bytes.NewReader(body), "idem-1")
	again := s.post("/v1/bundles", bytes.NewReader(body), "idem-1")
	d1, _ := first.Body["data"].(map[string]any)
	d2, _ := again.Body["data"].(map[string]any)
	if first.Status != 201 || again.Status != 201 || again.Replayed != "true" || d1["bundleId"] != d2["bundleId"] ||
		d2["deduplicated"] != false || d1["receipt"].(map[string]any)["id"] != d2["receipt"].(map[string]any)["id"] {
		t.Fatalf("replay: %v\n%v", first, again)
	}
	other := bodyWith(s.project, entries(4999, []string{"a", "b"}, nil))
	if a := s.post("/v1/bundles", bytes.NewReader(other), "idem-1"); a.Status != 422 || a.Body["blockedBy"] != "idempotency:key_reused" {
		t.Fatalf("another body with the key: %d %v", a.Status, a.Body)
	}
	// A new key records nothing new: the same files make the same bundle.
	if a := s.post("/v1/bundles", bytes.NewReader(body), "idem-2"); a.Status != 201 || a.Replayed != "" || a.Body["data"].(map[string]any)["deduplicated"] != true {
		t.Fatalf("a new key: %d %v", a.Status, a.Body)
	}
	miss := bodyWith(s.project, entries(3, []string{"a", "never uploaded"}, nil))
	m1 := s.post("/v1/bundles/missing", bytes.NewReader(miss), "idem-3")
	m2 := s.post("/v1/bundles/missing", bytes.NewReader(miss), "idem-3")
	if m1.Status != 200 || said(m1) != said(m2) || len(m1.Body["data"].(map[string]any)["missing"].([]any)) != 1 {
		t.Fatalf("find_missing_blobs replay: %v\n%v", m1, m2)
	}
}
