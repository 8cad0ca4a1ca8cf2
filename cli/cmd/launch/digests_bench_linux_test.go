package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkRelaunchLocal times what a relaunch of a site of 20,000 files
// does on the machine before and after its one request: reading the
// digest cache, walking and statting the site, what changed since the
// last bundle, and writing the cache again.
func BenchmarkRelaunchLocal(b *testing.B) { benchmarkRelaunchLocal(b, 20000) }

// BenchmarkRelaunchLocal100k is BenchmarkRelaunchLocal of 100,000 files.
func BenchmarkRelaunchLocal100k(b *testing.B) { benchmarkRelaunchLocal(b, 100000) }

// BenchmarkRelaunchWatched100k is BenchmarkRelaunchLocal100k with the
// watcher's answer (one file changed) standing in for the walk.
func BenchmarkRelaunchWatched100k(b *testing.B) { benchmarkRelaunch(b, 100000, true) }

func benchmarkRelaunchLocal(b *testing.B, n int) { benchmarkRelaunch(b, n, false) }

func benchmarkRelaunch(b *testing.B, n int, watched bool) {
	dir := filepath.Join(b.TempDir(), "site")
	for i := range n {
		sub := filepath.Join(dir, "p", fmt.Sprintf("%04d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("%06d.html", i)), []byte(fmt.Sprint(i)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	path := filepath.Join(b.TempDir(), "cache")
	_, c := walkRemembered(b, dir, path, "bnd_1")
	c.Written = time.Now().Add(time.Hour).UnixNano()
	c.save(path)
	cpu0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		c := loadDigestCache(path)
		var files []siteFile
		var err error
		if watched {
			var ok bool
			files, ok = readChanged(dir, c, []string{"p/0007/000700.html"})
			if !ok {
				b.Fatal("readChanged")
			}
		} else if files, err = readSite(dir, c); err != nil {
			b.Fatal(err)
		}
		changes, _ := c.changesSince(files)
		if len(changes) != 0 {
			b.Fatal(len(changes))
		}
		w := c.Written
		c.remember(files, "bnd_1")
		c.Written = w
		c.save(path)
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWatchedRelaunchCache100k is what a relaunch of 100,000 files
// that the watcher answered costs on the machine, the files left out:
// reading the cache, the site from it with one path changed (gone),
// what changed, and writing the cache.
func BenchmarkWatchedRelaunchCache100k(b *testing.B) {
	const n = 100000
	dir, path := b.TempDir(), filepath.Join(b.TempDir(), "cache")
	c := &digestCache{Written: time.Now().UnixNano(), Bundle: "bnd_1", Watch: "0123456789abcdef:7"}
	for i := range n {
		c.order = append(c.order, fmt.Sprintf("p/%04d/%06d.html", i/100, i))
		c.recs = append(c.recs, cachedFile{Size: 1024, ModTime: 1e18, Inode: int64(i), ChangeTime: 1e18, SHA256: fmt.Sprintf("%064x", i)})
		if i%100 == 0 {
			c.Dirs = append(c.Dirs, dirRecord{Path: fmt.Sprintf("p/%04d", i/100), ModTime: 1e18, Inode: int64(i), ChangeTime: 1e18})
		}
	}
	c.save(path)
	cpu0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		c := loadDigestCache(path)
		files, ok := readChanged(dir, c, []string{"p/0007/000700.html"})
		if !ok || len(files) != n-1 {
			b.Fatal(ok, len(files))
		}
		c.changesSince(files)
		c.watchNext = c.Watch
		c.remember(files, "bnd_1")
		c.save(path)
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// BenchmarkWatchedDeployLocal100k is the local part of a deploy through
// the watcher of a site of 100,000 files, one path named (gone): the
// cache's header and journal read, the named path's record found in
// its text, what changed, and the journal written.
func BenchmarkWatchedDeployLocal100k(b *testing.B) {
	const n = 100000
	path := filepath.Join(b.TempDir(), "cache")
	c := &digestCache{Written: time.Now().UnixNano(), Bundle: "bnd_1", Watch: "0123456789abcdef:7"}
	for i := range n {
		c.order = append(c.order, fmt.Sprintf("p/%04d/%06d.html", i/100, i))
		c.recs = append(c.recs, cachedFile{Size: 1024, ModTime: 1e18, Inode: int64(i), ChangeTime: 1e18, SHA256: fmt.Sprintf("%064x", i)})
	}
	c.save(path)
	cpu0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		wb := readWatchedBase(path)
		set := map[string]bool{"p/0007/000700.html": true}
		old := wb.oldRecords(set)
		if len(old) != 1 {
			b.Fatal(old)
		}
		deltaOf(nil, old)
		// The journal records the path as changed (not gone), so that
		// every operation finds it again.
		e := old["p/0007/000700.html"]
		e.SHA256 = strings.Repeat("e", 64)
		d := &cacheDelta{base: wb.head.Written, bundle: "bnd_2", watch: "0123456789abcdef:8", files: n, paths: []string{"p/0007/000700.html"}, recs: []cachedFile{e}}
		if err := d.write(path); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}
