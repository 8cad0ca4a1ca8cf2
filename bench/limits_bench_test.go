package bench

import (
	"bufio"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the pgx driver, to read the cluster's settings

	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
)

// BenchmarkRateLimitedThroughNginx is rate-limited throughput end to end:
// three replicas on one PostgreSQL behind Debian's nginx (two workers,
// upstream keep-alive), trusting nginx's X-Forwarded-For, and many
// anonymous callers, each its own address, sending the cheapest
// rate-limited request (search_domains, anonymous) as fast as answers
// come. Each case runs the leased design (production) and the
// row-per-request one (server.Config.RateLimitRowPerRequest) in turn:
//
//   - over: 16 callers each under the default search limit (20 a second,
//     a burst of 60), far under what they send, so most answers are 429;
//   - generous: 64 callers under a limit of a million a second.
//
// It reports requests answered a second (200 and 429), the share refused
// and the most any caller was allowed over its limit for the run (burst
// + rate × duration): at most 1.1 is the limit held within 10 %. The
// load runs for PIER_BENCH_DURATION (default 5s) over PIER_BENCH_CONNS
// connections (default 64) whatever b.N is, callers of its own each run
// (-count up to 31); run it with -benchtime 1x on a durable cluster. It
// also reports the CPU per answer of this process (the three replicas
// and the load) and of PostgreSQL and nginx together:
//
//	PIER_TEST_PG_DURABLE=1 go test ./bench -run XXX -bench RateLimitedThroughNginx -benchtime 1x
func BenchmarkRateLimitedThroughNginx(b *testing.B) {
	db := testpg.NewDatabase(b)
	logDurability(b, db)
	pgRoot := postmaster(db)
	dur := envDuration("PIER_BENCH_DURATION", 5*time.Second)
	conns := envInt("PIER_BENCH_CONNS", 64)
	cases := []struct {
		name    string
		policy  server.RateLimit
		callers int
	}{
		{"over", server.DefaultRateLimits["search"], 16},
		{"generous", server.RateLimit{PerSecond: 1e6, Burst: 1 << 20}, 64},
	}
	round := 0
	for _, c := range cases {
		for _, rowPerRequest := range []bool{false, true} {
			design := map[bool]string{false: "leased", true: "row-per-request"}[rowPerRequest]
			b.Run(c.name+"/"+design, func(b *testing.B) {
				round++ // callers of its own, under -count too
				cfg := server.Config{DatabaseURL: db, TrustedProxies: []string{"127.0.0.1/32"},
					RateLimits:             map[string]server.RateLimit{"search": c.policy},
					RateLimitRowPerRequest: rowPerRequest}
				var addrs []string
				for range 3 {
					addrs = append(addrs, testserver.Start(b, cfg).Addr())
					// The search answered once, so that it is kept before
					// the load: a request the fast path cannot answer hands
					// its connection (nginx keeps it) to net/http for good.
					primeSearch(b, addrs[len(addrs)-1])
				}
				lb := testserver.NginxWith(b, testserver.NginxOptions{Workers: 2, Keepalive: 64}, addrs...)
				// Warm up (connections, the kept answer) with callers of
				// their own, so the measured callers start with full buckets.
				limitedLoad(b, lb, 128+round, c.callers, conns, time.Second, func() time.Duration { return 0 })
				b.ResetTimer()
				r := limitedLoad(b, lb, round, c.callers, conns, dur, func() time.Duration { return treeCPU(pgRoot, os.Getpid()) })
				b.StopTimer()
				r.report(b, c.policy)
			})
		}
	}
}

// loadResult is what limitedLoad counted.
type loadResult struct {
	allowed []int // 200s per caller
	refused int   // 429s
	elapsed time.Duration
	cpu     time.Duration // this process's: the replicas and the load
	others  time.Duration // PostgreSQL's and nginx's
}

func (r loadResult) report(b *testing.B, p server.RateLimit) {
	allowed, most := 0, 0
	for _, n := range r.allowed {
		allowed += n
		most = max(most, n)
	}
	total := allowed + r.refused
	bound := float64(p.Burst) + p.PerSecond*r.elapsed.Seconds()
	load, _ := os.ReadFile("/proc/loadavg")
	b.Logf("%d answers in %v: %d allowed, %d refused; the most allowed to one caller %d of a limit of %.0f; load average %s",
		total, r.elapsed.Round(time.Millisecond), allowed, r.refused, most, bound, strings.Join(strings.Fields(string(load))[:3], " "))
	b.ReportMetric(float64(total)/r.elapsed.Seconds(), "req/s")
	b.ReportMetric(100*float64(r.refused)/float64(max(total, 1)), "%refused")
	b.ReportMetric(float64(most)/bound, "max-allowed/limit")
	b.ReportMetric(float64(r.cpu.Microseconds())/float64(max(total, 1)), "µs-cpu/req")
	b.ReportMetric(float64(r.others.Microseconds())/float64(max(total, 1)), "µs-pg+nginx/req")
	if float64(most) > 1.1*bound {
		b.Errorf("a caller was allowed %d, over 1.1 × its limit of %.0f", most, bound)
	}
}

// limitedLoad sends GET /v1/domains/search?q=limits to nginx at addr for
// d over conns keep-alive connections, as callers anonymous callers at
// 10.net8.x.y (X-Forwarded-For): each connection sends as its callers in
// turn, and a caller has one connection, or several when there are fewer
// callers than connections.
func limitedLoad(b *testing.B, addr string, net8, callers, conns int, d time.Duration, others func() time.Duration) loadResult {
	r := loadResult{allowed: make([]int, callers)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start, cpu0, others0 := time.Now(), processCPU(), others()
	deadline := start.Add(d)
	for k := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := []int{k % callers} // fewer callers than connections
			for c := k + conns; c < callers; c += conns {
				mine = append(mine, c)
			}
			allowed, refused, err := sendAs(addr, net8, mine, deadline)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				b.Error(err)
			}
			for i, c := range mine {
				r.allowed[c] += allowed[i]
			}
			r.refused += refused
		}()
	}
	wg.Wait()
	r.elapsed, r.cpu, r.others = time.Since(start), processCPU()-cpu0, others()-others0
	return r
}

// sendAs sends the search over one connection as each of callers in turn
// until deadline, and answers the 200s per caller and the 429s.
func sendAs(addr string, net8 int, callers []int, deadline time.Time) (allowed []int, refused int, err error) {
	var conn net.Conn
	var br *bufio.Reader
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	reqs := make([][]byte, len(callers))
	for i, c := range callers {
		reqs[i] = fmt.Appendf(nil, "GET /v1/domains/search?q=limits HTTP/1.1\r\nHost: localhost\r\nX-Forwarded-For: 10.%d.%d.%d\r\n\r\n",
			net8, c/250, c%250+1)
	}
	allowed = make([]int, len(callers))
	for i := 0; time.Now().Before(deadline); i = (i + 1) % len(callers) {
		if conn == nil {
			// nginx ends a client's connection after keepalive_requests
			// (1000) answers, saying so: the next request takes a new one.
			if conn, err = net.Dial("tcp", addr); err != nil {
				return allowed, refused, err
			}
			br = bufio.NewReaderSize(conn, 64<<10)
		}
		if _, err := conn.Write(reqs[i]); err != nil {
			return allowed, refused, err
		}
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			return allowed, refused, err
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.Close {
			conn.Close()
			conn = nil
		}
		switch res.StatusCode {
		case http.StatusOK:
			allowed[i]++
		case http.StatusTooManyRequests:
			refused++
		default:
			return allowed, refused, fmt.Errorf("status %d", res.StatusCode)
		}
	}
	return allowed, refused, nil
}

// primeSearch asks the replica at addr for the search once, straight.
func primeSearch(b *testing.B, addr string) {
	req, _ := http.NewRequest("GET", "http://"+addr+"/v1/domains/search?q=limits", nil)
	req.Host = "localhost"
	req.Header.Set("X-Forwarded-For", "10.255.255.1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b.Fatalf("priming the search: %d", res.StatusCode)
	}
}

// logDurability logs the cluster's fsync and synchronous_commit, so a
// figure says what it was measured on.
func logDurability(b *testing.B, url string) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var fsync, syncCommit string
	if err := db.QueryRow(`SELECT current_setting('fsync'), current_setting('synchronous_commit')`).Scan(&fsync, &syncCommit); err != nil {
		b.Fatal(err)
	}
	b.Logf("PostgreSQL: fsync=%s synchronous_commit=%s", fsync, syncCommit)
}

// processCPU is the user and system CPU this process has spent.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// postmaster is the PID of the cluster that serves url (its socket
// directory holds data/postmaster.pid), or 0.
func postmaster(url string) int {
	_, dir, _ := strings.Cut(url, "host=")
	dir, _, _ = strings.Cut(dir, "&")
	b, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	return pid
}

// treeCPU is the user and system CPU of the processes running now at and
// below roots, this process excepted (getrusage has it): with the
// postmaster and this process as roots, PostgreSQL's and nginx's.
func treeCPU(roots ...int) time.Duration {
	type proc struct{ ppid, ticks int }
	procs := map[int]proc{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		_, rest, _ := strings.Cut(string(b), ") ")
		f := strings.Fields(rest)
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		utime, _ := strconv.Atoi(f[11])
		stime, _ := strconv.Atoi(f[12])
		procs[pid] = proc{ppid, utime + stime}
	}
	under := func(pid int) bool {
		for p := pid; p > 1; p = procs[p].ppid {
			if slices.Contains(roots, procs[p].ppid) {
				return true
			}
		}
		return false
	}
	ticks := 0
	for pid, p := range procs {
		if under(pid) || slices.Contains(roots, pid) && pid != os.Getpid() {
			ticks += p.ticks
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

func envInt(name string, def int) int {
	var n int
	if _, err := fmt.Sscan(os.Getenv(name), &n); err == nil && n > 0 {
		return n
	}
	return def
}
