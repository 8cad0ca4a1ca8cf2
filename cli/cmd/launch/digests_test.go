package launch

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/sdk"
)

// A cache written before inodes and change times (version 2) is still
// read, and trusted on size and time alone until the next upload writes
// version 3; version 3 round-trips every field.
func TestDigestCacheVersions(t *testing.T) {
	dir := t.TempDir()
	sha := strings.Repeat("a", 64)
	v2 := filepath.Join(dir, "v2")
	if err := os.WriteFile(v2, []byte("pier-digests 2 5000000000 0 bnd_1\n"+sha+" 3 1000 p/a.html\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := loadDigestCache(v2)
	if e, _ := c.record("p/a.html"); c.Bundle != "bnd_1" || e != (cachedFile{Size: 3, ModTime: 1000, SHA256: sha}) {
		t.Fatalf("version 2: %+v", c)
	}
	if got, ok, exact := c.lookup("p/a.html", fileStat{size: 3, mod: time.Unix(0, 1000), ino: 7, ctime: 9}); !ok || exact || got != sha {
		t.Fatal("a version 2 record is not trusted on size and time, or not written again")
	}
	c.recs[0] = cachedFile{Size: 3, ModTime: 1000, Inode: 7, ChangeTime: 9, SHA256: sha}
	v3 := filepath.Join(dir, "v3")
	c.save(v3)
	back := loadDigestCache(v3)
	if e, _ := back.record("p/a.html"); e != c.recs[0] || back.Bundle != "bnd_1" {
		t.Fatalf("version 3 round trip: %+v", back)
	}
	for _, st := range []fileStat{
		{size: 3, mod: time.Unix(0, 1000), ino: 8, ctime: 9},  // another file at the path
		{size: 3, mod: time.Unix(0, 1000), ino: 7, ctime: 10}, // changed, its time set back
	} {
		if _, ok, _ := back.lookup("p/a.html", st); ok {
			t.Fatalf("%+v trusted", st)
		}
	}
	if _, ok, exact := back.lookup("p/a.html", fileStat{size: 3, mod: time.Unix(0, 1000), ino: 7, ctime: 9}); !ok || !exact {
		t.Fatal("the same record is not trusted")
	}
}

// unsent sends one file per content the last bundle did not hold: a file
// whose content is as cached is not sent, nor a changed file whose new
// content another cached path holds.
func TestUnsentContents(t *testing.T) {
	sha := func(c byte) string { return strings.Repeat(string(c), 64) }
	c := &digestCache{order: []string{"a", "b", "c"}, recs: []cachedFile{{Size: 1, SHA256: sha('a')}, {Size: 1, SHA256: sha('b')}, {Size: 1, SHA256: sha('c')}}}
	file := func(path string, content byte) siteFile {
		return siteFile{abs: path, entry: sdk.ManifestFile{Path: path, Sha256: sha(content), Size: 1}}
	}
	files := []siteFile{file("a", 'a'), file("b", 'c'), file("c", 'd'), file("d", 'd'), file("e", 'e')}
	todo, n := c.unsent(files)
	var paths []string
	for _, sf := range todo {
		paths = append(paths, sf.abs)
	}
	if !slices.Equal(paths, []string{"c", "e"}) || n != 2 {
		t.Fatalf("unsent %v, %d bytes", paths, n)
	}
	if changes, removed := c.changesSince(files[:2]); len(changes) != 1 || !slices.Equal(removed, []string{"c"}) {
		t.Fatalf("changes %v, removed %v", changes, removed)
	}
}

// The parallel walk lists a site as filepath.WalkDir did, in its order:
// hidden files and folders left out but .well-known, symbolic links left
// out, a folder of more than walkChunk files statted in pieces, more
// folders than walkOpen.
func TestReadSiteOrder(t *testing.T) {
	dir := t.TempDir()
	var want []string
	write := func(rel string, listed bool) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(rel), 0o644); err != nil {
			t.Fatal(err)
		}
		if listed {
			want = append(want, rel)
		}
	}
	write(".hidden", false)
	write(".git/config", false)
	write(".well-known/security.txt", true)
	write("a-b.html", true)
	write("a/z.html", true)
	write("a/b/c.html", true)
	write("a/y.html", true)
	for i := range walkChunk + 10 {
		write(fmt.Sprintf("big/%04d.txt", i), true)
	}
	write("index.html", true)
	for i := range 2*walkOpen + 3 { // more folders than are held open at once
		write(fmt.Sprintf("many/%03d/x.html", i), true)
	}
	if err := os.Symlink("index.html", filepath.Join(dir, "link.html")); err != nil {
		t.Fatal(err)
	}
	var walked []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, path)
		if strings.HasPrefix(d.Name(), ".") && d.Name() != ".well-known" && rel != "." {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			walked = append(walked, filepath.ToSlash(rel))
		}
		return nil
	})
	files, err := readSite(dir, loadDigestCache(""))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sf := range files {
		got = append(got, sf.entry.Path)
		if sf.abs != filepath.Join(dir, filepath.FromSlash(sf.entry.Path)) || sf.entry.Sha256 == "" || sf.entry.Size != len(sf.entry.Path) {
			t.Fatalf("%+v", sf)
		}
	}
	if !slices.Equal(got, walked) || len(got) != len(want) {
		t.Fatalf("walked\n%v\nwant\n%v", got, walked)
	}
}

// A file written again in place with its size and modification time set
// back is hashed again (its change time moved), as is a file replaced by
// another (a new inode); a cache file cut short or garbled is read as
// none, and the next save replaces it whole.
func TestDigestCacheNoticesEdits(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.html", "b.html"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("one"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	for _, name := range []string{"a.html", "b.html"} {
		if err := os.Chtimes(filepath.Join(dir, name), old, old); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "digests", "x")
	files, c := walkRemembered(t, dir, path, "bnd_1")
	c.save(path)
	sums := map[string]string{}
	for _, sf := range files {
		sums[sf.entry.Path] = sf.entry.Sha256
	}
	time.Sleep(20 * time.Millisecond) // a change time of its own
	if err := os.WriteFile(filepath.Join(dir, "a.html"), []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "b.tmp")
	if err := os.WriteFile(tmp, []byte("owt"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "b.html")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.html", "b.html"} {
		if err := os.Chtimes(filepath.Join(dir, name), old, old); err != nil {
			t.Fatal(err)
		}
	}
	files, err := readSite(dir, loadDigestCache(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, sf := range files {
		if runtime.GOOS != "linux" {
			break // the inode and change time are read on Linux alone
		}
		if sf.entry.Sha256 == sums[sf.entry.Path] || sf.cached {
			t.Fatalf("%s edited in place, same size and time, not noticed", sf.entry.Path)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{data[:len(data)-5], bytes.Replace(data, []byte(" "), []byte("x"), 3), []byte("pier-digests 9 1 0 -\n"), {}} {
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		if c := loadDigestCache(path); len(c.order) != 0 || c.Bundle != "" || c.usable() {
			t.Fatalf("a garbled cache was read: %+v", c)
		}
	}
	c = loadDigestCache(path)
	c.remember(files, "bnd_2")
	c.save(path)
	if back := loadDigestCache(path); back.Bundle != "bnd_2" || len(back.order) != 2 {
		t.Fatalf("the cache was not written again: %+v", back)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".digests-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}
