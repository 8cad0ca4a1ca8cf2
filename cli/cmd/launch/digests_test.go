package launch

import (
	"os"
	"path/filepath"
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
	if c.Bundle != "bnd_1" || c.Files["p/a.html"] != (cachedFile{Size: 3, ModTime: 1000, SHA256: sha}) {
		t.Fatalf("version 2: %+v", c)
	}
	if got, ok, exact := c.lookup("p/a.html", fileStat{size: 3, mod: time.Unix(0, 1000), ino: 7, ctime: 9}); !ok || exact || got != sha {
		t.Fatal("a version 2 record is not trusted on size and time, or not written again")
	}
	c.Files["p/a.html"] = cachedFile{Size: 3, ModTime: 1000, Inode: 7, ChangeTime: 9, SHA256: sha}
	v3 := filepath.Join(dir, "v3")
	c.save(v3)
	back := loadDigestCache(v3)
	if back.Files["p/a.html"] != c.Files["p/a.html"] || back.Bundle != "bnd_1" {
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
	c := &digestCache{Files: map[string]cachedFile{"a": {Size: 1, SHA256: sha('a')}, "b": {Size: 1, SHA256: sha('b')}, "c": {Size: 1, SHA256: sha('c')}}}
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
