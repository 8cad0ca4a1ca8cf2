package launch

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pierhq/pier/sdk"
)

// walkChunk is how many files of one folder one worker stats at a time: a
// site of one large folder is statted on every core too.
const walkChunk = 256

// walkOpen is how many folders the walk holds open at most.
const walkOpen = 64

// siteWalk reads a site's folders and stats their files on every core at
// once: each folder is a task, and so is each walkChunk of its files. A
// relaunch of an unchanged site is an lstat a file, so the walk is what
// it costs; on one core the folders' listing and the lstats took turns.
type siteWalk struct {
	root  string // the site's directory, cleaned
	cache *digestCache
	sem   chan struct{}
	// open bounds the folders held open at once: a folder stays open
	// until its files are statted, and listing can run ahead of that.
	open chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
	// listings: folders the cache records as they are are not listed.
	listings bool
	// stale: a recorded entry was not as recorded.
	stale atomic.Bool
	dirs  []dirRecord  // the folders walked, under mu
	read  atomic.Int32 // the folders read (not taken from listings)
}

// walkFolder is one folder's entries in filepath.WalkDir's order: its
// files, and its folders where they come among them.
type walkFolder struct {
	files []siteFile
	// subs[i] comes before files[at[i]].
	subs []*walkFolder
	at   []int
}

// walkSite walks dir (a directory) as readSite does. A folder the cache
// records as it is (cache.listing) is not listed again: its entries are
// the recorded ones. Should one of them not be a regular file any more,
// which the folder's unchanged times rule out but for a clock set back,
// the site is walked again listing every folder.
func walkSite(dir string, cache *digestCache) ([]siteFile, error) {
	files, stale, err := walkOnce(dir, cache, true)
	if stale {
		files, _, err = walkOnce(dir, cache, false)
	}
	return files, err
}

// walkOnce walks dir; stale says a recorded folder was not as recorded,
// and nothing was walked.
func walkOnce(dir string, cache *digestCache, listings bool) ([]siteFile, bool, error) {
	w := &siteWalk{root: filepath.Clean(dir), cache: cache, listings: listings, sem: make(chan struct{}, max(2, min(runtime.NumCPU(), 8))), open: make(chan struct{}, walkOpen)}
	top := &walkFolder{}
	w.wg.Add(1)
	go w.folder("", top)
	w.wg.Wait()
	if w.stale.Load() {
		return nil, true, nil
	}
	// In the same order whichever task failed first.
	slices.SortFunc(w.errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	if err := errors.Join(w.errs...); err != nil {
		return nil, false, err
	}
	cache.walked, cache.read = w.dirs, int(w.read.Load())
	return top.flatten(nil), false, nil
}

func (w *siteWalk) fail(err error) {
	w.mu.Lock()
	w.errs = append(w.errs, err)
	w.mu.Unlock()
}

// join is a path under the site's directory, as filepath.Join writes it.
func (w *siteWalk) join(rel string) string {
	switch {
	case rel == "":
		return w.root
	case w.root == ".":
		return rel
	case strings.HasSuffix(w.root, string(filepath.Separator)):
		return w.root + rel
	}
	return w.root + string(filepath.Separator) + rel
}

// folder lists the folder rel ("" for the site's) into f, then walks its
// folders and stats its files as tasks of their own, by their names in
// the folder held open.
func (w *siteWalk) folder(rel string, f *walkFolder) {
	defer w.wg.Done()
	w.open <- struct{}{}
	w.sem <- struct{}{}
	slashRel := filepath.ToSlash(rel)
	dir, listed, entries, st, err := w.readFolder(slashRel, w.join(rel))
	<-w.sem
	if err != nil {
		<-w.open
		w.fail(err)
		return
	}
	w.mu.Lock()
	w.dirs = append(w.dirs, dirRecord{Path: slashRel, ModTime: st.mod.UnixNano(), Inode: st.ino, ChangeTime: st.ctime})
	w.mu.Unlock()
	prefix := ""
	if rel != "" {
		prefix = rel + string(filepath.Separator)
	}
	if listed != nil {
		w.fromListing(prefix, listed, f)
	} else {
		w.fromEntries(prefix, entries, f)
	}
	chunks := (len(f.files) + walkChunk - 1) / walkChunk
	if chunks == 0 {
		w.closeFolder(dir)
		return
	}
	left := &atomic.Int32{}
	left.Store(int32(chunks))
	for i := 0; i < len(f.files); i += walkChunk {
		w.wg.Add(1)
		go w.stat(dir, len(prefix), f.files[i:min(i+walkChunk, len(f.files))], left)
	}
}

// fromEntries takes a folder's listed entries into f, and walks its
// folders.
func (w *siteWalk) fromEntries(prefix string, entries []os.DirEntry, f *walkFolder) {
	for _, d := range entries {
		name := d.Name()
		if strings.HasPrefix(name, ".") && name != ".well-known" {
			continue
		}
		if d.IsDir() {
			w.sub(prefix+name, f)
			continue
		}
		if !d.Type().IsRegular() {
			continue
		}
		p := prefix + name
		f.files = append(f.files, siteFile{abs: w.join(p), entry: sdk.ManifestFile{Path: filepath.ToSlash(p)}})
	}
}

// fromListing takes a folder's recorded entries into f, each file with
// its record, and walks its folders.
func (w *siteWalk) fromListing(prefix string, l *folderListing, f *walkFolder) {
	f.files = make([]siteFile, 0, len(l.entries))
	for i := range l.entries {
		e := &l.entries[i]
		if e.dir {
			w.sub(prefix+e.name, f)
			continue
		}
		f.files = append(f.files, siteFile{abs: w.join(prefix + e.name), entry: sdk.ManifestFile{Path: e.path}, rec: &e.file})
	}
}

// sub walks the folder rel, which comes before f's next file.
func (w *siteWalk) sub(rel string, f *walkFolder) {
	sub := &walkFolder{}
	f.subs = append(f.subs, sub)
	f.at = append(f.at, len(f.files))
	w.wg.Add(1)
	go w.folder(rel, sub)
}

// readFolder opens a folder and stats it; then, unless the cache records
// it as it is (listed), lists it by name, as os.ReadDir does. The folder
// is left open. It is statted before it is listed: a change made while
// listing leaves times the next walk does not match.
func (w *siteWalk) readFolder(rel, path string) (dir *os.File, listed *folderListing, entries []os.DirEntry, st fileStat, err error) {
	dir, err = os.Open(path)
	if err != nil {
		return nil, nil, nil, st, err
	}
	if st, err = statOpen(dir); err != nil {
		dir.Close()
		return nil, nil, nil, st, err
	}
	if w.listings {
		if listed = w.cache.listing(rel, st); listed != nil {
			return dir, listed, nil, st, nil
		}
	}
	w.read.Add(1)
	entries, err = dir.ReadDir(-1)
	if err != nil {
		dir.Close()
		return nil, nil, nil, st, err
	}
	slices.SortFunc(entries, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return dir, nil, entries, st, nil
}

// stat stats files of the folder dir, whose paths' first skip bytes name
// it; the last of its tasks closes it.
func (w *siteWalk) stat(dir *os.File, skip int, files []siteFile, left *atomic.Int32) {
	defer w.wg.Done()
	w.sem <- struct{}{}
	defer func() { <-w.sem }()
	for i := range files {
		sf := &files[i]
		err := statFile(w.cache, sf, func(sf *siteFile) (fileStat, error) {
			return statAt(dir, sf.entry.Path[skip:], sf.abs)
		})
		if sf.rec != nil && (err != nil || !sf.stat.regular) {
			w.stale.Store(true)
			continue
		}
		if err != nil {
			w.fail(err)
		}
	}
	if left.Add(-1) == 0 {
		w.closeFolder(dir)
	}
}

func (w *siteWalk) closeFolder(dir *os.File) {
	dir.Close()
	<-w.open
}

// flatten appends the folder's files, its folders' among them, to out.
func (f *walkFolder) flatten(out []siteFile) []siteFile {
	if out == nil {
		out = make([]siteFile, 0, f.count())
	}
	prev := 0
	for i, sub := range f.subs {
		out = append(out, f.files[prev:f.at[i]]...)
		out = sub.flatten(out)
		prev = f.at[i]
	}
	return append(out, f.files[prev:]...)
}

func (f *walkFolder) count() int {
	n := len(f.files)
	for _, sub := range f.subs {
		n += sub.count()
	}
	return n
}
