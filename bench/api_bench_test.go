// Package bench measures Pier against bare peers in the same run. See
// README.md for how to run and read the results.
package bench

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
)

// pierServer serves the real handler with rate limits out of the way.
func pierServer(b *testing.B) *httptest.Server {
	s := testserver.New(b, server.Config{
		DataDir:    b.TempDir(),
		RateLimits: map[string]server.RateLimit{"search": {PerSecond: 1e9, Burst: 1 << 30}},
	}, nil)
	ts := httptest.NewServer(s.Handler())
	b.Cleanup(ts.Close)
	return ts
}

// bare serves fixed bytes with net/http and nothing else: the ceiling.
func bare(body []byte) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
}

func do(b *testing.B, c *http.Client, method, url string, body []byte) []byte {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, out)
	}
	return out
}

// compare times the same request against Pier and against a bare handler
// returning Pier's bytes, interleaved so that both see the same machine, and
// reports the throughput ratio pier/bare (1.0 = as fast as bare net/http).
func compare(b *testing.B, method, path string, body []byte) {
	p := pierServer(b)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	want := do(b, c, method, p.URL+path, body)
	bs := bare(want)
	defer bs.Close()
	do(b, c, method, bs.URL+path, body)

	var pierT, bareT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		do(b, c, method, p.URL+path, body)
		t1 := time.Now()
		do(b, c, method, bs.URL+path, body)
		pierT += t1.Sub(t0)
		bareT += time.Since(t1)
	}
	b.StopTimer()
	b.ReportMetric(float64(pierT.Nanoseconds())/float64(b.N), "pier-ns/req")
	b.ReportMetric(float64(bareT.Nanoseconds())/float64(b.N), "bare-ns/req")
	b.ReportMetric(float64(bareT)/float64(pierT), "ratio")
}

func BenchmarkSearchDomains(b *testing.B) {
	compare(b, "GET", "/v1/domains/search?q=acme&tldAllowlist=com,dev,io&maxFirstYearPriceUsd=50", nil)
}

func BenchmarkEstimate(b *testing.B) {
	compare(b, "POST", "/v1/estimate", []byte(`{"workload":"database_backed_app","monthlyRequests":2000000}`))
}
