package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
)

// The server-CPU benchmarks: an agent's real requests (a key on a cached
// read, a write) over loopback HTTP to a server in a process of its own,
// this test binary run again as the server (serveChild), so that the CPU
// it reports is the server's alone, read from /proc before and after.
// Each reports server-µs/op (user+system CPU of the server over requests
// answered) beside ns/op, and server-µs/op is the number to read: the
// client's work and the machine's other load barely move it.
//
//	go test -run '^$' -bench 'ServerCPU' -benchtime 5000x ./bench/
//
// Goals (issue "Performance, part three"): a keyed cached read costs at
// most 1.5× the anonymous one; create_quote at most 250 µs, on SQLite and
// on PostgreSQL.

// childEnv, when set, makes this binary a server: the value is its
// configuration as JSON (childConfig).
const childEnv = "PIER_BENCH_CHILD_SERVER"

type childConfig struct {
	DataDir, DatabaseURL string
	// CPUProfile, when set, is where the server writes its CPU profile
	// (from PIER_BENCH_CPUPROFILE in the benchmark's environment).
	CPUProfile string
}

// serveChild runs the server childEnv describes until stdin closes,
// after printing its address; it is called from TestMain.
func serveChild(spec string) int {
	var c childConfig
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	unlimited := server.RateLimit{PerSecond: 1e9, Burst: 1e9}
	s, stop, err := testserver.Serve(server.Config{DataDir: c.DataDir, DatabaseURL: c.DatabaseURL, HTTPAddr: "127.0.0.1:0",
		RateLimits: map[string]server.RateLimit{"search": unlimited, "quotes": unlimited}},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if c.CPUProfile != "" {
		if f, err := os.Create(c.CPUProfile); err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	fmt.Println(s.Addr())
	io.Copy(io.Discard, os.Stdin)
	stop()
	return 0
}

// childServer starts this binary as a server on dataDir (or databaseURL)
// and returns its address and process id.
func childServer(b *testing.B, c childConfig) (addr string, pid int) {
	b.Helper()
	c.CPUProfile = os.Getenv("PIER_BENCH_CPUPROFILE")
	spec, _ := json.Marshal(c)
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("the server process did not start: %v", err)
	}
	return strings.TrimSpace(line), cmd.Process.Pid
}

// cpuSeconds is a process's user and system CPU so far, from /proc.
func cpuSeconds(b *testing.B, pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command name (which may hold spaces).
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ is 100 on Linux
}

// serverCPU runs req b.N times from 4 client goroutines and reports the
// server's CPU per request.
func serverCPU(b *testing.B, pid int, req func(c *http.Client) error) {
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	for range 200 { // warm: connections, caches, prepared statements
		if err := req(c); err != nil {
			b.Fatal(err)
		}
	}
	before := cpuSeconds(b, pid)
	b.ResetTimer()
	b.SetParallelism(2) // 2×GOMAXPROCS goroutines: the server stays busy
	var failed atomic.Pointer[error]
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := req(c); err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		}
	})
	b.StopTimer()
	if e := failed.Load(); e != nil {
		b.Fatal(*e)
	}
	b.ReportMetric((cpuSeconds(b, pid)-before)*1e6/float64(b.N), "server-µs/op")
}

// send makes one request and checks its status.
func send(c *http.Client, method, url, key string, body []byte, want int) error {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	r, err := c.Do(req)
	if err != nil {
		return err
	}
	got, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, url, r.StatusCode, got)
	}
	return nil
}

// cpuEngines are the stores the write benchmarks run on.
var cpuEngines = []struct {
	name string
	url  func(b *testing.B) string
}{
	{"sqlite", func(*testing.B) string { return "" }},
	{"postgres", func(b *testing.B) string { return testpg.NewDatabase(b) }},
}

// BenchmarkServerCPURead is the same cached domain search anonymously
// (the listener's fast path) and with a key, and a keyed read of a
// project (an agent operation: key, scope, the store), on SQLite.
func BenchmarkServerCPURead(b *testing.B) {
	dir := b.TempDir()
	key, project := adminSetupOn(b, dir, "", 1000)
	addr, pid := childServer(b, childConfig{DataDir: dir})
	search := "http://" + addr + "/v1/domains/search?q=acme&tldAllowlist=com,dev,io&maxFirstYearPriceUsd=50"
	b.Run("search/anonymous", func(b *testing.B) {
		serverCPU(b, pid, func(c *http.Client) error { return send(c, "GET", search, "", nil, 200) })
	})
	b.Run("search/keyed", func(b *testing.B) {
		serverCPU(b, pid, func(c *http.Client) error { return send(c, "GET", search, key, nil, 200) })
	})
	b.Run("get_project/keyed", func(b *testing.B) {
		url := "http://" + addr + "/v1/projects/" + project
		serverCPU(b, pid, func(c *http.Client) error { return send(c, "GET", url, key, nil, 200) })
	})
}

// BenchmarkServerCPUCreateQuote is create_quote for a month of a service
// through the HTTP door, with a key, on SQLite and PostgreSQL: each
// request validates, prices, holds the budget and writes the quote and
// its ledger entry.
func BenchmarkServerCPUCreateQuote(b *testing.B) {
	body := []byte(`{"projectId":"%s","items":[{"kind":"service","workload":"dynamic_service","months":1}]}`)
	for _, e := range cpuEngines {
		b.Run(e.name, func(b *testing.B) {
			dir, url := b.TempDir(), e.url(b)
			key, project := adminSetupOn(b, dir, url, 1_000_000)
			addr, pid := childServer(b, childConfig{DataDir: dir, DatabaseURL: url})
			q := []byte(fmt.Sprintf(string(body), project))
			serverCPU(b, pid, func(c *http.Client) error { return send(c, "POST", "http://"+addr+"/v1/quotes", key, q, 201) })
		})
	}
}
