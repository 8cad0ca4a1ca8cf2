// Package edge serves launched static sites by Host, over HTTP and HTTPS:
// preview hosts (<service>--<project>.<preview domain>) and launched domains.
// Sites are loaded from the store once and kept in memory with their gzip
// variants and ETags, so a request is a map lookup and a write.
package edge

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

// File is one entry of a bundle's manifest.
type File struct {
	Path        string `json:"path"`
	SHA256      string `json:"sha256"`
	Size        int64  `json:"size"`
	ContentType string `json:"contentType"`
}

type file struct {
	data, gz []byte
	etag     string
	ctype    string
	// Header values, kept as the slices a header map holds so that a
	// response assigns them without canonicalizing keys or allocating.
	ctypeH, cacheH, etagH, lengthH, gzLengthH []string
	// The same answers as bytes for the fast path (see Prepared): status
	// line and header lines as net/http writes them, without Date.
	head200, head200gz, head304, head404, head404gz []byte
}

// Header values shared by every file; net/http only reads them.
var (
	nosniffH = []string{"nosniff"}
	varyH    = []string{"Accept-Encoding"}
	gzipH    = []string{"gzip"}
)

type site struct {
	serviceID, bundleID string
	updated             time.Time
	files               map[string]*file
	notFound            *file
	checked             time.Time
}

// Edge is the site-serving handler.
type Edge struct {
	store *store.Store
	log   *slog.Logger

	mu    sync.RWMutex
	sites map[string]*site // by host; nil entry caches "no site"
	load  sync.Mutex
}

// revalidate bounds how long a replica serves a site after another replica
// changed it; this process invalidates its own changes at once.
const revalidate = 2 * time.Second

// New returns an edge over the store.
func New(st *store.Store, log *slog.Logger) *Edge {
	return &Edge{store: st, log: log, sites: map[string]*site{}}
}

// Invalidate forgets every cached site of a service, after a deploy or a
// teardown.
func (e *Edge) Invalidate(hosts ...string) {
	e.mu.Lock()
	for _, h := range hosts {
		delete(e.sites, strings.ToLower(h))
	}
	e.mu.Unlock()
}

func hostOnly(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// Has reports whether a live site answers for host.
func (e *Edge) Has(ctx context.Context, host string) bool {
	s, _ := e.siteFor(ctx, hostOnly(host))
	return s != nil
}

func (e *Edge) siteFor(ctx context.Context, host string) (*site, error) {
	e.mu.RLock()
	s, ok := e.sites[host]
	e.mu.RUnlock()
	if ok && (s == nil || time.Since(s.checked) < revalidate) {
		if s == nil {
			return nil, nil
		}
		return s, nil
	}
	e.load.Lock()
	defer e.load.Unlock()
	svc, err := e.store.ServiceByHost(ctx, host)
	if errors.Is(err, store.ErrNotFound) {
		e.mu.Lock()
		e.sites[host] = nil
		e.mu.Unlock()
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if s != nil && s.serviceID == svc.ID && s.bundleID == svc.BundleID && s.updated.Equal(svc.UpdatedAt) {
		e.mu.Lock()
		s.checked = time.Now()
		e.mu.Unlock()
		return s, nil
	}
	s, err = e.build(ctx, svc)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.sites[host] = s
	e.mu.Unlock()
	return s, nil
}

func (e *Edge) build(ctx context.Context, svc store.Service) (*site, error) {
	b, err := e.store.GetBundle(ctx, svc.OrgID, svc.BundleID)
	if err != nil {
		return nil, err
	}
	var manifest []File
	if err := json.Unmarshal([]byte(b.Manifest), &manifest); err != nil {
		return nil, err
	}
	s := &site{serviceID: svc.ID, bundleID: svc.BundleID, updated: svc.UpdatedAt, checked: time.Now(), files: map[string]*file{}}
	for _, m := range manifest {
		data, err := e.store.Blob(ctx, m.SHA256)
		if err != nil {
			return nil, err
		}
		f := &file{data: data, etag: `"` + m.SHA256[:32] + `"`, ctype: m.ContentType, lengthH: []string{strconv.Itoa(len(data))}}
		if f.ctype == "" {
			f.ctype = ContentType(m.Path)
		}
		f.ctypeH, f.etagH = []string{f.ctype}, []string{f.etag}
		if strings.HasSuffix(m.Path, ".html") {
			f.cacheH = []string{"public, max-age=0, must-revalidate"}
		} else {
			f.cacheH = []string{"public, max-age=3600"}
		}
		if compressible(f.ctype) && len(data) > 256 {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
			zw.Write(data)
			zw.Close()
			if buf.Len() < len(data)*9/10 {
				f.gz = buf.Bytes()
				f.gzLengthH = []string{strconv.Itoa(len(f.gz))}
			}
		}
		f.head200, f.head304 = f.head("200 OK", false, true), f.head("304 Not Modified", false, true)
		if f.gz != nil {
			f.head200gz = f.head("200 OK", true, true)
		}
		s.files["/"+m.Path] = f
	}
	s.notFound = s.files["/404.html"]
	if f := s.notFound; f != nil {
		f.head404 = f.head("404 Not Found", false, false)
		if f.gz != nil {
			f.head404gz = f.head("404 Not Found", true, false)
		}
	}
	return s, nil
}

// ContentType names a file's media type by its extension.
func ContentType(p string) string {
	ext := strings.ToLower(path.Ext(p))
	switch ext {
	case ".html", ".htm":
		return "text/html; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".json", ".map":
		return "application/json"
	case ".svg":
		return "image/svg+xml"
	case ".txt":
		return "text/plain; charset=utf-8"
	case ".wasm":
		return "application/wasm"
	case ".webmanifest":
		return "application/manifest+json"
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}

func compressible(ctype string) bool {
	return strings.HasPrefix(ctype, "text/") || strings.Contains(ctype, "javascript") || strings.Contains(ctype, "json") ||
		strings.Contains(ctype, "xml") || strings.Contains(ctype, "svg") || ctype == "application/wasm"
}

func (e *Edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := hostOnly(r.Host)
	s, err := e.siteFor(r.Context(), host)
	if err != nil {
		e.log.Error("edge: loading site", "host", host, "err", err)
		http.Error(w, "site unavailable; retry shortly", http.StatusServiceUnavailable)
		return
	}
	h := w.Header()
	if s == nil {
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte("No site is launched at " + host + ".\n"))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	f, status := s.lookup(r.URL.Path)
	if f == nil {
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte("404 page not found\n"))
		return
	}
	h["Content-Type"] = f.ctypeH
	h["Cache-Control"] = f.cacheH
	h["X-Content-Type-Options"] = nosniffH
	if f.gz != nil {
		h["Vary"] = varyH
	}
	if status == http.StatusOK {
		h["Etag"] = f.etagH
		if inm := first(r.Header["If-None-Match"]); inm != "" && etagMatch(inm, f.etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	body, length := f.data, f.lengthH
	if f.gz != nil && acceptsGzip(first(r.Header["Accept-Encoding"])) {
		body, length = f.gz, f.gzLengthH
		h["Content-Encoding"] = gzipH
	}
	h["Content-Length"] = length
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// headerValue is a header value as net/http writes it: line breaks become
// spaces and surrounding blanks are trimmed.
var headerValue = strings.NewReplacer("\n", " ", "\r", " ")

// head is the status line and header lines ServeHTTP's answer gets from
// net/http, in its order (sorted by key), without Date and the final blank
// line. A 304 carries no Content-Type or Content-Length, as net/http drops
// them.
func (f *file) head(status string, gz, etag bool) []byte {
	b := []byte("HTTP/1.1 " + status + "\r\n")
	add := func(k, v string) {
		b = append(b, k...)
		b = append(b, ": "...)
		b = append(b, strings.Trim(headerValue.Replace(v), " \t")...)
		b = append(b, "\r\n"...)
	}
	notModified := strings.HasPrefix(status, "304")
	add("Cache-Control", f.cacheH[0])
	if !notModified {
		if gz {
			add("Content-Encoding", "gzip")
			add("Content-Length", f.gzLengthH[0])
		} else {
			add("Content-Length", f.lengthH[0])
		}
		add("Content-Type", f.ctype)
	}
	if etag {
		add("Etag", f.etag)
	}
	if f.gz != nil {
		add("Vary", "Accept-Encoding")
	}
	add("X-Content-Type-Options", "nosniff")
	return b
}

// Prepared is ServeHTTP's answer to a GET for host and urlPath with the
// given If-None-Match and Accept-Encoding values, as bytes: head is the
// status line and header lines without Date and the final blank line (it
// starts "HTTP/1.1 "), body the body (nil for 304; a HEAD sends none).
// ok is false when ServeHTTP would answer otherwise than from a file (no
// site, a site failing to load, no file and no 404.html); the caller then
// leaves the request to ServeHTTP. Callers must not modify the slices.
func (e *Edge) Prepared(ctx context.Context, host, urlPath, ifNoneMatch, acceptEncoding string) (head, body []byte, ok bool) {
	s, err := e.siteFor(ctx, hostOnly(host))
	if err != nil || s == nil {
		return nil, nil, false
	}
	f, status := s.lookup(urlPath)
	if f == nil {
		return nil, nil, false
	}
	if status == http.StatusOK && ifNoneMatch != "" && etagMatch(ifNoneMatch, f.etag) {
		return f.head304, nil, true
	}
	gz := f.gz != nil && acceptsGzip(acceptEncoding)
	switch {
	case status == http.StatusOK && gz:
		return f.head200gz, f.gz, true
	case status == http.StatusOK:
		return f.head200, f.data, true
	case gz:
		return f.head404gz, f.gz, true
	default:
		return f.head404, f.data, true
	}
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// lookup maps a URL path to a file: the exact file, then dir/index.html,
// then .html, then the site's 404.html with status 404.
func (s *site) lookup(p string) (*file, int) {
	if p == "" {
		p = "/"
	}
	p = path.Clean(p)
	if p != "/" {
		if f, ok := s.files[p]; ok {
			return f, http.StatusOK
		}
	}
	if f, ok := s.files[strings.TrimSuffix(p, "/")+"/index.html"]; ok {
		return f, http.StatusOK
	}
	if f, ok := s.files[p+".html"]; ok {
		return f, http.StatusOK
	}
	if s.notFound != nil {
		return s.notFound, http.StatusNotFound
	}
	return nil, http.StatusNotFound
}

func etagMatch(header, etag string) bool {
	for _, part := range strings.Split(header, ",") {
		part = strings.TrimSpace(part)
		if part == "*" || part == etag || strings.TrimPrefix(part, "W/") == etag {
			return true
		}
	}
	return false
}

func acceptsGzip(ae string) bool {
	for _, part := range strings.Split(ae, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") {
			return !strings.Contains(strings.ReplaceAll(params, " ", ""), "q=0") || strings.Contains(params, "q=0.")
		}
	}
	return false
}
