// Package edge serves launched static sites by Host, over HTTP and HTTPS:
// preview hosts (<service>--<project>.<preview domain>) and launched domains.
//
// Memory is bounded however many sites launch and whatever Hosts clients
// send. A site in memory is only its manifest: paths, types, hashes. File
// bodies come from one content-addressed hot cache shared by every site,
// keyed by SHA-256 and bounded by a byte budget, in front of the store's
// deduplicated blobs; a hundred launches of one site hold one copy. Sites
// and the answers for unknown hosts are kept in bounded caches too, and a
// Host that is not a valid DNS name is answered without a lookup.
package edge

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/pierhq/pier/server/internal/cache"
	sitepkg "github.com/pierhq/pier/server/internal/site"
	"github.com/pierhq/pier/server/internal/store"
)

// File is one entry of a bundle's manifest (package site's).
type File = sitepkg.File

// file is a site's entry for one path: what to answer with, without the
// body, which lives in the blob cache under sha.
type file struct {
	sha   string
	etag  string
	ctype string
	// Header values, kept as the slices a header map holds so that a
	// response assigns them without canonicalizing keys or allocating.
	ctypeH, cacheH, etagH []string

	// heads are the answers as bytes for the fast path (see Prepared),
	// made once the body's sizes are known.
	headsOnce sync.Once
	heads     *heads
}

// heads are a file's status line and header lines as net/http writes
// them, without Date.
type heads struct {
	head200, head200gz, head304, head404, head404gz []byte
}

// blob is a file body in the hot cache, with its gzip variant when that is
// worth sending.
type blob struct {
	data, gz           []byte
	lengthH, gzLengthH []string
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

	// A process or worker service: proxy forwards to where its serving
	// version answers (nil for a worker, or while none answers), and
	// down says why nothing does.
	runs  bool
	proxy http.Handler
	down  string
}

// Limits bound the edge's memory.
type Limits struct {
	// HotCacheBytes bounds the file bodies (and their gzip variants) kept
	// in memory across every site.
	HotCacheBytes int64
	// Sites bounds the sites kept in memory, and Files their manifests'
	// entries in total.
	Sites, Files int
	// UnknownHosts bounds the remembered answers for hosts with no site.
	UnknownHosts int
}

// DefaultLimits are the edge's defaults.
var DefaultLimits = Limits{HotCacheBytes: 256 << 20, Sites: 10_000, Files: 1_000_000, UnknownHosts: 4096}

// Sites is what the edge reads from the domain: the live service that
// answers for a host, its bundle, and the bundle's content-addressed blobs.
type Sites interface {
	ServiceByHost(ctx context.Context, host string) (store.Service, error)
	Bundle(ctx context.Context, orgID, id string) (store.Bundle, error)
	Blob(ctx context.Context, sha string) ([]byte, error)
}

// FromStore reads sites from the store.
func FromStore(st *store.Store) Sites { return storeSites{st} }

type storeSites struct{ st *store.Store }

func (s storeSites) ServiceByHost(ctx context.Context, host string) (store.Service, error) {
	return s.st.Services().ByHost(ctx, host)
}

func (s storeSites) Bundle(ctx context.Context, orgID, id string) (store.Bundle, error) {
	return s.st.Bundles().Get(ctx, orgID, id)
}

func (s storeSites) Blob(ctx context.Context, sha string) ([]byte, error) {
	return s.st.Bundles().Blob(ctx, sha)
}

// Edge is the site-serving handler.
type Edge struct {
	store Sites
	log   *slog.Logger

	sites   *cache.Cache[string, *site]
	missing *cache.Cache[string, time.Time]
	blobs   *cache.Cache[string, *blob]
	loads   singleflight.Group
}

// revalidate bounds how long a replica serves a site after another replica
// changed it; this process invalidates its own changes at once.
const revalidate = 2 * time.Second

// New returns an edge over sites with the default limits.
func New(st Sites, log *slog.Logger) *Edge { return NewWithLimits(st, log, DefaultLimits) }

// NewWithLimits returns an edge over sites; zero limits take the defaults.
func NewWithLimits(st Sites, log *slog.Logger, l Limits) *Edge {
	d := DefaultLimits
	if l.HotCacheBytes <= 0 {
		l.HotCacheBytes = d.HotCacheBytes
	}
	if l.Sites <= 0 {
		l.Sites = d.Sites
	}
	if l.Files <= 0 {
		l.Files = d.Files
	}
	if l.UnknownHosts <= 0 {
		l.UnknownHosts = d.UnknownHosts
	}
	return &Edge{
		store:   st,
		log:     log,
		sites:   cache.New(l.Sites, int64(l.Files), func(_ string, s *site) int64 { return int64(len(s.files)) + 1 }),
		missing: cache.New[string, time.Time](l.UnknownHosts, 0, nil),
		blobs:   cache.New(1<<20, l.HotCacheBytes, func(_ string, b *blob) int64 { return int64(len(b.data)+len(b.gz)) + 64 }),
	}
}

// HotCacheBytes is what the hot cache holds now, for tests and metrics.
func (e *Edge) HotCacheBytes() int64 { return e.blobs.Cost() }

// Invalidate forgets every cached site of a service, after a deploy or a
// teardown.
func (e *Edge) Invalidate(hosts ...string) {
	for _, h := range hosts {
		h = strings.ToLower(h)
		e.sites.Delete(h)
		e.missing.Delete(h)
	}
}

func hostOnly(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// ValidHost reports whether h (lower case, no port) could name a site: a
// DNS name of at most 253 octets in labels of letters, digits and hyphens.
// Anything else is answered without a lookup and remembered nowhere.
func ValidHost(h string) bool {
	if len(h) == 0 || len(h) > 253 {
		return false
	}
	label := 0
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c == '.':
			if label == 0 {
				return false
			}
			label = 0
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			label++
			if label > 63 {
				return false
			}
		default:
			return false
		}
	}
	return label > 0
}

// Has reports whether a live site answers for host.
func (e *Edge) Has(ctx context.Context, host string) bool {
	s, _ := e.siteFor(ctx, hostOnly(host))
	return s != nil
}

func (e *Edge) siteFor(ctx context.Context, host string) (*site, error) {
	if !ValidHost(host) {
		return nil, nil
	}
	if at, ok := e.missing.Get(host); ok && time.Since(at) < revalidate {
		return nil, nil
	}
	s, ok := e.sites.Get(host)
	if ok && time.Since(s.checked) < revalidate {
		return s, nil
	}
	v, err, _ := e.loads.Do("site\x00"+host, func() (any, error) {
		ctx := context.WithoutCancel(ctx)
		svc, err := e.store.ServiceByHost(ctx, host)
		if errors.Is(err, store.ErrNotFound) {
			e.sites.Delete(host)
			e.missing.Put(host, time.Now())
			return (*site)(nil), nil
		}
		if err != nil {
			return nil, err
		}
		if s != nil && s.serviceID == svc.ID && s.bundleID == svc.BundleID && s.updated.Equal(svc.UpdatedAt) {
			fresh := *s
			fresh.checked = time.Now()
			e.sites.Put(host, &fresh)
			return &fresh, nil
		}
		ns, err := e.build(ctx, svc)
		if err != nil {
			return nil, err
		}
		e.missing.Delete(host)
		e.sites.Put(host, ns)
		return ns, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*site), nil
}

func (e *Edge) build(ctx context.Context, svc store.Service) (*site, error) {
	if svc.Target == "process" || svc.Target == "worker" {
		s := &site{serviceID: svc.ID, bundleID: svc.BundleID, updated: svc.UpdatedAt, checked: time.Now(), runs: true}
		switch {
		case svc.State == "crashed":
			s.down = "The service crashed: its process kept exiting. Its owner can read its logs, relaunch it or roll it back."
		case svc.Target == "worker":
			s.down = "This service is a worker: it runs in the background and answers no HTTP."
		case svc.Upstream == "":
			s.down = "The service is starting; retry in a moment."
		default:
			s.proxy = e.proxyTo(svc.Upstream)
		}
		return s, nil
	}
	b, err := e.store.Bundle(ctx, svc.OrgID, svc.BundleID)
	if err != nil {
		return nil, err
	}
	var manifest []File
	if err := json.Unmarshal([]byte(b.Manifest), &manifest); err != nil {
		return nil, err
	}
	s := &site{serviceID: svc.ID, bundleID: svc.BundleID, updated: svc.UpdatedAt, checked: time.Now(), files: make(map[string]*file, len(manifest))}
	for _, m := range manifest {
		f := &file{sha: m.SHA256, etag: `"` + m.SHA256[:32] + `"`, ctype: m.ContentType}
		if f.ctype == "" {
			f.ctype = ContentType(m.Path)
		}
		f.ctypeH, f.etagH = []string{f.ctype}, []string{f.etag}
		if strings.HasSuffix(m.Path, ".html") {
			f.cacheH = []string{"public, max-age=0, must-revalidate"}
		} else {
			f.cacheH = []string{"public, max-age=3600"}
		}
		s.files["/"+m.Path] = f
	}
	s.notFound = s.files["/404.html"]
	return s, nil
}

// body returns a file's body from the hot cache, loading it from the
// store's blobs (once, however many requests ask at the same moment) when
// it is not there.
func (e *Edge) body(ctx context.Context, f *file) (*blob, error) {
	if b, ok := e.blobs.Get(f.sha); ok {
		return b, nil
	}
	v, err, _ := e.loads.Do("blob\x00"+f.sha, func() (any, error) {
		data, err := e.store.Blob(context.WithoutCancel(ctx), f.sha)
		if err != nil {
			return nil, err
		}
		b := &blob{data: data, lengthH: []string{strconv.Itoa(len(data))}}
		if compressible(f.ctype) && len(data) > 256 {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
			zw.Write(data)
			zw.Close()
			if buf.Len() < len(data)*9/10 {
				b.gz = buf.Bytes()
				b.gzLengthH = []string{strconv.Itoa(len(b.gz))}
			}
		}
		// A body larger than the whole budget is served without being kept.
		e.blobs.Put(f.sha, b)
		return b, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*blob), nil
}

// headsFor makes a file's prepared answers once its body's sizes are
// known. The gzip variant is deterministic, so a body evicted and loaded
// again has the same sizes.
func (f *file) headsFor(b *blob) *heads {
	f.headsOnce.Do(func() {
		h := &heads{head200: f.head("200 OK", b, false, true), head304: f.head("304 Not Modified", b, false, true)}
		if b.gz != nil {
			h.head200gz = f.head("200 OK", b, true, true)
		}
		h.head404 = f.head("404 Not Found", b, false, false)
		if b.gz != nil {
			h.head404gz = f.head("404 Not Found", b, true, false)
		}
		f.heads = h
	})
	return f.heads
}

// ContentType names a file's media type by its extension (package site's).
func ContentType(p string) string { return sitepkg.ContentType(p) }

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
		NotFound(w, host)
		return
	}
	if s.runs {
		if s.proxy == nil {
			h.Set("Retry-After", "5")
			h.Set("Cache-Control", "no-store")
			http.Error(w, s.down, http.StatusServiceUnavailable)
			return
		}
		s.proxy.ServeHTTP(w, r)
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
	b, err := e.body(r.Context(), f)
	if err != nil {
		e.log.Error("edge: loading file", "host", host, "sha256", f.sha, "err", err)
		http.Error(w, "site unavailable; retry shortly", http.StatusServiceUnavailable)
		return
	}
	h["Content-Type"] = f.ctypeH
	h["Cache-Control"] = f.cacheH
	h["X-Content-Type-Options"] = nosniffH
	if b.gz != nil {
		h["Vary"] = varyH
	}
	if status == http.StatusOK {
		h["Etag"] = f.etagH
		if inm := first(r.Header["If-None-Match"]); inm != "" && etagMatch(inm, f.etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	body, length := b.data, b.lengthH
	if b.gz != nil && acceptsGzip(first(r.Header["Accept-Encoding"])) {
		body, length = b.gz, b.gzLengthH
		h["Content-Encoding"] = gzipH
	}
	h["Content-Length"] = length
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// notFoundPage is Pier's answer for a host with no site: a torn-down
// service's preview host, a name never launched.
const notFoundPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>No site here</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;color:#222}code{background:#f3f3f3;padding:0 .25em}</style>
</head><body>
<h1>No site is launched here</h1>
<p>Nothing is served at <code>%s</code>. The site may have been torn down, or never launched.</p>
<p>Served by Pier.</p>
</body></html>
`

// NotFound writes Pier's 404 page for a host with no site.
func NotFound(w http.ResponseWriter, host string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h["X-Content-Type-Options"] = nosniffH
	w.WriteHeader(http.StatusNotFound)
	display := host
	if !ValidHost(host) {
		display = "this address"
	}
	w.Write([]byte(strings.Replace(notFoundPage, "%s", display, 1)))
}

// headerValue is a header value as net/http writes it: line breaks become
// spaces and surrounding blanks are trimmed.
var headerValue = strings.NewReplacer("\n", " ", "\r", " ")

// head is the status line and header lines ServeHTTP's answer gets from
// net/http, in its order (sorted by key), without Date and the final blank
// line. A 304 carries no Content-Type or Content-Length, as net/http drops
// them.
func (f *file) head(status string, b *blob, gz, etag bool) []byte {
	out := []byte("HTTP/1.1 " + status + "\r\n")
	add := func(k, v string) {
		out = append(out, k...)
		out = append(out, ": "...)
		out = append(out, strings.Trim(headerValue.Replace(v), " \t")...)
		out = append(out, "\r\n"...)
	}
	notModified := strings.HasPrefix(status, "304")
	add("Cache-Control", f.cacheH[0])
	if !notModified {
		if gz {
			add("Content-Encoding", "gzip")
			add("Content-Length", b.gzLengthH[0])
		} else {
			add("Content-Length", b.lengthH[0])
		}
		add("Content-Type", f.ctype)
	}
	if etag {
		add("Etag", f.etag)
	}
	if b.gz != nil {
		add("Vary", "Accept-Encoding")
	}
	add("X-Content-Type-Options", "nosniff")
	return out
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
	if err != nil || s == nil || s.runs {
		return nil, nil, false
	}
	f, status := s.lookup(urlPath)
	if f == nil {
		return nil, nil, false
	}
	b, err := e.body(ctx, f)
	if err != nil {
		return nil, nil, false
	}
	h := f.headsFor(b)
	if status == http.StatusOK && ifNoneMatch != "" && etagMatch(ifNoneMatch, f.etag) {
		return h.head304, nil, true
	}
	gz := b.gz != nil && acceptsGzip(acceptEncoding)
	switch {
	case status == http.StatusOK && gz:
		return h.head200gz, b.gz, true
	case status == http.StatusOK:
		return h.head200, b.data, true
	case gz:
		return h.head404gz, b.gz, true
	default:
		return h.head404, b.data, true
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

// acceptsGzip reads Accept-Encoding as RFC 9110 §12.5.3 has it: gzip (or
// x-gzip) with a q-value above 0, or else "*" with one; "gzip;q=0" (and
// "q=0.0", "q=0.000") refuses it.
func acceptsGzip(ae string) bool {
	star := false
	for part := range strings.SplitSeq(ae, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		name = strings.TrimSpace(name)
		q := qValue(params)
		switch {
		case strings.EqualFold(name, "gzip"), strings.EqualFold(name, "x-gzip"):
			return q > 0
		case name == "*":
			star = q > 0
		}
	}
	return star
}

// qValue is the weight among a coding's parameters: 1 when absent, 0 when
// malformed (a client that garbles it is not sent gzip).
func qValue(params string) float64 {
	for p := range strings.SplitSeq(params, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || q < 0 || q > 1 {
			return 0
		}
		return q
	}
	return 1
}

// Static reports whether a live static site answers for host: its answers
// are files and short pages, never streamed or proxied.
func (e *Edge) Static(ctx context.Context, host string) bool {
	s, _ := e.siteFor(ctx, hostOnly(host))
	return s != nil && !s.runs
}
