package launch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pierhq/pier/cli/cmd/launch/watch"
	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
)

// watchers are the watcher processes a test's deploys started: this test
// binary run again as `pier __watch` (TestMain), in a session of its own
// as the CLI starts it.
type watchers struct {
	mu    sync.Mutex
	procs []*exec.Cmd
}

func useTestWatchers(t *testing.T) *watchers {
	t.Helper()
	ws := &watchers{}
	old := startWatcher
	// A deploy waits 50 ms for an answer and a second for a new watcher;
	// with every package's tests running beside these, a watcher can take
	// longer, and the deploy would walk: these tests check the answers,
	// not their time (bench/README.md has that).
	oldTimeout, oldStart := watchTimeout, watchStart
	watchTimeout, watchStart = 5*time.Second, 20*time.Second
	startWatcher = func(sock, root string) error {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "PIER_TEST_WATCH_ROOT="+root, "PIER_TEST_WATCH_SOCKET="+sock)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return err
		}
		ws.mu.Lock()
		ws.procs = append(ws.procs, cmd)
		ws.mu.Unlock()
		return nil
	}
	t.Cleanup(func() {
		startWatcher, watchTimeout, watchStart = old, oldTimeout, oldStart
		for _, c := range ws.all() {
			c.Process.Kill()
			c.Wait()
		}
	})
	return ws
}

func (ws *watchers) all() []*exec.Cmd {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return append([]*exec.Cmd(nil), ws.procs...)
}

// deployed is a deploy's watcher and what it did.
type deployed struct {
	w  *siteWatch
	st uploadStats
}

// incremental says whether the deploy went by the watcher's answer,
// reading and writing only the changed paths' records.
func (d deployed) incremental() bool { return d.st.watched }

// deploy uploads the site to the fake API as pier bundles upload does
// (asking the watcher, starting it as the upload would), and checks the
// bundle made against a walk of the whole site without a cache.
func deploy(t *testing.T, f *cmdutil.Factory, dir string) deployed {
	t.Helper()
	b, st, err := uploadDir(context.Background(), f, cmdutil.NewProgress(f), dir, "prj_1")
	if err != nil {
		t.Fatal(err)
	}
	want, err := readSite(dir, loadDigestCache(""))
	if err != nil {
		t.Fatal(err)
	}
	fb := fakes[f]
	fb.Mu.Lock()
	got := fb.Bundles[b.Data.BundleId]
	fb.Mu.Unlock()
	if len(got) != len(want) || st.files != len(want) {
		t.Fatalf("the bundle holds %d files (%d counted), the site %d\n%v\n%v", len(got), st.files, len(want), got, manifestOf(want))
	}
	for _, sf := range want {
		if got[sf.entry.Path] != sf.entry.Sha256 {
			t.Fatalf("the bundle has %s as %q, the site as %s", sf.entry.Path, got[sf.entry.Path], sf.entry.Sha256)
		}
	}
	real, _ := filepath.EvalSymlinks(dir)
	sock := watch.SocketPath(cacheRoot(f), real)
	return deployed{w: &siteWatch{sock: sock}, st: st}
}

// awaitWatcher waits until the watcher of dir answers.
func awaitWatcher(t *testing.T, f *cmdutil.Factory, dir string) *watch.Answer {
	t.Helper()
	real, _ := filepath.EvalSymlinks(dir)
	sock := watch.SocketPath(cacheRoot(f), real)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if a, err := watch.Query(sock, "", 0, time.Second); err == nil {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatal("no watcher answers for " + dir)
		}
	}
}

// fakes are the fake APIs of the factories watchFactory made.
var fakes = map[*cmdutil.Factory]*clitest.FakeBlobs{}

func watchFactory(t *testing.T, env map[string]string) *cmdutil.Factory {
	fb := &clitest.FakeBlobs{}
	srv := fakeBundleAPI(t, fb)
	env["PIER_CACHE_DIR"] = t.TempDir()
	env["PIER_BASE_URL"], env["PIER_API_KEY"] = srv.URL, "agk_test"
	f, _ := clitest.NewFactory(env)
	fakes[f] = fb
	t.Cleanup(func() { delete(fakes, f) })
	return f
}

// A deploy of a large site starts a watcher; the next deploy takes its
// token with a walk of the whole site; the one after that finds a
// one-file edit in place through the watcher, statting that file alone,
// and reads the same manifest as a walk of the whole site.
func TestWatcherFindsAnEditOfALargeSite(t *testing.T) {
	ws := useTestWatchers(t)
	dir := t.TempDir()
	site := map[string]string{}
	for i := range watcherFiles + 10 {
		site[fmt.Sprintf("p/%03d/%05d.html", i/100, i)] = fmt.Sprintf("<p>%05d</p>", i)
	}
	writeSite(t, dir, site)
	f := watchFactory(t, map[string]string{})
	if w := deploy(t, f, dir); w.incremental() || len(ws.all()) != 1 {
		t.Fatalf("the first deploy: %d watchers started", len(ws.all()))
	}
	awaitWatcher(t, f, dir)
	// This one goes by the watcher if the first deploy could vouch that
	// nothing changed between its walk and the watcher's start (the
	// files were written just before it: it could not), else it walks
	// and takes a token.
	deploy(t, f, dir)
	write(t, dir, "p/023/02345.html", "<p>EDIT!</p>") // the same size
	setOld(t, dir, "p/023/02345.html")
	if d := deploy(t, f, dir); !d.incremental() || d.st.uploaded != 1 {
		t.Fatalf("the edit was not found through the watcher: %+v", d.st)
	}
	if d := deploy(t, f, dir); !d.incremental() || d.st.uploaded != 0 || len(ws.all()) != 1 {
		t.Fatalf("unchanged: %+v, %d watchers", d.st, len(ws.all()))
	}
	// The cache read whole (with its journal) is the site as it is.
	path := digestCachePath(f, f.BaseURL(), "prj_1", dir)
	c := loadDigestCache(path)
	if files, err := readSite(dir, c); err != nil {
		t.Fatal(err)
	} else if changes, removed := c.changesSince(files); len(changes) != 0 || len(removed) != 0 {
		t.Fatalf("the cache and its journal differ from the site: %v, %v", changes, removed)
	}
}

// Every kind of change, deployed through the watcher (PIER_WATCHER=on,
// any size), reads what a walk of the whole site reads.
func TestWatcherDeploysEveryChange(t *testing.T) {
	useTestWatchers(t)
	dir := t.TempDir()
	writeSite(t, dir, map[string]string{"a.html": "a", "sub/b.html": "b", "sub/c.html": "c", "sub/deep/d.html": "d", "z/e.html": "e", "a-b.html": "ab"})
	setOld(t, dir, "a.html", "sub/b.html", "sub/c.html", "sub/deep/d.html", "z/e.html", "a-b.html")
	f := watchFactory(t, map[string]string{"PIER_WATCHER": "on"})
	deploy(t, f, dir) // starts the watcher and waits for it
	deploy(t, f, dir) // takes its token
	for _, c := range []struct {
		name   string
		change func()
	}{
		{"edit in place, time set back", func() { write(t, dir, "sub/b.html", "B"); setOld(t, dir, "sub/b.html") }},
		{"append", func() { appendTo(t, dir, "a.html", "more") }},
		{"truncate", func() { write(t, dir, "a.html", "") }},
		{"new file", func() { write(t, dir, "sub/new.html", "new") }},
		{"delete", func() { remove(t, dir, "sub/c.html") }},
		{"rename a file", func() { rename(t, dir, "sub/new.html", "z/renamed.html") }},
		{"new folder and a file in it", func() { write(t, dir, "fresh/deeper/f.html", "f") }},
		{"rename a folder", func() { rename(t, dir, "fresh", "sub/moved") }},
		{"a file of the moved folder edited", func() { write(t, dir, "sub/moved/deeper/f.html", "F") }},
		{"delete a folder", func() { os.RemoveAll(filepath.Join(dir, "sub/deep")) }},
		{"a hidden file and folder", func() {
			write(t, dir, ".env", "x")
			write(t, dir, ".git/HEAD", "x")
			write(t, dir, ".well-known/k", "k")
		}},
		{"a file replaced by a folder", func() { remove(t, dir, "a.html"); write(t, dir, "a.html/index.html", "i") }},
	} {
		c.change()
		if d := deploy(t, f, dir); !d.incremental() {
			t.Fatalf("%s: the deploy walked", c.name)
		}
	}
	// The cache read whole applies its journal: the site's files, in
	// the walk's order, with their contents.
	c := loadDigestCache(digestCachePath(f, f.BaseURL(), "prj_1", dir))
	files, err := readSite(dir, loadDigestCache(""))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i, sf := range files {
		paths = append(paths, sf.entry.Path)
		if i < len(c.recs) && c.recs[i].SHA256 != sf.entry.Sha256 {
			t.Fatalf("%s: the cache with its journal has %s", sf.entry.Path, c.recs[i].SHA256)
		}
	}
	if !slices.Equal(c.order, paths) {
		t.Fatalf("the cache with its journal: %q, the site %q", c.order, paths)
	}
	// Written whole, the cache leaves no journal.
	c.remember(files, "bnd_x")
	c.save(digestCachePath(f, f.BaseURL(), "prj_1", dir))
	if _, err := os.Stat(deltaPath(digestCachePath(f, f.BaseURL(), "prj_1", dir))); !os.IsNotExist(err) {
		t.Fatalf("a journal outlived the whole cache: %v", err)
	}
}

func appendTo(t *testing.T, dir, rel, s string) {
	t.Helper()
	fh, err := os.OpenFile(filepath.Join(dir, rel), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteString(s)
	fh.Close()
}

func rename(t *testing.T, dir, from, to string) {
	t.Helper()
	if err := os.Rename(filepath.Join(dir, from), filepath.Join(dir, to)); err != nil {
		t.Fatal(err)
	}
}

// A watcher killed between deploys: the next deploy walks the whole site
// (and starts another watcher, whose tokens the old cache's are not).
// Two sites have a watcher each, and neither hears the other's changes.
// With PIER_WATCHER=off, CI=true or PIER_NO_WATCHER, none starts.
func TestWatcherKilledAndTwoSites(t *testing.T) {
	ws := useTestWatchers(t)
	one, two := t.TempDir(), t.TempDir()
	writeSite(t, one, map[string]string{"a.html": "a", "b/c.html": "c"})
	writeSite(t, two, map[string]string{"x.html": "x"})
	f := watchFactory(t, map[string]string{"PIER_WATCHER": "on"})
	for _, dir := range []string{one, two, one, two} {
		deploy(t, f, dir)
	}
	if n := len(ws.all()); n != 2 {
		t.Fatalf("%d watchers for two sites", n)
	}
	write(t, two, "x.html", "X")
	if d := deploy(t, f, one); !d.incremental() || d.st.uploaded != 0 {
		t.Fatalf("site one heard site two: %+v", d.st)
	}
	if d := deploy(t, f, two); !d.incremental() || d.st.uploaded != 1 {
		t.Fatalf("site two: %+v", d.st)
	}
	ws.all()[0].Process.Kill()
	ws.all()[0].Wait()
	write(t, one, "b/c.html", "changed while no watcher ran")
	if w := deploy(t, f, one); w.incremental() {
		t.Fatal("a deploy after its watcher was killed took an answer as incremental")
	}
	if n := len(ws.all()); n != 3 {
		t.Fatalf("%d watchers started, want a third for the killed one's site", n)
	}
	if w := deploy(t, f, one); !w.incremental() {
		t.Fatal("the new watcher's token was not taken")
	}
	for _, env := range []map[string]string{{"PIER_WATCHER": "off"}, {"CI": "true"}, {"PIER_NO_WATCHER": "1"}, {"PIER_WATCHER": "on", "PIER_CACHE_DIR": "off"}} {
		g, _ := clitest.NewFactory(env)
		if env["PIER_CACHE_DIR"] == "" {
			g = watchFactory(t, env)
		}
		dir := t.TempDir()
		writeSite(t, dir, map[string]string{"a.html": "a"})
		if w := openSiteWatch(g, nil, dir, "", watcherFiles); w != nil {
			t.Fatalf("%v: a watcher", env)
		}
	}
	if n := len(ws.all()); n != 3 {
		t.Fatalf("%d watchers started with the watcher off", n)
	}
}

// Read from the cache and the changed paths alone (as a deploy the
// watcher answered does when it must make the whole cache, after an
// interrupted upload), the site is what a walk of it finds, in its order.
func TestReadChangedIsTheWalk(t *testing.T) {
	dir := t.TempDir()
	writeSite(t, dir, map[string]string{"a.html": "a", "a-b.html": "ab", "sub/b.html": "b", "sub/c.html": "c", "sub/deep/d.html": "d", "z/e.html": "e"})
	path := filepath.Join(t.TempDir(), "cache")
	_, c := walkRemembered(t, dir, path, "bnd_1")
	c.save(path)
	write(t, dir, "sub/b.html", "B")
	write(t, dir, "a/x.html", "x")
	remove(t, dir, "sub/c.html")
	os.RemoveAll(filepath.Join(dir, "sub/deep"))
	write(t, dir, ".hidden/y.html", "y")
	got, ok := readChanged(dir, loadDigestCache(path), []string{".hidden", "a", "sub/b.html", "sub/c.html", "sub/deep"})
	if !ok {
		t.Fatal("readChanged refused")
	}
	want, err := readSite(dir, loadDigestCache(""))
	if err != nil {
		t.Fatal(err)
	}
	if !sameFiles(got, want) {
		t.Fatalf("from the changes\n%v\nwalked\n%v", manifestOf(got), manifestOf(want))
	}
}

// pier __watch's flags, and --status of a folder no watcher watches: it
// says so (exit 0), with --json as an object; a watcher of it then
// answers --status.
func TestWatchCommand(t *testing.T) {
	f, _ := clitest.NewFactory(nil)
	var got *WatchOptions
	if code := clitest.RunWith(t, f, NewCmdWatch(f, func(o *WatchOptions) error { got = o; return nil }), "./site", "--idle", "5m", "--status", "--socket", "/tmp/s.sock"); code != 0 || got.Dir != "./site" || got.Idle != 5*time.Minute || !got.Status || got.Socket != "/tmp/s.sock" {
		t.Fatalf("exit %d %+v", code, got)
	}
	f, _ = clitest.NewFactory(nil)
	if code := clitest.RunWith(t, f, NewCmdWatch(f, func(*WatchOptions) error { return nil }), "./site", "--idle", "-1s"); code != cmdutil.ExitUsage {
		t.Fatalf("a negative --idle: exit %d", code)
	}
	useTestWatchers(t)
	dir := t.TempDir()
	writeSite(t, dir, map[string]string{"a.html": "a"})
	f = watchFactory(t, map[string]string{"PIER_WATCHER": "on"})
	status := func(args ...string) string {
		t.Helper()
		g, ts := clitest.NewFactory(map[string]string{"PIER_CACHE_DIR": cacheRoot(f)})
		if code := clitest.RunWith(t, g, NewCmdWatch(g, nil), append([]string{dir, "--status"}, args...)...); code != 0 {
			t.Fatalf("--status %v: exit %d\n%s", args, code, ts.Err)
		}
		return ts.Out.String()
	}
	if out := status("--json"); !strings.Contains(out, `"running": false`) && !strings.Contains(out, `"running":false`) {
		t.Fatalf("--status --json with no watcher: %s", out)
	}
	deploy(t, f, dir) // starts one
	if out := status(); !strings.HasPrefix(out, "watching ") {
		t.Fatalf("--status: %s", out)
	}
}

// The first deploy's watcher token is kept only when every file and
// folder is as the walk found it, and none changed just before it: an
// edit in place with its time set back, a new file and a file changed
// just before the walk all refuse it.
func TestUnchangedSinceTheWalk(t *testing.T) {
	dir := t.TempDir()
	writeSite(t, dir, map[string]string{"a.html": "a", "sub/b.html": "b"})
	walk := func() ([]siteFile, *digestCache) {
		c := loadDigestCache("")
		files, err := readSite(dir, c)
		if err != nil {
			t.Fatal(err)
		}
		return files, c
	}
	files, c := walk()
	if !unchangedSince(dir, files, c.walked, time.Now()) {
		t.Fatal("an unchanged site")
	}
	if unchangedSince(dir, files, c.walked, time.Now().Add(-time.Hour)) {
		t.Fatal("a site changed just before the walk")
	}
	write(t, dir, "sub/b.html", "B")
	setOld(t, dir, "sub/b.html")
	if unchangedSince(dir, files, c.walked, time.Now()) {
		t.Fatal("an edit in place, its time set back")
	}
	files, c = walk()
	write(t, dir, "sub/new.html", "n")
	if unchangedSince(dir, files, c.walked, time.Now()) {
		t.Fatal("a new file")
	}
}

// A deploy through the watcher whose last bundle the server no longer
// has, or that lacks a content the cache says it holds, walks the site
// and deploys it whole, as without the watcher; a failed upload records
// nothing, and the next deploy goes by the watcher again.
func TestWatcherDeployFallsBack(t *testing.T) {
	useTestWatchers(t)
	dir := t.TempDir()
	writeSite(t, dir, map[string]string{"a.html": "a", "sub/b.html": "b", "sub/c.html": "c"})
	f := watchFactory(t, map[string]string{"PIER_WATCHER": "on"})
	fb := fakes[f]
	deploy(t, f, dir)
	deploy(t, f, dir)
	fb.Mu.Lock()
	fb.Bundles = map[string]map[string]string{}
	fb.Mu.Unlock()
	write(t, dir, "a.html", "A")
	if d := deploy(t, f, dir); d.incremental() {
		t.Fatal("a deploy from a bundle the server lost went by the watcher")
	}
	fb.Mu.Lock()
	delete(fb.Stored, sha256Hex("c"))
	fb.Mu.Unlock()
	write(t, dir, "sub/b.html", "B")
	if d := deploy(t, f, dir); d.incremental() {
		t.Fatal("a deploy that the server lacked a content for went by the watcher")
	}
	if _, ok := fb.Stored[sha256Hex("c")]; !ok {
		t.Fatal("the lost content was not sent again")
	}
	fb.Mu.Lock()
	fb.FailAfter, fb.Puts = 1, []string{"an upload before"}
	fb.Mu.Unlock()
	write(t, dir, "sub/c.html", "C!")
	if _, _, err := uploadDir(context.Background(), f, cmdutil.NewProgress(f), dir, "prj_1"); err == nil {
		t.Fatal("an upload that failed did not fail")
	}
	fb.Mu.Lock()
	fb.FailAfter = 0
	fb.Mu.Unlock()
	if d := deploy(t, f, dir); !d.incremental() || d.st.uploaded != 1 {
		t.Fatalf("after a failed upload: %+v", d.st)
	}
}
