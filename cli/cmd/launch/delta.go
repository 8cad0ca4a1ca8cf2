package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/sdk"
)

// A deploy the watcher answered neither reads nor writes the whole digest
// cache: it reads the records of the paths the watcher named (scanning
// the cache's text for them, parsing nothing else), and writes what it
// changed to the cache's journal, PATH.delta: a line "pier-digests-delta
// 1 BASE BUNDLE WATCH FILES" (BASE the cache's WRITTEN it applies to,
// FILES the site's count), then one record a path changed, as the
// cache's, or "- PATH" for a path removed, each ended by a NUL, later
// ones over earlier ones. Reading the cache applies its journal; writing
// it whole removes the journal. Once the journal holds maxDelta records,
// the next deploy takes the whole-cache path and writes the cache whole.
const (
	deltaHeader = "pier-digests-delta"
	maxDelta    = 5000
)

func deltaPath(path string) string { return path + ".delta" }

// cacheDelta is a cache's journal.
type cacheDelta struct {
	base          int64 // the cache's Written it applies to
	bundle, watch string
	files         int
	paths         []string
	recs          []cachedFile // SHA256 "" for a path removed
}

// readDelta reads the journal of the cache at path written at base; nil
// when there is none for it.
func readDelta(path string, base int64) *cacheDelta {
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(deltaPath(path))
	if err != nil {
		return nil
	}
	head, body, _ := bytes.Cut(data, []byte("\n"))
	f := strings.Fields(string(head))
	if len(f) != 6 || f[0] != deltaHeader || f[1] != "1" {
		return nil
	}
	b, err1 := strconv.ParseInt(f[2], 10, 64)
	files, err2 := strconv.Atoi(f[5])
	if err1 != nil || err2 != nil || b != base {
		return nil
	}
	d := &cacheDelta{base: b, files: files}
	if f[3] != "-" {
		d.bundle = f[3]
	}
	if f[4] != "-" {
		d.watch = f[4]
	}
	for rest := string(body); rest != ""; {
		rec, tail, ok := strings.Cut(rest, "\x00")
		if !ok {
			return nil
		}
		rest = tail
		if p, ok := strings.CutPrefix(rec, "- "); ok {
			d.paths, d.recs = append(d.paths, p), append(d.recs, cachedFile{})
			continue
		}
		p, e, ok := parseCacheRecord(rec, 6)
		if !ok {
			return nil
		}
		d.paths, d.recs = append(d.paths, p), append(d.recs, e)
	}
	return d
}

// write writes the journal of the cache at path atomically.
func (d *cacheDelta) write(path string) error {
	bundle, watch := d.bundle, d.watch
	if bundle == "" {
		bundle = "-"
	}
	if watch == "" {
		watch = "-"
	}
	data := fmt.Appendf(nil, "%s 1 %d %s %s %d\n", deltaHeader, d.base, bundle, watch, d.files)
	for i, p := range d.paths {
		if d.recs[i].SHA256 == "" {
			data = append(append(append(data, "- "...), p...), 0)
			continue
		}
		data = appendRecord(data, p, d.recs[i])
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".digests-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), deltaPath(path))
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// applyDelta makes the cache what its journal says: the journal's
// records over the cache's, in walk order, and its bundle and watcher's
// token. Written stays the cache's: a record the journal added was
// statted after it, so a time racy against the journal is racy against
// the cache too.
func (c *digestCache) applyDelta(d *cacheDelta) {
	if d == nil {
		return
	}
	c.Bundle, c.Watch = d.bundle, d.watch
	idx := make(map[string]int, len(c.order))
	for i, p := range c.order {
		idx[p] = i
	}
	appended := false
	for i, p := range d.paths {
		j, ok := idx[p]
		switch {
		case ok:
			c.recs[j] = d.recs[i]
			if d.recs[i].SHA256 == "" {
				delete(idx, p)
			}
		case d.recs[i].SHA256 != "":
			idx[p] = len(c.order)
			c.order, c.recs = append(c.order, p), append(c.recs, d.recs[i])
			appended = true
		}
	}
	perm := make([]int, 0, len(c.order))
	for i := range c.order {
		if c.recs[i].SHA256 != "" {
			perm = append(perm, i)
		}
	}
	if appended {
		slices.SortFunc(perm, func(a, b int) int { return walkCompare(c.order[a], c.order[b]) })
	}
	order, recs := make([]string, len(perm)), make([]cachedFile, len(perm))
	for k, i := range perm {
		order[k], recs[k] = c.order[i], c.recs[i]
	}
	c.order, c.recs = order, recs
}

// watchedBase is what a deploy through the watcher starts from: the
// cache's header and text, and its journal.
type watchedBase struct {
	path  string
	head  cacheHeader
	body  []byte
	delta *cacheDelta
}

// readWatchedBase reads the cache's header and journal; the bundle, the
// watcher's token and the count of files are the journal's when there is
// one.
func readWatchedBase(path string) *watchedBase {
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	head, body, _ := bytes.Cut(data, []byte("\n"))
	h, version, ok := parseCacheHeader(string(head))
	if !ok || version != 5 {
		return nil
	}
	wb := &watchedBase{path: path, head: h, body: body, delta: readDelta(path, h.Written)}
	if d := wb.delta; d != nil {
		wb.head.Bundle, wb.head.Watch, wb.head.files = d.bundle, d.watch, d.files
	}
	return wb
}

// usable says whether a deploy can go from the base through the watcher:
// a bundle to make the next from, no interrupted upload, a journal not
// too long.
func (wb *watchedBase) usable() bool {
	return wb != nil && wb.head.Bundle != "" && !wb.head.Interrupted && (wb.delta == nil || len(wb.delta.paths) < maxDelta)
}

// oldRecords are the records of the paths changed (or under a folder
// changed): the journal's, else the cache's.
func (wb *watchedBase) oldRecords(set map[string]bool) map[string]cachedFile {
	old := map[string]cachedFile{}
	affected := func(p string) bool {
		parent, _ := splitPath(p)
		return set[p] || underAny(set, parent)
	}
	lastDir, lastAffected := "\x00", false
	for rest := wb.body; len(rest) > 0; {
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			break
		}
		rec := rest[:i]
		rest = rest[i+1:]
		p, ok := recordPath(rec)
		if !ok {
			continue
		}
		if parent, _ := splitPath(string(p)); parent != lastDir {
			lastDir, lastAffected = parent, underAny(set, parent)
		}
		if !lastAffected && !set[string(p)] {
			continue
		}
		if path, e, ok := parseCacheRecord(string(rec), 6); ok {
			old[path] = e
		}
	}
	if d := wb.delta; d != nil {
		for i, p := range d.paths {
			switch {
			case !affected(p):
			case d.recs[i].SHA256 == "":
				delete(old, p)
			default:
				old[p] = d.recs[i]
			}
		}
	}
	return old
}

// recordPath is the path of a file's record, without parsing the rest;
// false for a folder's.
func recordPath(rec []byte) ([]byte, bool) {
	if len(rec) < 66 || rec[64] != ' ' {
		return nil, false
	}
	rest := rec[65:]
	for range 4 {
		i := bytes.IndexByte(rest, ' ')
		if i < 0 {
			return nil, false
		}
		rest = rest[i+1:]
	}
	return rest, true
}

// uploadWatched deploys what the watcher named since the cache's token:
// those paths statted (and hashed if changed), their new contents sent,
// and the bundle made from the last one with what changed. done is
// false when the deploy must walk the site instead (something was not as
// expected, the server lacks a content or the last bundle); nothing was
// recorded then.
func uploadWatched(ctx context.Context, f *cmdutil.Factory, p *cmdutil.Progress, w *siteWatch, wb *watchedBase, dir, project string) (*sdk.BundleEnvelope, uploadStats, bool, error) {
	st := uploadStats{watched: true}
	set := make(map[string]bool, len(w.ans.Paths))
	for _, path := range w.ans.Paths {
		set[path] = true
	}
	fresh, ok := changedFiles(&siteWalk{root: filepath.Clean(dir)}, set, w.ans.Paths)
	if !ok {
		return nil, st, false, nil
	}
	old := wb.oldRecords(set)
	lookup := &digestCache{Written: wb.head.Written}
	for path, e := range old {
		lookup.order, lookup.recs = append(lookup.order, path), append(lookup.recs, e)
	}
	if !hashChanged(lookup, fresh) {
		return nil, st, false, nil
	}
	changes, removed, todo, todoBytes := deltaOf(fresh, old)
	st.files = wb.head.files + len(fresh) - len(old)
	c, err := f.Client()
	if err != nil {
		return nil, st, true, err
	}
	n, sent, err := uploadFiles(ctx, c, p, todo, todoBytes)
	st.uploaded, st.uploadedBytes = n, sent
	if err != nil {
		return nil, st, true, err
	}
	base := wb.head.Bundle
	b, err := c.UploadAssets(ctx, &sdk.UploadAssetsParams{}, sdk.UploadAssetsJSONRequestBody{ProjectId: project, BaseBundleId: &base, Changes: &changes, Removed: &removed})
	var e *sdk.Error
	if errors.As(err, &e) && (e.BlockedBy == "conflict:blobs_missing" || e.BlockedBy == "not_found:resource") {
		return nil, st, false, nil
	}
	if err != nil {
		return nil, st, true, err
	}
	d := wb.delta
	if d == nil {
		d = &cacheDelta{base: wb.head.Written}
	}
	d.bundle, d.watch, d.files = b.Data.BundleId, w.next, st.files
	for i := range fresh {
		sf := &fresh[i]
		d.paths = append(d.paths, sf.entry.Path)
		d.recs = append(d.recs, cachedFile{Size: int64(sf.entry.Size), ModTime: sf.stat.mod.UnixNano(), Inode: sf.stat.ino, ChangeTime: sf.stat.ctime, SHA256: sf.entry.Sha256})
	}
	for _, path := range removed {
		d.paths, d.recs = append(d.paths, path), append(d.recs, cachedFile{})
	}
	d.write(wb.path) // failing to is not the upload's failure: the next deploy walks
	return b, st, true, nil
}

// deltaOf is what the changed files change against their old records:
// the manifest entries new or changed, the paths removed, and the files
// whose contents to send (one a content), with their bytes.
func deltaOf(fresh []siteFile, old map[string]cachedFile) (changes []sdk.ManifestFile, removed []string, todo []siteFile, todoBytes int64) {
	changes, removed = []sdk.ManifestFile{}, []string{}
	present := make(map[string]bool, len(fresh))
	sent := map[string]bool{}
	for _, sf := range fresh {
		present[sf.entry.Path] = true
		e, ok := old[sf.entry.Path]
		if ok && e.SHA256 == sf.entry.Sha256 && e.Size == int64(sf.entry.Size) {
			continue
		}
		changes = append(changes, sf.entry)
		// A content at another path may be held already; the server
		// answers that it is, and keeps one copy.
		if !(ok && e.SHA256 == sf.entry.Sha256) && !sent[sf.entry.Sha256] {
			sent[sf.entry.Sha256] = true
			todo = append(todo, sf)
			todoBytes += int64(sf.entry.Size)
		}
	}
	for path := range old {
		if !present[path] {
			removed = append(removed, path)
		}
	}
	slices.Sort(removed)
	return changes, removed, todo, todoBytes
}
