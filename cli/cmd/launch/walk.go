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
}

// walkFolder is one folder's entries in filepath.WalkDir's order: its
// files, and its folders where they come among them.
type walkFolder struct {
	files []siteFile
	// subs[i] comes before files[at[i]].
	subs []*walkFolder
	at   []int
}

// walkSite walks dir (a directory) as readSite does.
func walkSite(dir string, cache *digestCache) ([]siteFile, error) {
	w := &siteWalk{root: filepath.Clean(dir), cache: cache, sem: make(chan struct{}, max(2, min(runtime.NumCPU(), 8))), open: make(chan struct{}, walkOpen)}
	top := &walkFolder{}
	w.wg.Add(1)
	go w.folder("", top)
	w.wg.Wait()
	// In the same order whichever task failed first.
	slices.SortFunc(w.errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	if err := errors.Join(w.errs...); err != nil {
		return nil, err
	}
	return top.flatten(nil), nil
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
	dir, entries, err := readFolder(w.join(rel))
	<-w.sem
	if err != nil {
		<-w.open
		w.fail(err)
		return
	}
	prefix := ""
	if rel != "" {
		prefix = rel + string(filepath.Separator)
	}
	for _, d := range entries {
		name := d.Name()
		if strings.HasPrefix(name, ".") && name != ".well-known" {
			continue
		}
		if d.IsDir() {
			sub := &walkFolder{}
			f.subs = append(f.subs, sub)
			f.at = append(f.at, len(f.files))
			w.wg.Add(1)
			go w.folder(prefix+name, sub)
			continue
		}
		if !d.Type().IsRegular() {
			continue
		}
		p := prefix + name
		f.files = append(f.files, siteFile{abs: w.join(p), entry: sdk.ManifestFile{Path: filepath.ToSlash(p)}})
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

// readFolder opens a folder and lists it by name, as os.ReadDir does; the
// folder is left open.
func readFolder(path string) (*os.File, []os.DirEntry, error) {
	dir, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	entries, err := dir.ReadDir(-1)
	if err != nil {
		dir.Close()
		return nil, nil, err
	}
	slices.SortFunc(entries, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return dir, entries, nil
}

// stat stats files of the folder dir, whose paths' first skip bytes name
// it; the last of its tasks closes it.
func (w *siteWalk) stat(dir *os.File, skip int, files []siteFile, left *atomic.Int32) {
	defer w.wg.Done()
	w.sem <- struct{}{}
	defer func() { <-w.sem }()
	for i := range files {
		if err := statFile(w.cache, &files[i], func(sf *siteFile) (fileStat, error) {
			return statAt(dir, sf.entry.Path[skip:], sf.abs)
		}); err != nil {
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
