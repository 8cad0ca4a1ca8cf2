package launch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pierhq/pier/cli/cmd/launch/watch"
	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/sdk"
)

// A deploy of a folder of at least watcherFiles files starts a watcher of
// it (`pier __watch`, package watch), unless PIER_WATCHER is off (or
// PIER_NO_WATCHER set, or CI=true without PIER_WATCHER=on). The next
// deploy asks it what changed since the cache was written, and stats
// only that; it waits watchTimeout for the answer, and a watcher it
// starts watchStart to answer at all, else it walks the whole folder.
const watcherFiles = 5000

// Variables so that tests, on a machine busy with other tests, can wait
// longer than a deploy does and still see the watcher's answer.
var (
	watchTimeout = 50 * time.Millisecond
	watchStart   = time.Second
)

// siteWatch is a deploy's watcher of its folder.
type siteWatch struct {
	on         bool // PIER_WATCHER=on: whatever the folder's size
	sock, root string
	dir        string
	p          *cmdutil.Progress
	// ans is the watcher's answer before the walk, nil when none
	// answered; next is its "INSTANCE:TOKEN", for the cache.
	ans  *watch.Answer
	next string
	// startAfter: no watcher runs; start one if the walk finds the
	// folder large.
	startAfter bool
}

// watcherMode is PIER_WATCHER's: "on", "off" or "auto" (large folders,
// not in CI).
func watcherMode(f *cmdutil.Factory) string {
	switch strings.ToLower(strings.TrimSpace(f.Env("PIER_WATCHER"))) {
	case "on", "1", "true", "yes":
		return "on"
	case "off", "0", "false", "no":
		return "off"
	}
	if v := f.Env("PIER_NO_WATCHER"); v != "" && v != "0" {
		return "off"
	}
	if ci := strings.ToLower(f.Env("CI")); ci == "true" || ci == "1" {
		return "off"
	}
	return "auto"
}

// openSiteWatch asks the folder's watcher what changed since the cache's
// walk (its token watchedAt, "INSTANCE:TOKEN"), starting one first when
// the cache says the folder is large (files) and none runs; nil when
// there is to be no watcher.
func openSiteWatch(f *cmdutil.Factory, p *cmdutil.Progress, dir, watchedAt string, files int) *siteWatch {
	mode, cacheDir := watcherMode(f), cacheRoot(f)
	if mode == "off" || cacheDir == "" {
		return nil
	}
	if info, err := os.Lstat(dir); err != nil || !info.IsDir() {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil
	}
	w := &siteWatch{on: mode == "on", sock: watch.SocketPath(cacheDir, real), root: real, dir: dir, p: p}
	instance, token := parseWatchToken(watchedAt)
	ans, err := watch.Query(w.sock, instance, token, watchTimeout)
	switch {
	case err == nil:
	case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ECONNREFUSED):
		// Untrusted, unsupported, or a watcher too slow to answer:
		// this deploy walks, and starts none.
		return w
	case w.on || files >= watcherFiles:
		// A large folder and no watcher: one is started and asked
		// before the walk, so the next deploy asks it.
		if w.start() != nil {
			return w
		}
		ans = w.await(instance, token)
	default:
		w.startAfter = true
	}
	w.ans = ans
	if ans != nil {
		w.next = ans.Instance + ":" + strconv.FormatUint(ans.Token, 10)
	}
	return w
}

// incremental says whether the watcher told what changed since the
// cache's token.
func (w *siteWatch) incremental() bool { return w != nil && w.ans != nil && !w.ans.Full }

// parseWatchToken reads a cache's "INSTANCE:TOKEN".
func parseWatchToken(s string) (string, uint64) {
	instance, token, ok := strings.Cut(s, ":")
	n, err := strconv.ParseUint(token, 10, 64)
	if !ok || err != nil {
		return "", 0
	}
	return instance, n
}

// start starts a watcher of the folder.
func (w *siteWatch) start() error {
	if err := startWatcher(w.sock, w.root); err != nil {
		return err
	}
	if w.p == nil {
		return nil
	}
	w.p.Line(fmt.Sprintf("watching %s for changes, so the next deploy stats only what changed (pier __watch; it exits after %v without a deploy; PIER_WATCHER=off for none)", w.dir, watch.DefaultIdle))
	return nil
}

// await asks a watcher just started until it answers, for watchStart at
// most.
func (w *siteWatch) await(instance string, token uint64) *watch.Answer {
	for deadline := time.Now().Add(watchStart); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ans, err := watch.Query(w.sock, instance, token, watchTimeout); err == nil {
			return ans
		}
	}
	return nil
}

// readSite reads the site: from the cache and the paths the watcher names
// when it could tell what changed, else by walking it all.
func (w *siteWatch) readSite(dir string, cache *digestCache) ([]siteFile, error) {
	if w.incremental() && cache.Watch != "" && len(cache.order) > 0 {
		if files, ok := readChanged(dir, cache, w.ans.Paths); ok {
			return files, nil
		}
	}
	return readSite(dir, cache)
}

// after starts a watcher once the walk found the folder large, when none
// runs, and asks it for its first token while the upload runs: the
// returned func waits for that. A change made between the walk and the
// watcher's first watch would be in no answer, so the token goes to the
// cache only if every file and folder is still as the walk found it,
// none changed within verifyMargin before the walk (a later change in the
// same tick of the file system's clock would leave the same times).
// Otherwise the next deploy walks, and asks for a token then.
func (w *siteWatch) after(dir string, files []siteFile, cache *digestCache, walked time.Time) (wait func()) {
	if w == nil || !w.startAfter || (!w.on && len(files) < watcherFiles) || w.start() != nil {
		return func() {}
	}
	done := make(chan string, 1)
	go func() {
		next := ""
		if ans := w.await("", 0); ans != nil && unchangedSince(dir, files, cache.walked, walked.Add(-verifyMargin)) {
			next = ans.Instance + ":" + strconv.FormatUint(ans.Token, 10)
		}
		done <- next
	}()
	return func() { cache.watchNext = <-done }
}

// verifyMargin is how long before a walk a file's last change must be
// for after to vouch that a later one would show.
const verifyMargin = 100 * time.Millisecond

func sameStat(a, b fileStat) bool {
	return a.size == b.size && a.mod.Equal(b.mod) && a.ino == b.ino && a.ctime == b.ctime && a.regular == b.regular
}

// unchangedSince reports whether every file and folder is as the walk
// found it (statted again, on every core), and none changed after
// before.
func unchangedSince(dir string, files []siteFile, dirs []dirRecord, before time.Time) bool {
	limit := before.UnixNano()
	var bad atomic.Bool
	var wg sync.WaitGroup
	workers := max(1, min(runtime.NumCPU(), 4))
	for k := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A worker's share of the files is a run of them in walk
			// order, so each folder is opened once and each file is a
			// lookup of its name.
			fs := newFolderStatter(dir)
			defer fs.close()
			for i := k * len(files) / workers; i < (k+1)*len(files)/workers && !bad.Load(); i++ {
				was := files[i].stat
				now, err := fs.stat(files[i].entry.Path)
				if err != nil || !sameStat(now, was) || was.ctime >= limit || was.ctime == 0 {
					bad.Store(true)
				}
			}
			st := openStatter(dir)
			defer st.close()
			for i := k; i < len(dirs) && !bad.Load(); i += workers {
				d := dirs[i]
				var now fileStat
				var err error
				if d.Path == "" {
					now, err = lstatPath(dir)
				} else {
					now, err = st.stat(filepath.FromSlash(d.Path))
				}
				if err != nil || now.mod.UnixNano() != d.ModTime || now.ino != d.Inode || now.ctime != d.ChangeTime || d.ChangeTime >= limit {
					bad.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	return !bad.Load()
}

// readChanged is the site as the cache records it but for the paths
// changed (files, or folders standing for all under them): those are
// statted, and hashed if the cache does not know them as they are. ok is
// false when something was not as expected; the caller walks instead.
func readChanged(dir string, c *digestCache, changed []string) ([]siteFile, bool) {
	sw := &siteWalk{root: filepath.Clean(dir)}
	set := make(map[string]bool, len(changed))
	for _, p := range changed {
		set[p] = true
	}
	kept := make([]siteFile, 0, len(c.order)+len(changed))
	lastDir, lastAffected := "\x00", false
	for i, p := range c.order {
		parent, _ := splitPath(p)
		if parent != lastDir {
			lastDir, lastAffected = parent, underAny(set, parent)
		}
		if lastAffected || set[p] {
			continue
		}
		r := &c.recs[i]
		kept = append(kept, siteFile{abs: sw.join(filepath.FromSlash(p)), entry: sdk.ManifestFile{Path: p, Sha256: r.SHA256, Size: int(r.Size)}, cached: true, rec: r})
	}
	fresh, ok := changedFiles(sw, set, changed)
	if !ok || !hashChanged(c, fresh) {
		return nil, false
	}
	c.walked, c.read = c.Dirs, 0
	return mergeWalkOrder(kept, fresh), true
}

// changedFiles are the regular files now at the changed paths, or under
// those that are folders, in walk order.
func changedFiles(sw *siteWalk, set map[string]bool, changed []string) ([]siteFile, bool) {
	var fresh []siteFile
	for _, p := range changed {
		parent, _ := splitPath(p)
		if p == "" || watch.Hidden(p) || underAny(set, parent) {
			continue // left out, or walked with a folder above it
		}
		abs := sw.join(filepath.FromSlash(p))
		info, err := os.Lstat(abs)
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
			continue // deleted or renamed away
		case err != nil:
			return nil, false
		case info.Mode().IsRegular():
			fresh = append(fresh, siteFile{abs: abs, entry: sdk.ManifestFile{Path: p}})
		case info.IsDir():
			err := filepath.WalkDir(abs, func(path string, d fs.DirEntry, err error) error {
				switch {
				case err != nil:
					return err
				case path == abs:
					return nil
				case watch.Hidden(d.Name()) && d.IsDir():
					return filepath.SkipDir
				case watch.Hidden(d.Name()) || !d.Type().IsRegular():
					return nil
				}
				fresh = append(fresh, siteFile{abs: path, entry: sdk.ManifestFile{Path: p + "/" + filepath.ToSlash(path[len(abs)+1:])}})
				return nil
			})
			if err != nil {
				return nil, false
			}
		}
	}
	sortWalkOrder(fresh)
	return fresh, true
}

// hashChanged stats the changed files and hashes those the cache does not
// know as they are, on every core.
func hashChanged(c *digestCache, files []siteFile) bool {
	var wg sync.WaitGroup
	var failed sync.Once
	ok := true
	workers := max(1, min(runtime.NumCPU(), len(files)))
	for k := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k; i < len(files); i += workers {
				err := statFile(c, &files[i], func(sf *siteFile) (fileStat, error) { return lstatPath(sf.abs) })
				if err != nil || !files[i].stat.regular {
					failed.Do(func() { ok = false })
				}
			}
		}()
	}
	wg.Wait()
	return ok
}

// underAny reports whether the folder dir ("" the site's) or a folder
// above it is in set.
func underAny(set map[string]bool, dir string) bool {
	for dir != "" {
		if set[dir] {
			return true
		}
		dir, _ = splitPath(dir)
	}
	return false
}

// walkCompare orders slash-separated paths as the walk finds them: by
// name within a folder, a folder's files where its name comes (a "/"
// before any other byte).
func walkCompare(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if x == '/' {
			return -1
		}
		if y == '/' {
			return 1
		}
		if x < y {
			return -1
		}
		return 1
	}
	return len(a) - len(b)
}

func sortWalkOrder(files []siteFile) {
	slices.SortFunc(files, func(a, b siteFile) int { return walkCompare(a.entry.Path, b.entry.Path) })
}

// mergeWalkOrder merges two lists in walk order.
func mergeWalkOrder(a, b []siteFile) []siteFile {
	if len(b) == 0 {
		return a
	}
	out := make([]siteFile, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if walkCompare(a[i].entry.Path, b[j].entry.Path) <= 0 {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, b[j])
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}
