package launch

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A folder whose times are as the cache recorded is not read again, and
// yet every change to the site is seen: the walk with the cache finds
// the same files and contents as a walk without it, after an edit in
// place (times set back too), a new file, a removed file, a renamed
// file, a file replaced by a folder, and a new file in a folder whose
// time was set back.
func TestWalkSkipsUnchangedFolders(t *testing.T) {
	// Elsewhere the system tells no inodes or change times, so every
	// folder is read again: the walks must still agree, and only the
	// count of folders read differs.
	skips := runtime.GOOS == "linux"
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dir string)
		read   int // the folders read again
	}{
		{"edit in place", func(t *testing.T, dir string) {
			write(t, dir, "sub/b.html", "B!") // same size
			setOld(t, dir, "sub/b.html")
		}, 0},
		{"new file", func(t *testing.T, dir string) { write(t, dir, "sub/new.html", "new") }, 1},
		{"removed file", func(t *testing.T, dir string) { remove(t, dir, "sub/c.html") }, 1},
		{"rename", func(t *testing.T, dir string) {
			if err := os.Rename(filepath.Join(dir, "sub/c.html"), filepath.Join(dir, "sub/e.html")); err != nil {
				t.Fatal(err)
			}
		}, 1},
		{"file replaced by a folder", func(t *testing.T, dir string) {
			remove(t, dir, "sub/c.html")
			write(t, dir, "sub/c.html/x.html", "x")
		}, 2},
		{"new file, folder time set back", func(t *testing.T, dir string) {
			write(t, dir, "sub/deep/new.html", "new")
			setOld(t, dir, "sub/deep")
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{"a.html", "sub/b.html", "sub/c.html", "sub/deep/d.html", "other/f.html"} {
				write(t, dir, f, f[len(f)-6:len(f)-5]+"!")
			}
			setOld(t, dir, "sub/deep/d.html", "sub/deep", "sub/b.html", "sub/c.html", "sub", "other/f.html", "other", "a.html", ".")
			path := filepath.Join(t.TempDir(), "cache")
			files, c := walkRemembered(t, dir, path, "bnd_1")
			c.save(path)
			c = loadDigestCache(path)
			if again, err := readSite(dir, c); err != nil || (skips && c.read != 0) || !sameFiles(again, files) {
				t.Fatalf("unchanged: %d folders read, err %v", c.read, err)
			}
			tc.change(t, dir)
			c = loadDigestCache(path)
			got, err := readSite(dir, c)
			if err != nil {
				t.Fatal(err)
			}
			want, err := readSite(dir, loadDigestCache(""))
			if err != nil {
				t.Fatal(err)
			}
			if !sameFiles(got, want) {
				t.Fatalf("with the cache\n%v\nwithout\n%v", manifestOf(got), manifestOf(want))
			}
			if skips && c.read != tc.read {
				t.Fatalf("%d folders read, want %d: the changed ones, no other", c.read, tc.read)
			}
			// What the cache records now is the changed site.
			c.remember(got, "bnd_2")
			c.save(path)
			c = loadDigestCache(path)
			if again, err := readSite(dir, c); err != nil || !sameFiles(again, want) {
				t.Fatalf("after the change was recorded: %v", err)
			}
		})
	}
}

// walkRemembered walks dir with the cache at path, as an upload does, and
// has the cache remember what it found as bundle: the caller saves it.
func walkRemembered(tb testing.TB, dir, path, bundle string) ([]siteFile, *digestCache) {
	tb.Helper()
	c := loadDigestCache(path)
	files, err := readSite(dir, c)
	if err != nil {
		tb.Fatal(err)
	}
	c.remember(files, bundle)
	return files, c
}

func write(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, dir, rel string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(rel))); err != nil {
		t.Fatal(err)
	}
}

// setOld sets paths' times an hour back, in the order given (a folder
// after what is in it).
func setOld(t *testing.T, dir string, rels ...string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	for _, rel := range rels {
		if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(rel)), old, old); err != nil {
			t.Fatal(err)
		}
	}
}

func sameFiles(a, b []siteFile) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].entry != b[i].entry || a[i].abs != b[i].abs {
			return false
		}
	}
	return true
}

func manifestOf(files []siteFile) []string {
	var out []string
	for _, sf := range files {
		out = append(out, sf.entry.Path+" "+sf.entry.Sha256[:8])
	}
	return out
}

// A small file kept from its hash to its upload is the bytes hashed, as
// the file read again would be, also when it grew since it was statted
// or is empty.
func TestHashFileKeepsWhatItHashed(t *testing.T) {
	dir := t.TempDir()
	for _, content := range []string{"", "one", strings.Repeat("x", keepFileBytes)} {
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		want, n, data, err := hashFile(p, -1)
		if err != nil || data != nil || n != int64(len(content)) {
			t.Fatalf("not kept: %d bytes, %v, %v", n, data, err)
		}
		for _, statted := range []int64{int64(len(content)), 0} { // as statted, and grown since
			sum, n, data, err := hashFile(p, statted)
			if err != nil || sum != want || n != int64(len(content)) || string(data) != content {
				t.Fatalf("kept at %d: %s %d %q, want %s: %v", statted, sum, n, data, want, err)
			}
			rc, _ := siteFile{abs: p, data: data}.open()
			sent, _ := io.ReadAll(rc)
			if string(sent) != content {
				t.Fatalf("sent %q", sent)
			}
		}
	}
}

// A file that grew past keepFileBytes since it was statted is not kept
// (what is held stays bounded whatever the file grew to), and its hash
// and size are still the whole file's.
func TestHashFileKeepsNoFileThatGrewPastTheBound(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	content := strings.Repeat("y", 3*keepFileBytes)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	want, _, _, err := hashFile(p, -1)
	if err != nil {
		t.Fatal(err)
	}
	sum, n, data, err := hashFile(p, 10) // statted at 10 bytes
	if err != nil || sum != want || n != int64(len(content)) || data != nil {
		t.Fatalf("grown file: %s %d, %d bytes kept, %v; want %s", sum, n, len(data), err, want)
	}
}
