package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pierhq/pier/cli/cmdutil"
)

// The journal's bound, through real deploys the watcher answers: a
// journal of maxDelta-1 records is still appended to (here by two
// records, to maxDelta+1); past maxDelta the next deploy writes the cache
// whole, with every path at its digest, and removes the journal; the
// one-file change after it starts a fresh journal of one record.
//
// The journal is filled by the deploy's own append (uploadWatched), not
// written by hand: one deploy of a folder of files moved into the site
// (the watcher names the folder, one path; the deploy appends a record a
// file under it, and sends their one content once), then deploys of one
// or two edited files to reach the exact counts. A deploy of maxDelta
// edits one by one would take thousands of deploys.
func TestJournalPastMaxDeltaWritesTheCacheWhole(t *testing.T) {
	useTestWatchers(t)
	dir := t.TempDir()
	writeSite(t, dir, map[string]string{"a.html": "a", "sub/b.html": "b"})
	setOld(t, dir, "a.html", "sub/b.html", "sub")
	f := watchFactory(t, map[string]string{"PIER_WATCHER": "on"})
	path := digestCachePath(f, f.BaseURL(), "prj_1", dir)
	deploy(t, f, dir) // starts the watcher and waits for it
	deploy(t, f, dir) // takes its token
	base, n := journalOf(t, path)
	bulk := maxDelta - 1 - n - 2
	moveInFolder(t, dir, "bulk", bulk)
	deployAppends(t, f, dir, path, base, n+bulk)
	for i := range 2 {
		write(t, dir, "a.html", fmt.Sprintf("edit %d", i))
		deployAppends(t, f, dir, path, base, n+bulk+1+i)
	}
	// maxDelta-1 records: the journal is still appended to.
	write(t, dir, "a.html", "at the bound")
	write(t, dir, "sub/b.html", "at the bound")
	deployAppends(t, f, dir, path, base, maxDelta+1)
	// maxDelta+1 records: the next deploy writes the cache whole.
	write(t, dir, "sub/c.html", "past the bound")
	if d := deploy(t, f, dir); d.incremental() {
		t.Fatalf("a journal of %d records was appended to again: %+v", maxDelta+1, d.st)
	}
	if _, err := os.Stat(deltaPath(path)); !os.IsNotExist(err) {
		t.Fatalf("the journal outlived the whole cache: %v", err)
	}
	written := wholeCacheIsTheSite(t, path, dir)
	if written <= base {
		t.Fatalf("the cache was not written anew: written %d, the old %d", written, base)
	}
	// The next change goes to a fresh journal on the new cache.
	write(t, dir, "sub/c.html", "after the bound")
	deployAppends(t, f, dir, path, written, 1)
}

// journalOf is the cache's Written and how many records its journal
// holds (0 when there is none).
func journalOf(t *testing.T, path string) (int64, int) {
	t.Helper()
	wb := readWatchedBase(path)
	if wb == nil {
		t.Fatal("no cache at " + path)
	}
	if _, err := os.Stat(deltaPath(path)); err == nil && wb.delta == nil {
		t.Fatal("a journal the cache does not read")
	}
	if wb.delta == nil {
		return wb.head.Written, 0
	}
	return wb.head.Written, len(wb.delta.paths)
}

// deployAppends deploys through the watcher and checks that the deploy
// appended to the journal of the cache written at base, to want records,
// leaving the cache itself as it was.
func deployAppends(t *testing.T, f *cmdutil.Factory, dir, path string, base int64, want int) {
	t.Helper()
	if d := deploy(t, f, dir); !d.incremental() {
		t.Fatalf("toward %d records: the deploy walked", want)
	}
	if got, n := journalOf(t, path); got != base || n != want {
		t.Fatalf("the journal holds %d records on the cache written at %d, want %d on %d", n, got, want, base)
	}
}

// moveInFolder makes a folder of n files of one content outside the site
// and renames it into it: one event, one path in the watcher's answer.
func moveInFolder(t *testing.T, dir, name string, n int) {
	t.Helper()
	staging := filepath.Join(t.TempDir(), name)
	if err := os.Mkdir(staging, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(staging, fmt.Sprintf("%05d.html", i)), []byte("<p>bulk</p>"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(staging, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// wholeCacheIsTheSite checks that the cache, read alone, holds every file
// of the site at its digest, in the walk's order, and returns its Written.
func wholeCacheIsTheSite(t *testing.T, path, dir string) int64 {
	t.Helper()
	c := loadDigestCache(path)
	files, err := readSite(dir, loadDigestCache(""))
	if err != nil {
		t.Fatal(err)
	}
	paths := make([]string, len(files))
	for i, sf := range files {
		paths[i] = sf.entry.Path
	}
	if !slices.Equal(c.order, paths) || c.files != len(files) {
		t.Fatalf("the whole cache holds %d paths (its header says %d), the site %d", len(c.order), c.files, len(files))
	}
	for i, sf := range files {
		if c.recs[i].SHA256 != sf.entry.Sha256 || c.recs[i].Size != int64(sf.entry.Size) {
			t.Fatalf("%s: the whole cache has %s (%d bytes), the site %s (%d)", sf.entry.Path, c.recs[i].SHA256, c.recs[i].Size, sf.entry.Sha256, sf.entry.Size)
		}
	}
	if c.Bundle == "" {
		t.Fatal("the whole cache names no bundle")
	}
	return c.Written
}
