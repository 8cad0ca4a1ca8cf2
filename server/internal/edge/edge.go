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
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/pierhq/pier/server/internal/cache"
	"github.com/pierhq/pier/server/internal/httpheader"
	sitepkg "github.com/pierhq/pier/server/internal/site"
	"github.com/pierhq/pier/server/internal/store"
)

// File is one entry of a bundle's manifest (package site's).
type File = sitepkg.File

// file is a site's entry for one path: what to answer with, without the
// body, which lives in the blob cache under sha.
type file struct {
	sha   string
	ctype string
	// Header values, kept as the slices a header map holds so that a
	// response assigns them without canonicalizing keys or allocating.
	ctypeH, cacheH []string

	// heads are the file's ETags and its answers as bytes for the fast
	// path (see Prepared), made once its body's sizes are known.
	heads atomic.Pointer[heads]
}

// heads are a file's ETags, by encoding, and its status lines and header
// lines as net/http writes them, without Date, for the sizes of the forms
// they were made for.
type heads struct {
	sizes                 [encodings]int
	etags                 [encodings]string
	etagH                 [encodings][]string
	ok, notModified, miss [encodings][]byte
}

// blob is a file body in the hot cache, by encoding: the body itself and
// the compressed forms worth sending (nil otherwise).
type blob struct {
	forms   [encodings][]byte
	lengthH [encodings][]string
	// varies is true when the blob has a compressed form: its answers
	// then depend on Accept-Encoding.
	varies bool
	// withForms is true when the blob was loaded with its forms; content
	// first served with a type that is not compressed is loaded again
	// for one that is.
	withForms bool
	// files hold the forms of at least SendfileMin bytes for sendfile
	// (bodyfile.go); fileBytes counts those held in memory the kernel
	// cannot reclaim (memfds), in the budget.
	files     [encodings]*os.File
	fileBytes int64
}

func (b *blob) size() int64 {
	return int64(len(b.forms[identity])+len(b.forms[gzipped])+len(b.forms[brotlied])) + b.fileBytes
}

// Header values shared by every file; net/http only reads them.
var (
	nosniffH = []string{"nosniff"}
	varyH    = []string{"Accept-Encoding"}
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
	runs     bool
	proxy    http.Handler
	upstream string
	down     string
}

// Limits bound the edge's memory.
type Limits struct {
	// HotCacheBytes bounds the file bodies (and their compressed forms) kept
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
// answers for a host, its bundle, and the bundle's content-addressed blobs
// with their compressed forms. The edge writes only those forms, the
// first time it serves content that has none.
type Sites interface {
	ServiceByHost(ctx context.Context, host string) (store.Service, error)
	Bundle(ctx context.Context, orgID, id string) (store.Bundle, error)
	Blob(ctx context.Context, sha string) ([]byte, error)
	BlobWithForms(ctx context.Context, sha string) (store.BlobWithForms, error)
	PutBlobForms(ctx context.Context, sha string, f store.Forms) error
}

// pagedSites is what a Sites that keeps manifests in pages also offers: a
// bundle's page list without its manifest, and pages by their SHA-256.
// The edge then builds a new version of a site from the pages it already
// holds, decoding only the pages the version changed.
type pagedSites interface {
	Root(ctx context.Context, orgID, id string) (store.Bundle, error)
	Pages(ctx context.Context, shas []string) (map[string][]byte, error)
}

func (s storeSites) Root(ctx context.Context, orgID, id string) (store.Bundle, error) {
	return s.st.Bundles().Root(ctx, orgID, id)
}

func (s storeSites) Pages(ctx context.Context, shas []string) (map[string][]byte, error) {
	return s.st.Bundles().Pages(ctx, shas)
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

func (s storeSites) BlobWithForms(ctx context.Context, sha string) (store.BlobWithForms, error) {
	return s.st.Bundles().BlobWithForms(ctx, sha)
}

func (s storeSites) PutBlobForms(ctx context.Context, sha string, f store.Forms) error {
	return s.st.Bundles().PutBlobForms(ctx, sha, f, time.Now())
}

// Edge is the site-serving handler.
type Edge struct {
	store Sites
	log   *slog.Logger

	sites   *cache.Cache[string, *site]
	missing *cache.Cache[string, time.Time]
	blobs   *cache.Cache[string, *blob]
	// pages are manifest pages decoded into files, by the page's SHA-256:
	// a page's files are the same in every site and version that holds it.
	pages *cache.Cache[string, *pageFiles]
	loads singleflight.Group
	// names, when set, holds every host a live service may answer for:
	// a host it does not hold is answered 404 with no store lookup.
	names Names
	// epochs count invalidations, by a hash of the host: a site loaded
	// while its host was invalidated is answered but not kept, or a load
	// that read the store just before a launch committed would keep
	// "no site here" for a whole revalidation period after it.
	epochs [256]atomic.Uint32
}

func (e *Edge) epoch(host string) *atomic.Uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(host); i++ {
		h = (h ^ uint32(host[i])) * 16777619
	}
	return &e.epochs[h%uint32(len(e.epochs))]
}

// Names is the in-memory index of hosts (package nameindex's Index).
type Names interface {
	Has(host string) bool
	Add(hosts ...string)
}

// UseNames makes the edge answer hosts the index does not hold without
// asking the store. Call it before serving.
func (e *Edge) UseNames(n Names) { e.names = n }

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
		blobs:   cache.New(1<<20, l.HotCacheBytes, func(_ string, b *blob) int64 { return b.size() + 64 }),
		pages:   cache.New(l.Sites, int64(l.Files), func(_ string, p *pageFiles) int64 { return int64(len(p.files)) + 1 }),
	}
}

// HotCacheBytes is what the hot cache holds now, for tests and metrics.
func (e *Edge) HotCacheBytes() int64 { return e.blobs.Cost() }

// Invalidate forgets every cached site of a service, after a deploy or a
// teardown.
func (e *Edge) Invalidate(hosts ...string) {
	if e.names != nil {
		e.names.Add(hosts...)
	}
	for _, h := range hosts {
		h = strings.ToLower(h)
		e.epoch(h).Add(1)
		e.loads.Forget("site\x00" + h)
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
	if !ValidHost(host) || (e.names != nil && !e.names.Has(host)) {
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
		epoch := e.epoch(host)
		began := epoch.Load()
		svc, err := e.store.ServiceByHost(ctx, host)
		if errors.Is(err, store.ErrNotFound) {
			if epoch.Load() == began {
				e.sites.Delete(host)
				e.missing.Put(host, time.Now())
			}
			return (*site)(nil), nil
		}
		if err != nil {
			return nil, err
		}
		if s != nil && s.serviceID == svc.ID && s.bundleID == svc.BundleID && s.updated.Equal(svc.UpdatedAt) {
			fresh := *s
			fresh.checked = time.Now()
			if epoch.Load() == began {
				e.sites.Put(host, &fresh)
			}
			return &fresh, nil
		}
		ns, err := e.build(ctx, svc)
		if err != nil {
			return nil, err
		}
		if epoch.Load() == began {
			e.missing.Delete(host)
			e.sites.Put(host, ns)
		}
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
			s.proxy, s.upstream = e.proxyTo(svc.Upstream), svc.Upstream
		}
		return s, nil
	}
	var manifest string
	if ps, ok := e.store.(pagedSites); ok {
		b, err := ps.Root(ctx, svc.OrgID, svc.BundleID)
		if err != nil {
			return nil, err
		}
		if b.Pages != nil {
			return e.buildFromPages(ctx, ps, svc, b.Pages)
		}
		manifest = b.Manifest // stored before pages: whole
	} else {
		b, err := e.store.Bundle(ctx, svc.OrgID, svc.BundleID)
		if err != nil {
			return nil, err
		}
		manifest = b.Manifest
	}
	var entries []File
	if err := json.Unmarshal([]byte(manifest), &entries); err != nil {
		return nil, err
	}
	s := &site{serviceID: svc.ID, bundleID: svc.BundleID, updated: svc.UpdatedAt, checked: time.Now(), files: make(map[string]*file, len(entries))}
	for _, m := range entries {
		s.files["/"+m.Path] = newFile(m)
	}
	s.notFound = s.files["/404.html"]
	return s, nil
}

// newFile is a manifest entry as the edge serves it.
func newFile(m File) *file {
	f := &file{sha: m.SHA256, ctype: m.ContentType}
	if f.ctype == "" {
		f.ctype = ContentType(m.Path)
	}
	f.ctypeH = []string{f.ctype}
	if strings.HasSuffix(m.Path, ".html") {
		f.cacheH = []string{"public, max-age=0, must-revalidate"}
	} else {
		f.cacheH = []string{"public, max-age=3600"}
	}
	return f
}

// pageFiles are one manifest page's files, by their paths as the site's
// map keys them ("/" and the path).
type pageFiles struct {
	paths []string
	files []*file
}

// buildFromPages builds a static site from its bundle's pages: the pages
// the edge holds already (an earlier version's, another site's) are used
// as they are, and the others read in one query and decoded, so a new
// version with one file changed decodes one page.
func (e *Edge) buildFromPages(ctx context.Context, ps pagedSites, svc store.Service, refs []store.PageRef) (*site, error) {
	got := make([]*pageFiles, len(refs))
	var missing []string
	n := 0
	for i, r := range refs {
		n += r.Files
		if p, ok := e.pages.Get(r.SHA256); ok {
			got[i] = p
		} else {
			missing = append(missing, r.SHA256)
		}
	}
	if len(missing) > 0 {
		raw, err := ps.Pages(ctx, missing)
		if err != nil {
			return nil, err
		}
		for i, r := range refs {
			if got[i] != nil {
				continue
			}
			var entries []File
			if err := json.Unmarshal(raw[r.SHA256], &entries); err != nil {
				return nil, err
			}
			p := &pageFiles{paths: make([]string, len(entries)), files: make([]*file, len(entries))}
			for j, m := range entries {
				p.paths[j], p.files[j] = "/"+m.Path, newFile(m)
			}
			e.pages.Put(r.SHA256, p)
			got[i] = p
		}
	}
	s := &site{serviceID: svc.ID, bundleID: svc.BundleID, updated: svc.UpdatedAt, checked: time.Now(), files: make(map[string]*file, n)}
	for _, p := range got {
		for j, path := range p.paths {
			s.files[path] = p.files[j]
		}
	}
	s.notFound = s.files["/404.html"]
	return s, nil
}

// body returns a file's body and its compressed forms from the hot cache,
// loading them from the store's blobs (once, however many requests ask at
// the same moment) when they are not there. Content of a compressible
// type that has no forms yet gets them here, once: they are kept in the
// store by its hash, for every site, launch and replica that serves it.
func (e *Edge) body(ctx context.Context, f *file) (*blob, error) {
	if b, ok := e.blobs.Get(f.sha); ok && (b.withForms || !compressible(f.ctype)) {
		return b, nil
	}
	key := "blob\x00" + f.sha
	if compressible(f.ctype) {
		key = "forms\x00" + f.sha
	}
	v, err, _ := e.loads.Do(key, func() (any, error) {
		ctx := context.WithoutCancel(ctx)
		var b *blob
		if !compressible(f.ctype) {
			data, err := e.store.Blob(ctx, f.sha)
			if err != nil {
				return nil, err
			}
			b = newBlob(data, store.Forms{})
		} else {
			bf, err := e.store.BlobWithForms(ctx, f.sha)
			if err != nil {
				return nil, err
			}
			if !bf.Made && len(bf.Data) >= minCompress {
				bf.Forms = makeForms(bf.Data)
				if err := e.store.PutBlobForms(ctx, f.sha, bf.Forms); err != nil {
					// Served all the same; the next load makes them again.
					e.log.Warn("edge: keeping compressed forms", "sha256", f.sha, "err", err)
				}
			}
			b = newBlob(bf.Data, bf.Forms)
			b.withForms = true
		}
		b.makeFiles()
		// A body larger than the whole budget is served without being kept.
		e.blobs.Put(f.sha, b)
		return b, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*blob), nil
}

// headsFor returns a file's ETags and prepared answers for a body's
// sizes, making them the first time (and again should the forms kept for
// the content ever change size, as a body evicted and loaded again may).
func (f *file) headsFor(b *blob) *heads {
	var sizes [encodings]int
	for enc, body := range b.forms {
		sizes[enc] = len(body)
	}
	if h := f.heads.Load(); h != nil && h.sizes == sizes {
		return h
	}
	h := &heads{sizes: sizes}
	for enc := range encodings {
		h.etags[enc] = `"` + f.sha[:32] + etagSuffix[enc] + `"`
		h.etagH[enc] = []string{h.etags[enc]}
		if b.lengthH[enc] == nil {
			continue
		}
		h.ok[enc] = f.head("200 OK", b, enc, h.etags[enc])
		h.notModified[enc] = f.head("304 Not Modified", b, enc, h.etags[enc])
		h.miss[enc] = f.head("404 Not Found", b, enc, "")
	}
	f.heads.Store(h)
	return h
}

// ContentType names a file's media type by its extension (package site's).
func ContentType(p string) string { return sitepkg.ContentType(p) }

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
			// A worker answers no HTTP, and a process not running answers
			// nothing: a 503 the service's state explains, not a fault.
			MarkExpected(w)
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
	if b.varies {
		h["Vary"] = varyH
	}
	enc := b.choose(first(r.Header["Accept-Encoding"]))
	if status == http.StatusOK {
		hd := f.headsFor(b)
		h["Etag"] = hd.etagH[enc]
		if inm := first(r.Header["If-None-Match"]); inm != "" && httpheader.ETagMatches(inm, hd.etags[enc]) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	if enc != identity {
		h["Content-Encoding"] = encodingH[enc]
	}
	h["Content-Length"] = b.lengthH[enc]
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(b.forms[enc])
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
	page := notFoundBody(host)
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(page)))
	h["X-Content-Type-Options"] = nosniffH
	w.WriteHeader(http.StatusNotFound)
	w.Write(page)
}

// notFoundBody is NotFound's page for host.
func notFoundBody(host string) []byte {
	out, n := AppendNotFound(nil, host)
	return out[n:]
}

// The page's text before and after the host.
var notFoundBefore, notFoundAfter, _ = strings.Cut(notFoundPage, "%s")

// AppendNotFound appends to dst the head NotFound's answer gets from
// net/http (sorted, without Date and the final blank line), then its page
// for host (a Host value), and returns the head's length: a host no site
// has is answered with no allocation beyond dst's growth.
func AppendNotFound(dst []byte, host string) ([]byte, int) {
	display := hostOnly(host)
	if !ValidHost(display) {
		display = "this address"
	}
	start := len(dst)
	dst = append(dst, "HTTP/1.1 404 Not Found\r\nCache-Control: no-store\r\nContent-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(notFoundBefore)+len(display)+len(notFoundAfter)), 10)
	dst = append(dst, "\r\nContent-Type: text/html; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n"...)
	headLen := len(dst) - start
	dst = append(dst, notFoundBefore...)
	dst = append(dst, display...)
	return append(dst, notFoundAfter...), headLen
}

// Unknown reports whether the in-memory index of names says no site has
// host (a Host value): its answer is AppendNotFound's.
func (e *Edge) Unknown(host string) bool {
	host = hostOnly(host)
	return e.names != nil && ValidHost(host) && !e.names.Has(host)
}

// headerValue is a header value as net/http writes it: line breaks become
// spaces and surrounding blanks are trimmed.
var headerValue = strings.NewReplacer("\n", " ", "\r", " ")

// head is the status line and header lines ServeHTTP's answer gets from
// net/http, in its order (sorted by key), without Date and the final blank
// line. A 304 carries no Content-Type or Content-Length, as net/http drops
// them.
func (f *file) head(status string, b *blob, enc int, etag string) []byte {
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
		if enc != identity {
			add("Content-Encoding", encodingH[enc][0])
		}
		add("Content-Length", b.lengthH[enc][0])
		add("Content-Type", f.ctype)
	}
	if etag != "" {
		add("Etag", etag)
	}
	if b.varies {
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
	head, body, _, ok = e.PreparedFile(ctx, host, urlPath, ifNoneMatch, acceptEncoding)
	return head, body, ok
}

// PreparedFile is Prepared with, for a body of at least SendfileMin bytes,
// a file holding exactly body from offset 0, for sendfile(2); nil when
// there is none. The caller reads it only at explicit offsets (never
// through its position), never writes or closes it, and keeps a
// reference to it while the kernel reads it.
func (e *Edge) PreparedFile(ctx context.Context, host, urlPath, ifNoneMatch, acceptEncoding string) (head, body []byte, file *os.File, ok bool) {
	if e.Unknown(host) {
		// No site has the host: NotFound's answer, from memory.
		out, n := AppendNotFound(nil, host)
		return out[:n:n], out[n:], nil, true
	}
	host = hostOnly(host)
	s, err := e.siteFor(ctx, host)
	if err != nil || s == nil || s.runs {
		return nil, nil, nil, false
	}
	f, status := s.lookup(urlPath)
	if f == nil {
		return nil, nil, nil, false
	}
	b, err := e.body(ctx, f)
	if err != nil {
		return nil, nil, nil, false
	}
	h := f.headsFor(b)
	enc := b.choose(acceptEncoding)
	switch {
	case status == http.StatusOK && ifNoneMatch != "" && httpheader.ETagMatches(ifNoneMatch, h.etags[enc]):
		return h.notModified[enc], nil, nil, true
	case status == http.StatusOK:
		return h.ok[enc], b.forms[enc], b.fileFor(enc), true
	default:
		return h.miss[enc], b.forms[enc], b.fileFor(enc), true
	}
}

// Upstream is the address (host:port) of the process that answers for
// host, when host is a live process service whose serving version
// answers; ok is false otherwise (no site, a static site, a worker, a
// crashed or starting service, a site failing to load), and ServeHTTP
// answers. The fast path forwards to it what ServeHTTP would proxy.
func (e *Edge) Upstream(ctx context.Context, host string) (addr string, ok bool) {
	s, err := e.siteFor(ctx, hostOnly(host))
	if err != nil || s == nil || s.upstream == "" {
		return "", false
	}
	return s.upstream, true
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

// Static reports whether a live static site answers for host: its answers
// are files and short pages, never streamed or proxied.
func (e *Edge) Static(ctx context.Context, host string) bool {
	s, _ := e.siteFor(ctx, hostOnly(host))
	return s != nil && !s.runs
}

// MarkExpected tells the request log that the error status about to be
// written is the service's state speaking (a worker's 503), not the
// server failing, so it is logged at INFO rather than ERROR. Writers that
// do not log ignore it.
func MarkExpected(w http.ResponseWriter) {
	for {
		if m, ok := w.(interface{ MarkExpected() }); ok {
			m.MarkExpected()
			return
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return
		}
		w = u.Unwrap()
	}
}
