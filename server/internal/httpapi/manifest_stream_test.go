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
	"strings"
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
