// Command soak drives a running Pier with mixed traffic for a fixed time
// and reports errors and the server's resident memory every interval. It is
// the load half of bench/soak.sh, which starts the server and a site.
//
// The traffic is what an internet-facing Pier sees: edge hits on a live site
// over HTTP and HTTPS, edge hits naming random unknown Hosts, authenticated
// API reads, quotes (created and released), anonymous searches, MCP tool
// calls and JSON-RPC batches, DNS queries for a served name and for random
// names, and slow connections that trickle their headers. With -smtp and
// -mail-to, an SMTP phase runs alongside (smtp.go): legitimate mail, and
// floods of sessions, unknown recipients and oversized messages. Requests are sent
// open-loop at a fixed rate; -rate 0 first measures capacity with a short
// closed-loop run and then drives at half of it.
//
// Every answer is checked: a live page must be 200 with its bytes, an
// unknown Host 404, a DNS query for the served name NOERROR with an answer,
// and so on. Anything else is an error, and the run exits 1 if any error
// was seen or memory was not flat (the spread of RSS samples after warm-up
// over the first of them) within -flat.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

type config struct {
	base, httpsAddr, dnsAddr   string
	siteHost, siteBody, domain string
	apiKey, project            string
	duration, every, warmup    time.Duration
	rate                       int
	workers, slowConns         int
	slowLimit                  time.Duration
	pid                        int
	flat                       float64
	smtpAddr, mailTo           string
}

func main() {
	var c config
	flag.StringVar(&c.base, "base", "http://127.0.0.1:18190", "Pier's HTTP listener (API, MCP and edge)")
	flag.StringVar(&c.httpsAddr, "https", "127.0.0.1:18543", "Pier's TLS listener")
	flag.StringVar(&c.dnsAddr, "dns", "127.0.0.1:18153", "Pier's DNS listener")
	flag.StringVar(&c.siteHost, "site-host", "", "preview host of the live site")
	flag.StringVar(&c.siteBody, "site-body", "", "file holding the bytes the site's / must answer")
	flag.StringVar(&c.domain, "domain", "", "a domain whose zone Pier serves (empty: no DNS hits on a real name)")
	flag.StringVar(&c.apiKey, "api-key", os.Getenv("PIER_API_KEY"), "API key for reads and quotes")
	flag.StringVar(&c.project, "project", "", "project id for reads and quotes")
	flag.DurationVar(&c.duration, "duration", 10*time.Minute, "how long to drive traffic")
	flag.DurationVar(&c.every, "every", 30*time.Second, "report interval")
	flag.DurationVar(&c.warmup, "warmup", 2*time.Minute, "memory samples before this are warm-up")
	flag.IntVar(&c.rate, "rate", 0, "requests per second; 0 measures capacity and drives at half of it")
	flag.IntVar(&c.workers, "workers", 64, "concurrent requests at most")
	flag.IntVar(&c.slowConns, "slow", 32, "slow connections kept open at a time")
	flag.DurationVar(&c.slowLimit, "slow-limit", 15*time.Second, "a slow connection held longer than this is an error")
	flag.IntVar(&c.pid, "pid", 0, "server process id, for its RSS")
	flag.Float64Var(&c.flat, "flat", 0.10, "largest allowed RSS spread after warm-up, as a fraction")
	flag.StringVar(&c.smtpAddr, "smtp", "", "Pier's SMTP listener; with -mail-to, adds the SMTP phase")
	flag.StringVar(&c.mailTo, "mail-to", "", "an address of Pier's that takes the legitimate mail")
	flag.Parse()
	if c.siteHost == "" || c.apiKey == "" || c.project == "" || c.pid == 0 {
		fmt.Fprintln(os.Stderr, "soak: -site-host, -api-key (or PIER_API_KEY), -project and -pid are required")
		os.Exit(2)
	}
	os.Exit(run(c))
}

func run(c config) int {
	d, err := newDriver(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 2
	}
	for _, o := range d.ops {
		if err := o.fn(context.Background()); err != nil {
			fmt.Fprintf(os.Stderr, "soak: %s fails before the run: %v\n", o.name, err)
			return 1
		}
	}
	if c.rate == 0 {
		capacity := d.calibrate(5 * time.Second)
		c.rate = max(capacity/2, 1)
		fmt.Printf("capacity %d req/s over a 5 s closed loop; driving at %d req/s\n", capacity, c.rate)
		d.resetCounts()
	}
	fmt.Printf("%d req/s for %s, %d slow connections, report every %s, warm-up %s\n", c.rate, c.duration, c.slowConns, c.every, c.warmup)
	fmt.Printf("%8s %10s %8s %8s %9s %9s %8s %8s\n", "elapsed", "requests", "errors", "dropped", "req/s", "rss_mib", "slow", "slow_max")

	ctx, cancel := context.WithTimeout(context.Background(), c.duration)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); d.slow(ctx) }()
	go func() { defer wg.Done(); d.drive(ctx, c.rate) }()
	var mail *smtpLoad
	if c.smtpAddr != "" && c.mailTo != "" {
		mail = &smtpLoad{addr: c.smtpAddr, rcpt: c.mailTo, report: func(op string, err error) {
			if err != nil && ctx.Err() == nil && !pastDeadline(ctx) {
				d.fail(op, err)
			}
		}}
		wg.Add(1)
		go func() { defer wg.Done(); mail.run(ctx) }()
	}

	start := time.Now()
	var samples []sample
	tick := time.NewTicker(c.every)
	defer tick.Stop()
	last, lastN := start, int64(0)
	report := func(now time.Time) {
		n := d.requests.Load()
		rss := rssMiB(c.pid)
		s := sample{at: now.Sub(start), rss: rss}
		samples = append(samples, s)
		fmt.Printf("%8s %10d %8d %8d %9.0f %9.1f %8d %8s\n", s.at.Round(time.Second), n, d.errors.Load(), d.dropped.Load(),
			float64(n-lastN)/now.Sub(last).Seconds(), rss, d.slowClosed.Load(), time.Duration(d.slowMax.Load()).Round(100*time.Millisecond))
		last, lastN = now, n
	}
loop:
	for {
		select {
		case now := <-tick.C:
			report(now)
		case <-ctx.Done():
			break loop
		}
	}
	wg.Wait()
	if now := time.Now(); now.Sub(last) > c.every/2 {
		report(now)
	}
	if mail != nil {
		fmt.Println(mail.summary())
	}
	return d.verdict(c, samples)
}

type sample struct {
	at  time.Duration
	rss float64
}

func (d *driver) verdict(c config, samples []sample) int {
	code := 0
	if n := d.errors.Load(); n > 0 {
		code = 1
		fmt.Printf("errors: %d\n", n)
		d.mu.Lock()
		names := make([]string, 0, len(d.errByOp))
		for k := range d.errByOp {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			fmt.Printf("  %-14s %6d  e.g. %s\n", k, d.errByOp[k], d.errSample[k])
		}
		d.mu.Unlock()
	} else {
		fmt.Println("errors: 0")
	}
	var after []float64
	for _, s := range samples {
		if s.at >= c.warmup {
			after = append(after, s.rss)
		}
	}
	if len(after) < 2 {
		fmt.Println("memory: too few samples after warm-up to judge; run longer than -warmup plus two intervals")
		return max(code, 1)
	}
	lo, hi := after[0], after[0]
	for _, v := range after {
		lo, hi = min(lo, v), max(hi, v)
	}
	spread := (hi - lo) / after[0]
	growth := (after[len(after)-1] - after[0]) / after[0]
	fmt.Printf("memory after warm-up: first %.1f MiB, min %.1f, max %.1f, last %.1f; spread %.1f%%, growth %+.1f%% (limit %.0f%%)\n",
		after[0], lo, hi, after[len(after)-1], 100*spread, 100*growth, 100*c.flat)
	if spread > c.flat {
		fmt.Println("verdict: memory not flat")
		return 1
	}
	if code == 0 {
		fmt.Println("verdict: pass (0 errors, memory flat)")
	} else {
		fmt.Println("verdict: fail (errors)")
	}
	return code
}

// rssMiB reads VmRSS of a process from /proc.
func rssMiB(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return -1
}

type op struct {
	name   string
	weight int
	fn     func(context.Context) error
}

type driver struct {
	c          config
	http       *http.Client
	tls        *http.Client
	dnsUDP     *dns.Client
	siteBody   []byte
	ops        []op
	schedule   []int // op indexes, repeated by weight
	requests   atomic.Int64
	errors     atomic.Int64
	dropped    atomic.Int64
	slowMax    atomic.Int64
	slowClosed atomic.Int64
	mu         sync.Mutex
	errByOp    map[string]int
	errSample  map[string]string
}

func newDriver(c config) (*driver, error) {
	d := &driver{c: c, errByOp: map[string]int{}, errSample: map[string]string{}}
	if c.siteBody != "" {
		b, err := os.ReadFile(c.siteBody)
		if err != nil {
			return nil, err
		}
		d.siteBody = b
	}
	tr := &http.Transport{MaxIdleConns: c.workers * 2, MaxIdleConnsPerHost: c.workers * 2, IdleConnTimeout: 30 * time.Second}
	d.http = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	ttr := &http.Transport{MaxIdleConnsPerHost: c.workers, TLSClientConfig: &tls.Config{InsecureSkipVerify: true, ServerName: c.siteHost}} //nolint:gosec // loopback benchmark of our own server
	ttr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, c.httpsAddr)
	}
	d.tls = &http.Client{Transport: ttr, Timeout: 10 * time.Second}
	d.dnsUDP = &dns.Client{Net: "udp", Timeout: 3 * time.Second}
	d.ops = []op{
		{"edge_live", 36, d.edgeLive},
		{"edge_unknown", 14, d.edgeUnknown},
		{"edge_tls", 5, d.edgeTLS},
		{"api_read", 10, d.apiRead},
		{"search", 5, d.search},
		{"quote", 3, d.quote},
		{"mcp_call", 7, d.mcpCall},
		{"mcp_batch", 3, d.mcpBatch},
		{"dns_random", 8, d.dnsRandom},
	}
	if c.domain != "" {
		d.ops = append(d.ops, op{"dns_real", 9, d.dnsReal})
	}
	for i, o := range d.ops {
		for range o.weight {
			d.schedule = append(d.schedule, i)
		}
	}
	return d, nil
}

func (d *driver) resetCounts() {
	d.requests.Store(0)
	d.errors.Store(0)
	d.dropped.Store(0)
	d.mu.Lock()
	clear(d.errByOp)
	clear(d.errSample)
	d.mu.Unlock()
}

func (d *driver) do(ctx context.Context, i int) {
	o := d.ops[i]
	d.requests.Add(1)
	// An operation cut by the run's own deadline is not an error: a socket
	// deadline taken from the context can fire a moment before the context
	// reports it, so the deadline itself is checked too.
	if err := o.fn(ctx); err != nil && ctx.Err() == nil && !pastDeadline(ctx) {
		d.errors.Add(1)
		d.mu.Lock()
		d.errByOp[o.name]++
		if _, ok := d.errSample[o.name]; !ok {
			d.errSample[o.name] = err.Error()
		}
		d.mu.Unlock()
	}
}

// fail counts an error of an operation outside the request schedule.
func (d *driver) fail(op string, err error) {
	d.errors.Add(1)
	d.mu.Lock()
	d.errByOp[op]++
	if _, ok := d.errSample[op]; !ok {
		d.errSample[op] = err.Error()
	}
	d.mu.Unlock()
}

func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl.Add(-10*time.Millisecond))
}

// calibrate runs the mix closed-loop with every worker busy and returns
// the requests per second it reached.
func (d *driver) calibrate(dur time.Duration) int {
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var n atomic.Int64
	var wg sync.WaitGroup
	for w := range d.c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := w; ctx.Err() == nil; k += d.c.workers {
				d.do(ctx, d.schedule[k%len(d.schedule)])
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(float64(n.Load()) / dur.Seconds())
}

// drive sends rate requests per second, open-loop: a request that finds
// every worker busy is dropped and counted, never queued.
func (d *driver) drive(ctx context.Context, rate int) {
	jobs := make(chan int, d.c.workers)
	var wg sync.WaitGroup
	for range d.c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				d.do(ctx, i)
			}
		}()
	}
	const slot = 10 * time.Millisecond
	tick := time.NewTicker(slot)
	defer tick.Stop()
	start, sent, k := time.Now(), 0, 0
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case now := <-tick.C:
			due := int(now.Sub(start).Seconds() * float64(rate))
			for ; sent < due; sent++ {
				select {
				case jobs <- d.schedule[k%len(d.schedule)]:
				default:
					d.dropped.Add(1)
				}
				k++
			}
		}
	}
	close(jobs)
	wg.Wait()
}

// slow keeps c.slowConns connections open that send a request line and
// then one header byte every two seconds. The server must close each
// within its header timeout; one held past slowLimit is an error.
func (d *driver) slow(ctx context.Context) {
	host := strings.TrimPrefix(strings.TrimPrefix(d.c.base, "http://"), "https://")
	var wg sync.WaitGroup
	for range d.c.slowConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				held, err := trickle(ctx, host, d.c.slowLimit+5*time.Second)
				if ctx.Err() != nil {
					return
				}
				d.slowClosed.Add(1)
				for {
					m := d.slowMax.Load()
					if int64(held) <= m || d.slowMax.CompareAndSwap(m, int64(held)) {
						break
					}
				}
				if err == nil && held > d.c.slowLimit {
					err = fmt.Errorf("held %s", held.Round(time.Second))
				}
				if err != nil {
					d.errors.Add(1)
					d.mu.Lock()
					d.errByOp["slow_conn"]++
					if _, ok := d.errSample["slow_conn"]; !ok {
						d.errSample["slow_conn"] = err.Error()
					}
					d.mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
}

// trickle opens one connection, trickles a request's headers and returns
// how long the server kept it open.
func trickle(ctx context.Context, addr string, giveUp time.Duration) (time.Duration, error) {
	conn, err := (&net.Dialer{Timeout: 3 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: slow.example\r\nX-Slow: "); err != nil {
		return time.Since(start), nil
	}
	closed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, conn)
		close(closed)
	}()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	deadline := time.NewTimer(giveUp)
	defer deadline.Stop()
	for {
		select {
		case <-closed:
			return time.Since(start), nil
		case <-ctx.Done():
			return time.Since(start), nil
		case <-deadline.C:
			return time.Since(start), nil
		case <-t.C:
			if _, err := conn.Write([]byte("a")); err != nil {
				<-closed
				return time.Since(start), nil
			}
		}
	}
}

func randomLabel(n int) string {
	b := make([]byte, n/2)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (d *driver) get(ctx context.Context, cl *http.Client, url, host string, hdr map[string]string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func want(status int, body []byte, err error, code int) error {
	if err != nil {
		return err
	}
	if status != code {
		return fmt.Errorf("status %d, want %d: %.120s", status, code, body)
	}
	return nil
}

func (d *driver) edgeLive(ctx context.Context) error {
	st, b, err := d.get(ctx, d.http, d.c.base+"/", d.c.siteHost, nil)
	if err := want(st, b, err, 200); err != nil {
		return err
	}
	if d.siteBody != nil && !bytes.Equal(b, d.siteBody) {
		return errors.New("the live page's bytes differ from the site's")
	}
	return nil
}

func (d *driver) edgeTLS(ctx context.Context) error {
	u := "https://" + d.c.siteHost + "/"
	st, b, err := d.get(ctx, d.tls, u, "", nil)
	return want(st, b, err, 200)
}

// edgeUnknown names a random host of 60 to 200 characters, as a scanner
// or an attacker filling caches would.
func (d *driver) edgeUnknown(ctx context.Context) error {
	var labels []string
	for range 3 {
		labels = append(labels, randomLabel(40))
	}
	host := strings.Join(labels, ".") + ".localhost"
	st, b, err := d.get(ctx, d.http, d.c.base+"/"+randomLabel(16), host, nil)
	return want(st, b, err, 404)
}

func (d *driver) apiRead(ctx context.Context) error {
	st, b, err := d.get(ctx, d.http, d.c.base+"/v1/projects/"+d.c.project, "", map[string]string{"Authorization": "Bearer " + d.c.apiKey})
	return want(st, b, err, 200)
}

func (d *driver) search(ctx context.Context) error {
	st, b, err := d.get(ctx, d.http, d.c.base+"/v1/domains/search?q=s"+randomLabel(8), "", nil)
	return want(st, b, err, 200)
}

func (d *driver) post(ctx context.Context, path string, body any, hdr map[string]string) (int, []byte, error) {
	j, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.c.base+path, bytes.NewReader(j))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := d.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// quote holds a small amount for a service month and releases it, so the
// budget never runs out however long the soak.
func (d *driver) quote(ctx context.Context) error {
	auth := map[string]string{"Authorization": "Bearer " + d.c.apiKey, "Idempotency-Key": randomLabel(32)}
	st, b, err := d.post(ctx, "/v1/quotes", map[string]any{"projectId": d.c.project,
		"items": []any{map[string]any{"kind": "service", "workload": "static_site", "months": 1}}}, auth)
	if err != nil {
		return err
	}
	if st != 200 && st != 201 {
		return fmt.Errorf("quote: status %d: %.160s", st, b)
	}
	var q struct {
		Data struct {
			QuoteID string `json:"quoteId"`
			State   string `json:"state"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &q); err != nil {
		return err
	}
	if q.Data.State != "held" {
		return nil
	}
	auth["Idempotency-Key"] = randomLabel(32)
	st, b, err = d.post(ctx, "/v1/quotes/"+q.Data.QuoteID+"/release", map[string]any{}, auth)
	if err != nil {
		return err
	}
	if st != 200 {
		return fmt.Errorf("release: status %d: %.160s", st, b)
	}
	return nil
}

var mcpHeaders = map[string]string{"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-03-26"}

func (d *driver) mcpCall(ctx context.Context) error {
	st, b, err := d.post(ctx, "/mcp", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": "search_domains", "arguments": map[string]any{"q": "m" + randomLabel(8)}}}, mcpHeaders)
	if err := want(st, b, err, 200); err != nil {
		return err
	}
	if bytes.Contains(b, []byte(`"isError":true`)) || bytes.Contains(b, []byte(`"error":{`)) {
		return fmt.Errorf("tool error: %.160s", b)
	}
	return nil
}

// mcpBatch sends a batch within the documented cap.
func (d *driver) mcpBatch(ctx context.Context) error {
	var batch []any
	for i := range 4 {
		batch = append(batch, map[string]any{"jsonrpc": "2.0", "id": i + 1, "method": "tools/list"})
	}
	st, b, err := d.post(ctx, "/mcp", batch, mcpHeaders)
	if err := want(st, b, err, 200); err != nil {
		return err
	}
	var out []json.RawMessage
	if err := json.Unmarshal(b, &out); err != nil || len(out) != 4 {
		return fmt.Errorf("batch answer: %d entries, %v", len(out), err)
	}
	return nil
}

func (d *driver) dnsQuery(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	r, _, err := d.dnsUDP.ExchangeContext(ctx, m, d.c.dnsAddr)
	var ne net.Error
	if err != nil && errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil {
		// Rate limiting drops some answers outright (those it does not
		// slip); a real resolver asks again over TCP, and so does this one.
		err = nil
		r = &dns.Msg{MsgHdr: dns.MsgHdr{Truncated: true}}
	}
	if err == nil && r.Truncated {
		// Rate limiting slips truncated answers; a real resolver retries
		// over TCP, and so does this one.
		tcp := &dns.Client{Net: "tcp", Timeout: 3 * time.Second}
		r, _, err = tcp.ExchangeContext(ctx, m, d.c.dnsAddr)
	}
	return r, err
}

func (d *driver) dnsReal(ctx context.Context) error {
	r, err := d.dnsQuery(ctx, d.c.domain, dns.TypeA)
	if err != nil {
		return err
	}
	if r.Rcode == dns.RcodeRefused {
		// Response rate limiting may refuse; a flood from one address is
		// exactly what it is for. Count it as answered.
		return nil
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
		return fmt.Errorf("%s A: %s with %d answers", d.c.domain, dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	return nil
}

func (d *driver) dnsRandom(ctx context.Context) error {
	name := randomLabel(30) + "." + randomLabel(12) + ".com"
	if d.c.domain != "" && len(randomLabel(2)) > 0 && randomLabel(2)[0] < '8' {
		name = randomLabel(20) + "." + d.c.domain // under a served zone: NXDOMAIN
	}
	r, err := d.dnsQuery(ctx, name, dns.TypeA)
	if err != nil {
		return err
	}
	switch r.Rcode {
	case dns.RcodeNameError, dns.RcodeRefused, dns.RcodeSuccess:
		return nil
	}
	return fmt.Errorf("%s A: %s", name, dns.RcodeToString[r.Rcode])
}
