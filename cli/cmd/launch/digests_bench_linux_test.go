package launch

import (
	"fmt"
	"os"
	"path/filepath"
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

func benchmarkRelaunchLocal(b *testing.B, n int) {
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
		files, err := readSite(dir, c)
		if err != nil {
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
