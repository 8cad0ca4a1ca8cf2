package edge

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/andybalholm/brotli"

	"github.com/pierhq/pier/server/internal/store"
)

// countingSites counts the compressed forms the edge makes and keeps.
type countingSites struct {
	Sites
	puts atomic.Int64
}

func (c *countingSites) PutBlobForms(ctx context.Context, sha string, f store.Forms) error {
	c.puts.Add(1)
	return c.Sites.PutBlobForms(ctx, sha, f)
}

func decode(t *testing.T, enc string, body []byte) []byte {
	t.Helper()
	var r io.Reader
	switch enc {
	case "":
		return body
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	case "br":
		r = brotli.NewReader(bytes.NewReader(body))
	default:
		t.Fatalf("Content-Encoding %q", enc)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s body: %v", enc, err)
	}
	return out
}

// TestEncodingNegotiation: a compressible file is sent as brotli, gzip or
// as it is, by Accept-Encoding with its q-values; every answer says Vary:
// Accept-Encoding and carries its own encoding's ETag, which a 304 answers
// to; HEAD answers the same headers without a body; types that are
// compressed already and files too small to gain are sent as they are,
// without Vary.
func TestEncodingNegotiation(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		page := []byte("<!doctype html>" + strings.Repeat("<p>Hello, compressible world.</p>\n", 200))
		png := make([]byte, 4096)
		rand.Read(png)
		files := map[string][]byte{"index.html": page, "img.png": png, "tiny.css": []byte("body{}")}
		const host = "site--prj.localhost"
		st := sites(t, db, files, host)
		e := New(FromStore(st), slog.New(slog.DiscardHandler))
		do := func(method, path string, h http.Header) *httptest.ResponseRecorder {
			t.Helper()
			req := httptest.NewRequest(method, path, nil)
			req.Host = host
			req.Header = h
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			return rec
		}
		plain := do("GET", "/", http.Header{})
		tag := plain.Header().Get("Etag")
		if plain.Code != 200 || len(tag) != 34 {
			t.Fatalf("no Accept-Encoding: %d, ETag %q", plain.Code, tag)
		}
		etags := map[string]string{"": tag, "gzip": tag[:33] + `-gzip"`, "br": tag[:33] + `-br"`}

		for _, c := range acceptEncodingCases {
			t.Run(c.ae, func(t *testing.T) {
				negotiated(t, do, page, etags, c.ae, c.want)
			})
		}

		for _, p := range []string{"/img.png", "/tiny.css"} {
			rec := do("GET", p, http.Header{"Accept-Encoding": {"br, gzip"}})
			if rec.Code != 200 || rec.Header().Get("Content-Encoding") != "" || rec.Header().Get("Vary") != "" ||
				!bytes.Equal(rec.Body.Bytes(), files[strings.TrimPrefix(p, "/")]) {
				t.Fatalf("%s: %d %v", p, rec.Code, rec.Header())
			}
		}
		// The 404 page is negotiated as well.
		if rec := do("GET", "/missing", http.Header{"Accept-Encoding": {"br"}}); rec.Code != 404 {
			t.Fatalf("missing, no 404.html: %d", rec.Code)
		}
	})
}

// acceptEncodingCases are Accept-Encoding headers and the encoding each
// should get for a compressible page.
var acceptEncodingCases = []struct{ ae, want string }{
	{"", ""},
	{"br", "br"},
	{"gzip", "gzip"},
	{"x-gzip", "gzip"},
	{"GZIP", "gzip"},
	{"gzip, deflate, br", "br"},
	{"gzip, br;q=0", "gzip"},
	{"br;q=0, gzip;q=0", ""},
	{"gzip;q=0.0", ""},
	{"gzip;q=0.000, br", "br"},
	{"gzip;q=1.0, br;q=0.5", "gzip"},
	{"br;q=0.5, gzip;q=0.5", "br"},
	{"*", "br"},
	{"*;q=0", ""},
	{"gzip;q=0, *", "br"},
	{"br;q=0, *;q=0.1", "gzip"},
	{"identity", ""},
	{"identity;q=1, gzip;q=0.5", ""},
	{"identity;q=0", ""},
	{"deflate", ""},
	{"gzip;q=bad", ""},
	{"br;q=2, gzip", "gzip"},
}

// negotiated wants GET / with Accept-Encoding ae answered in the encoding
// want, with its own ETag and length, decoding to page; HEAD to answer
// alike; and each encoding's ETag to get a 304 only for its own encoding.
func negotiated(t *testing.T, do func(method, path string, h http.Header) *httptest.ResponseRecorder, page []byte, etags map[string]string, ae, want string) {
	t.Helper()
	h := http.Header{}
	if ae != "" {
		h.Set("Accept-Encoding", ae)
	}
	rec := do("GET", "/", h)
	got := rec.Header().Get("Content-Encoding")
	if rec.Code != 200 || got != want {
		t.Fatalf("%d, Content-Encoding %q, want %q", rec.Code, got, want)
	}
	if rec.Header().Get("Vary") != "Accept-Encoding" || rec.Header().Get("Etag") != etags[want] {
		t.Fatalf("Vary %q, ETag %q, want %q", rec.Header().Get("Vary"), rec.Header().Get("Etag"), etags[want])
	}
	if rec.Header().Get("Content-Length") != strconv.Itoa(rec.Body.Len()) {
		t.Fatalf("Content-Length %s for %d bytes", rec.Header().Get("Content-Length"), rec.Body.Len())
	}
	if body := decode(t, got, rec.Body.Bytes()); !bytes.Equal(body, page) {
		t.Fatalf("%q body decodes to %d bytes, want the page's %d", got, len(body), len(page))
	}
	if got != "" && rec.Body.Len() >= len(page)/2 {
		t.Fatalf("%s form of %d bytes for a page of %d", got, rec.Body.Len(), len(page))
	}

	// HEAD: the same headers, no body.
	head := do("HEAD", "/", h)
	if head.Code != 200 || head.Body.Len() != 0 || head.Header().Get("Content-Encoding") != got ||
		head.Header().Get("Etag") != etags[want] || head.Header().Get("Content-Length") != rec.Header().Get("Content-Length") {
		t.Fatalf("HEAD: %d, %d bytes, %v", head.Code, head.Body.Len(), head.Header())
	}

	// The encoding's own ETag gets a 304 that names it; another
	// encoding's gets the full answer.
	for enc, etag := range etags {
		h := h.Clone()
		h.Set("If-None-Match", etag)
		r := do("GET", "/", h)
		if enc == want {
			if r.Code != 304 || r.Body.Len() != 0 || r.Header().Get("Etag") != etag || r.Header().Get("Vary") != "Accept-Encoding" {
				t.Fatalf("If-None-Match %s: %d %v", etag, r.Code, r.Header())
			}
		} else if r.Code != 200 || r.Header().Get("Etag") != etags[want] {
			t.Fatalf("If-None-Match %s, another encoding's: %d %v", etag, r.Code, r.Header())
		}
	}
}

// TestFormsAreMadeOncePerContent: the compressed forms of a content are
// made the first time any site serves it and kept in the store by its
// hash; another site with the same content, an edge started afresh (a
// restart, another replica) and a later launch read them instead of
// compressing again.
func TestFormsAreMadeOncePerContent(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		page := []byte(strings.Repeat("<p>the same page on two sites</p>\n", 100))
		const a, b = "a--p.localhost", "b--q.localhost"
		st := sites(t, db, map[string][]byte{"index.html": page, "copy.html": page}, a, b)
		counted := &countingSites{Sites: FromStore(st)}
		get := func(e *Edge, host, path string) []byte {
			t.Helper()
			req := httptest.NewRequest("GET", path, nil)
			req.Host = host
			req.Header.Set("Accept-Encoding", "br")
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			if rec.Code != 200 || rec.Header().Get("Content-Encoding") != "br" {
				t.Fatalf("%s%s: %d %v", host, path, rec.Code, rec.Header())
			}
			return rec.Body.Bytes()
		}
		first := NewWithLimits(counted, slog.New(slog.DiscardHandler), DefaultLimits)
		want := get(first, a, "/")
		get(first, a, "/copy.html")
		get(first, b, "/")
		second := NewWithLimits(counted, slog.New(slog.DiscardHandler), DefaultLimits)
		if got := get(second, b, "/copy.html"); !bytes.Equal(got, want) {
			t.Fatal("the kept brotli form differs from the one first served")
		}
		if n := counted.puts.Load(); n != 1 {
			t.Fatalf("forms made %d times for one content, want once", n)
		}
		var rows int
		if err := st.DB().QueryRow(`SELECT COUNT(*) FROM blob_forms`).Scan(&rows); err != nil || rows != 3 {
			t.Fatalf("blob_forms rows: %d %v, want gzip, br and the record that they were made", rows, err)
		}
	})
}
