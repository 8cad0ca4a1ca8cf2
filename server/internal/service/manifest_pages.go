package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"time"

	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/site"
	"github.com/pierhq/pier/server/internal/store"
)

// A bundle's manifest is kept in pages (store.PageRef): runs of its
// entries in path order. A page ends after an entry whose path hashes to 0
// modulo pageSplit, or once it holds pageMax entries, so where pages end
// depends on the entries alone: the same files make the same pages, and so
// the same bundle digest, whether they came as a whole manifest or as
// changes to a base. A one-file change rewrites the page holding that
// path and copies the other pages' references.
const (
	pageSplit = 512
	pageMax   = 4096
	// pageFlushBytes bounds the pages a writer holds before storing them.
	pageFlushBytes = 1 << 20
)

// endsPage reports whether an entry at path, the n-th of its page, ends
// the page. The hash is FNV-1a, fixed here for good: changing it would
// change every bundle's digest.
func endsPage(path string, n int) bool {
	if n >= pageMax {
		return true
	}
	h := uint64(14695981039346656037)
	for i := 0; i < len(path); i++ {
		h ^= uint64(path[i])
		h *= 1099511628211
	}
	return h%pageSplit == 0
}

// pageWriter cuts entries, given in path order, into pages, stores the
// pages in groups as they fill, and lists them. It holds one open page and
// at most pageFlushBytes of pages not yet stored, whatever the manifest's
// size.
type pageWriter struct {
	ctx    context.Context
	st     store.Bundles
	now    time.Time
	refs   []store.PageRef
	open   []site.File
	queue  []store.Page
	queued int
	files  int
	total  int64
}

func newPageWriter(ctx context.Context, st store.Bundles, now time.Time) *pageWriter {
	return &pageWriter{ctx: ctx, st: st, now: now, refs: []store.PageRef{}}
}

// add appends an entry, after every entry added so far.
func (w *pageWriter) add(f site.File) error {
	w.open = append(w.open, f)
	if endsPage(f.Path, len(w.open)) {
		return w.cut()
	}
	return nil
}

// keep appends a stored page as it is; it is called only between pages
// (no page open), where an unchanged page of the base starts.
func (w *pageWriter) keep(r store.PageRef) {
	w.refs = append(w.refs, r)
	w.files += r.Files
	w.total += r.Bytes
}

// cut closes the open page.
func (w *pageWriter) cut() error {
	if len(w.open) == 0 {
		return nil
	}
	j, err := json.Marshal(w.open)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(j)
	ref := store.PageRef{SHA256: hex.EncodeToString(sum[:]), First: w.open[0].Path, Files: len(w.open)}
	for _, f := range w.open {
		ref.Bytes += f.Size
	}
	w.keep(ref)
	w.queue = append(w.queue, store.Page{SHA256: ref.SHA256, Entries: j})
	w.queued += len(j)
	w.open = w.open[:0]
	if w.queued >= pageFlushBytes {
		return w.flush()
	}
	return nil
}

func (w *pageWriter) flush() error {
	err := w.st.PutPages(w.ctx, w.queue, w.now)
	w.queue, w.queued = nil, 0
	return err
}

// finish closes the last page, stores what is left and returns the pages.
func (w *pageWriter) finish() ([]store.PageRef, error) {
	if err := w.cut(); err != nil {
		return nil, err
	}
	if err := w.flush(); err != nil {
		return nil, err
	}
	return w.refs, nil
}

// writePages stores files, sorted by path, as pages.
func writePages(ctx context.Context, st store.Bundles, now time.Time, files []site.File) ([]store.PageRef, error) {
	w := newPageWriter(ctx, st, now)
	for _, f := range files {
		if err := w.add(f); err != nil {
			return nil, err
		}
	}
	return w.finish()
}

// rootDigest is a paged bundle's digest: the SHA-256 of its page list,
// which names every page by its SHA-256.
func rootDigest(refs []store.PageRef) string {
	j, _ := json.Marshal(refs)
	sum := sha256.Sum256(j)
	return hex.EncodeToString(sum[:])
}

// readPage decodes one stored page.
func readPage(ctx context.Context, st store.Bundles, sha string) ([]site.File, error) {
	pages, err := st.Pages(ctx, []string{sha})
	if err != nil {
		return nil, err
	}
	var files []site.File
	err = json.Unmarshal(pages[sha], &files)
	return files, err
}

// pageOf is the index of the page whose range holds path: the last page
// whose first path is not after it (the first page for a path before
// every page).
func pageOf(refs []store.PageRef, path string) int {
	i := sort.Search(len(refs), func(i int) bool { return refs[i].First > path })
	return max(i-1, 0)
}

// bundleFile finds one file of a bundle by its path: in the one page
// whose range holds it, or in the whole manifest of a bundle stored before
// pages.
func bundleFile(ctx context.Context, st store.Bundles, b store.Bundle, path string) (site.File, bool, error) {
	var files []site.File
	if b.Pages == nil {
		if err := json.Unmarshal([]byte(b.Manifest), &files); err != nil {
			return site.File{}, false, err
		}
	} else if len(b.Pages) > 0 {
		var err error
		if files, err = readPage(ctx, st, b.Pages[pageOf(b.Pages, path)].SHA256); err != nil {
			return site.File{}, false, err
		}
	}
	for _, f := range files {
		if f.Path == path {
			return f, true, nil
		}
	}
	return site.File{}, false, nil
}

// derivePages makes a derived bundle's pages from its base's: a page whose
// range no change or removal falls in, met between pages, is kept by
// reference; the others are read, merged with their changes and cut again,
// reading on into the next page until a cut falls where one of the base's
// did. Only the pages touched (and at most the few after each, until the
// cuts meet again) are read and written. Every removed path must be in
// the base.
func (s *Bundles) derivePages(ctx context.Context, base store.Bundle, cs changeSet) ([]store.PageRef, error) {
	changed := append([]site.File(nil), cs.changed...)
	sort.Slice(changed, func(i, j int) bool { return changed[i].Path < changed[j].Path })
	removed := append([]string(nil), cs.removed...)
	sort.Strings(removed)
	st := s.store.Bundles()
	w := newPageWriter(ctx, st, s.Now())
	ci, ri := 0, 0
	var notFound []string
	for pi, ref := range base.Pages {
		last := pi == len(base.Pages)-1
		cj, rj := ci, ri
		for cj < len(changed) && (last || changed[cj].Path < base.Pages[pi+1].First) {
			cj++
		}
		for rj < len(removed) && (last || removed[rj] < base.Pages[pi+1].First) {
			rj++
		}
		if cj == ci && rj == ri && len(w.open) == 0 {
			w.keep(ref)
			continue
		}
		entries, err := readPage(ctx, st, ref.SHA256)
		if err != nil {
			return nil, apierr.Internal(err)
		}
		missed, err := mergePage(w, entries, changed[ci:cj], removed[ri:rj])
		if err != nil {
			return nil, apierr.Internal(err)
		}
		notFound = append(notFound, missed...)
		ci, ri = cj, rj
	}
	if len(notFound) > 0 {
		return nil, notInBase(base.ID, cs, notFound)
	}
	refs, err := w.finish()
	if err != nil {
		return nil, apierr.Internal(err)
	}
	return refs, nil
}

// mergePage adds a base page's entries to w in path order, with changed
// entries in place or among them, and removed paths left out. It returns
// the removed paths the page did not hold.
func mergePage(w *pageWriter, entries, changed []site.File, removed []string) ([]string, error) {
	drop := make(map[string]bool, len(removed))
	for _, r := range removed {
		drop[r] = false
	}
	i, j := 0, 0
	for i < len(entries) || j < len(changed) {
		var next site.File
		switch {
		case j == len(changed) || i < len(entries) && entries[i].Path < changed[j].Path:
			next = entries[i]
			i++
		case i == len(entries) || changed[j].Path < entries[i].Path:
			next = changed[j]
			j++
		default: // the same path: the change replaces the entry
			next = changed[j]
			i, j = i+1, j+1
		}
		if _, ok := drop[next.Path]; ok {
			drop[next.Path] = true
			continue
		}
		if err := w.add(next); err != nil {
			return nil, err
		}
	}
	var missed []string
	for _, r := range removed {
		if !drop[r] {
			missed = append(missed, r)
		}
	}
	return missed, nil
}

// pagesMissing answers which contents a paged manifest names that the
// organisation has not uploaded (or are no longer stored), reading its
// pages a group at a time.
func (s *Bundles) pagesMissing(ctx context.Context, orgID, field string, refs []store.PageRef) ([]string, error) {
	const group = 32
	var missing []string
	seen := map[string]bool{}
	for at := 0; at < len(refs); at += group {
		batch := refs[at:min(at+group, len(refs))]
		shas := make([]string, len(batch))
		for i, r := range batch {
			shas[i] = r.SHA256
		}
		pages, err := s.store.Bundles().Pages(ctx, shas)
		if err != nil {
			return nil, apierr.Internal(err)
		}
		var files []site.File
		var contents []string
		for _, r := range batch {
			var entries []site.File
			if err := json.Unmarshal(pages[r.SHA256], &entries); err != nil {
				return nil, apierr.Internal(err)
			}
			for _, f := range entries {
				if !seen[f.SHA256] {
					seen[f.SHA256] = true
					contents = append(contents, f.SHA256)
					files = append(files, f)
				}
			}
		}
		m, _, err := s.missingFor(ctx, orgID, field, files, contents)
		if err != nil {
			return nil, err
		}
		missing = append(missing, m...)
	}
	return missing, nil
}
