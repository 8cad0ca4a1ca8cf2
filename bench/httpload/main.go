// Command httpload drives one URL over HTTP/1.1, HTTP/2 or HTTP/3 with a
// fixed number of connections and requests in flight per connection (as
// h2load's -c and -m), for a bounded time, and prints one line: protocol,
// requests per second, bytes per second, p50 and p99 latency, errors.
// bench/edge.sh runs it for HTTP/3 against HTTP/2 on the same server, as
// Debian's h2load is built without HTTP/3.
//
//	httpload -proto h3 -addr 127.0.0.1:18443 -host site--x.localhost -path /1k.txt -ca ca.pem -d 5s
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

func main() {
	proto := flag.String("proto", "h2", "h1 (HTTP/1.1), h2 (TLS over TCP) or h3 (QUIC)")
	addr := flag.String("addr", "127.0.0.1:18443", "address to connect to: the TLS listener for h2, the UDP one for h3")
	useTLS := flag.Bool("tls", true, "h1 only: over TLS; false sends plain HTTP")
	host := flag.String("host", "", "host name: the TLS server name and the request's Host")
	path := flag.String("path", "/", "request path")
	caFile := flag.String("ca", "", "PEM file of the CA to trust")
	conns := flag.Int("c", 4, "connections")
	streams := flag.Int("m", 16, "requests in flight per connection")
	dur := flag.Duration("d", 5*time.Second, "how long to send requests (at most 10 minutes)")
	flag.Parse()
	if *proto == "h1" {
		*streams = 1 // HTTP/1.1 has one request in flight per connection
	}
	if err := run(*proto, *addr, *host, *path, *caFile, *useTLS, *conns, *streams, min(*dur, 10*time.Minute)); err != nil {
		fmt.Fprintln(os.Stderr, "httpload:", err)
		os.Exit(1)
	}
}

func run(proto, addr, host, path, caFile string, useTLS bool, conns, streams int, dur time.Duration) error {
	clients, err := newClients(proto, addr, host, caFile, conns)
	if err != nil {
		return err
	}
	url := "https://" + host + path
	if proto == "h1" && !useTLS {
		url = "http://" + host + path
	}
	// Warm up: every connection made and one request answered.
	for _, c := range clients {
		if _, err := get(c, url, proto); err != nil {
			return fmt.Errorf("first request: %w", err)
		}
	}
	r := load(clients, url, proto, streams, dur)
	all := slices.Concat(r.lat...)
	slices.Sort(all)
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(len(all)-1, int(p*float64(len(all))))].Microseconds()) / 1000
	}
	fmt.Printf("proto=%s reqs=%d rps=%.0f mbps=%.1f p50_ms=%.2f p99_ms=%.2f errors=%d\n",
		proto, r.count, float64(r.count)/r.elapsed, float64(r.bytes)/r.elapsed/1e6*8, pct(0.50), pct(0.99), r.errs)
	if r.firstErr != nil {
		fmt.Fprintln(os.Stderr, "httpload: first error:", r.firstErr)
	}
	return nil
}

// newClients makes one client per connection, each with a transport of
// its own so that each holds exactly one, all dialling addr.
func newClients(proto, addr, host, caFile string, conns int) ([]*http.Client, error) {
	pool := x509.NewCertPool()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificate in %s", caFile)
		}
	}
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	clients := make([]*http.Client, conns)
	for i := range clients {
		tc := &tls.Config{RootCAs: pool, ServerName: host}
		var rt http.RoundTripper
		switch proto {
		case "h1":
			rt = &http.Transport{TLSClientConfig: tc, MaxConnsPerHost: 1, DialContext: dial,
				TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
		case "h2":
			rt = &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true, MaxConnsPerHost: 1, DialContext: dial}
		case "h3":
			rt = &http3.Transport{TLSClientConfig: tc,
				Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
					return quic.DialAddrEarly(ctx, addr, tc, qc)
				}}
		default:
			return nil, fmt.Errorf("-proto %q: want h1, h2 or h3", proto)
		}
		clients[i] = &http.Client{Transport: rt, Timeout: 10 * time.Second}
	}
	return clients, nil
}

// get fetches url, reads the body and refuses an answer that is not 200 or
// came over another protocol than proto.
func get(c *http.Client, url, proto string) (int64, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	if err == nil && resp.ProtoMajor != int(proto[1]-'0') {
		err = fmt.Errorf("answered over %s", resp.Proto)
	}
	return n, err
}

// loadResult is what a run measured: each worker's latencies, and the
// totals.
type loadResult struct {
	lat                [][]time.Duration
	count, bytes, errs int64
	firstErr           any
	elapsed            float64 // seconds
}

// load runs streams workers per client, each fetching url one request
// after another, for dur.
func load(clients []*http.Client, url, proto string, streams int, dur time.Duration) loadResult {
	conns := len(clients)
	var count, bytes, errs atomic.Int64
	var firstErr atomic.Value
	lat := make([][]time.Duration, conns*streams)
	start := time.Now()
	stop := start.Add(dur)
	var wg sync.WaitGroup
	for w := range lat {
		wg.Go(func() {
			c := clients[w%conns]
			for time.Now().Before(stop) {
				t0 := time.Now()
				n, err := get(c, url, proto)
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				lat[w] = append(lat[w], time.Since(t0))
				count.Add(1)
				bytes.Add(n)
			}
		})
	}
	wg.Wait()
	return loadResult{lat: lat, count: count.Load(), bytes: bytes.Load(), errs: errs.Load(), firstErr: firstErr.Load(),
		elapsed: time.Since(start).Seconds()}
}
