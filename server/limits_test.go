package server_test

import (
	"bufio"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/memtest"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// TestUnknownHostsCostNothingThatLasts sends 100,000 requests for
// distinct hosts with no site, long random names and invalid ones, through
// the server's handler: the heap grows by less than 20 MiB.
func TestUnknownHostsCostNothingThatLasts(t *testing.T) {
	ts := start(t, server.Config{})
	h := ts.Handler()
	ask := func(host string) int {
		req := httptest.NewRequest("GET", "/", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := ask("warm.localhost"); code != 404 {
		t.Fatalf("unknown host: %d", code)
	}
	before := memtest.Heap()
	rssBefore := memtest.RSS(t)
	random := func(n int) string {
		b := make([]byte, (n+1)/2)
		rand.Read(b)
		return hex.EncodeToString(b)[:n]
	}
	for i := range 100_000 {
		var host string
		switch i % 3 {
		case 0: // a valid name of 200 random octets, looked up once and remembered in a bounded set
			host = random(60) + "." + random(60) + "." + random(60) + "." + random(16) + ".example"
		case 1: // 1 to 4 KiB, longer than any DNS name: answered without a lookup
			host = strings.Repeat(random(60)+".", 16+i%50) + "example"
		default: // not a name at all
			host = random(40) + " !" + random(200)
		}
		if code := ask(host); code != 404 && code != 400 {
			t.Fatalf("%q: %d", host[:20], code)
		}
	}
	after := memtest.Heap()
	grew := int64(after) - int64(before)
	t.Logf("heap %d MiB → %d MiB (%+.1f MiB) after 100,000 unknown hosts", before>>20, after>>20, float64(grew)/(1<<20))
	if grew > 20<<20 {
		t.Fatalf("100,000 unknown hosts grew the heap by %d MiB, want under 20", grew>>20)
	}
	if rssGrew := memtest.RSS(t) - rssBefore; rssGrew > 20<<20 {
		t.Fatalf("100,000 unknown hosts grew the resident set by %d MiB, want under 20", rssGrew>>20)
	} else {
		t.Logf("resident set %+.1f MiB", float64(rssGrew)/(1<<20))
	}
}

// TestOneCopyOfASiteLaunchedAHundredTimes launches the same 10 MiB site
// a hundred times, from two organisations, on both engines, and serves
// every launch: the store keeps one copy of each file (its blobs table
// does not grow) and the edge's memory one copy of its bytes.
func TestOneCopyOfASiteLaunchedAHundredTimes(t *testing.T) {
	if testing.Short() {
		t.Skip("launches a hundred services")
	}
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		blobs := func() (n, size int64) {
			err := ts.Store().DB().QueryRow(`SELECT COUNT(*), COALESCE(SUM(size), 0) FROM blobs`).Scan(&n, &size)
			if err != nil {
				t.Fatal(err)
			}
			return n, size
		}
		accounts := []account{
			newAccount(t, ts, 100_000_000, service.ProjectPolicy{}, "launch", "read"),
			newAccount(t, ts, 100_000_000, service.ProjectPolicy{}, "launch", "read"),
		}
		big := make([]byte, 10<<20)
		rand.Read(big) // incompressible: no gzip variant
		files := map[string]string{"index.html": "<!doctype html><h1>same</h1>", "data.bin": string(big)}
		var bundles []any
		for _, a := range accounts {
			bundles = append(bundles, upload(t, ts, a, files))
		}
		// Uploading the same files again stores nothing new.
		r := ts.Client.Do("POST", "/v1/bundles", uploadBody(accounts[0].project, files), accounts[0].header())
		if d := r.JSON()["data"].(map[string]any); r.StatusCode != 201 || d["newBlobs"] != 0.0 {
			t.Fatalf("second upload: %d %s", r.StatusCode, r.Body)
		}
		big, files = nil, nil
		blobCount, blobBytes := blobs()
		if blobCount != 2 || blobBytes < 10<<20 || blobBytes > 11<<20 {
			t.Fatalf("two organisations' uploads of one site stored %d blobs, %d bytes; want 2 blobs, one copy", blobCount, blobBytes)
		}

		before := memtest.Heap()
		var hosts []string
		for i := range 100 {
			a, bundle := accounts[i%2], bundles[i%2]
			r := ts.Client.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": fmt.Sprintf("copy%d", i), "target": "edge", "bundleId": bundle}, a.header())
			if r.StatusCode != 202 {
				t.Fatalf("launch %d: %d %s", i, r.StatusCode, r.Body)
			}
			task := waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
			u := task["previewUrl"].(string)
			hosts = append(hosts, strings.Split(strings.TrimPrefix(u, "https://"), ":")[0])
		}
		for _, host := range hosts {
			req, _ := http.NewRequest("GET", "http://"+ts.Addr()+"/data.bin", nil)
			req.Host = host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || n != 10<<20 {
				t.Fatalf("%s: %d, %d bytes", host, resp.StatusCode, n)
			}
		}
		after := memtest.Heap()
		grew := int64(after) - int64(before)
		t.Logf("heap %+.1f MiB after launching and serving 100 copies of one 10 MiB site", float64(grew)/(1<<20))
		if grew > 15<<20 {
			t.Errorf("launching and serving 100 copies of one 10 MiB site grew the heap by %d MiB, want at most one copy", grew>>20)
		}
		if n, size := blobs(); n != blobCount || size != blobBytes {
			t.Errorf("100 launches stored blobs: %d → %d, %d → %d bytes", blobCount, n, blobBytes, size)
		}
	})
}

// TestListenersCloseSilentConnections opens connections that send
// nothing, or trickle a head, to the HTTP and HTTPS listeners, with the
// edge's fast path and without: each is closed within the header timeout.
// An oversized head is refused.
func TestListenersCloseSilentConnections(t *testing.T) {
	if server.DefaultListenLimits.HeaderTimeout > 10*time.Second {
		t.Fatalf("default header timeout %v, want 10 s or less", server.DefaultListenLimits.HeaderTimeout)
	}
	const timeout = 500 * time.Millisecond
	for _, fast := range []bool{true, false} {
		ts := start(t, server.Config{DisableEdgeFastPath: !fast, Listen: server.ListenLimits{HeaderTimeout: timeout, MaxHeaderBytes: 8 << 10}})
		for _, l := range []struct {
			name, addr string
			tls        bool
		}{{"http", ts.Addr(), false}, {"https", ts.HTTPSAddr(), true}} {
			for _, mode := range []string{"silent", "trickle"} {
				name := fmt.Sprintf("fast=%v %s %s", fast, l.name, mode)
				c, err := net.Dial("tcp", l.addr)
				if err != nil {
					t.Fatal(err)
				}
				c.SetDeadline(time.Now().Add(15 * time.Second))
				start := time.Now()
				var conn net.Conn = c
				if l.tls && mode == "trickle" {
					tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, ServerName: "localhost"})
					if err := tc.Handshake(); err != nil {
						t.Fatalf("%s: handshake: %v", name, err)
					}
					conn = tc
				}
				done := make(chan time.Duration, 1)
				go func() {
					io.Copy(io.Discard, conn)
					done <- time.Since(start)
				}()
				if mode == "trickle" {
					head := "GET / HTTP/1.1\r\nHost: site.localhost\r\nX-Slow: " + strings.Repeat("a", 100)
				send:
					for i := range len(head) {
						select {
						case d := <-done:
							done <- d
							break send
						case <-time.After(40 * time.Millisecond):
						}
						conn.Write([]byte{head[i]})
					}
				}
				d := <-done
				c.Close()
				if d > timeout+2*time.Second {
					t.Errorf("%s: closed after %v, want about %v", name, d, timeout)
				}
			}
		}
		// A head over the 8 KiB limit is refused with 431 on both
		// listeners; one under it is served.
		for _, l := range []struct {
			name, addr string
			tls        bool
		}{{"http", ts.Addr(), false}, {"https", ts.HTTPSAddr(), true}} {
			for _, size := range []int{6 << 10, 16 << 10} {
				c, err := net.Dial("tcp", l.addr)
				if err != nil {
					t.Fatal(err)
				}
				c.SetDeadline(time.Now().Add(5 * time.Second))
				var conn net.Conn = c
				if l.tls {
					conn = tls.Client(c, &tls.Config{InsecureSkipVerify: true, ServerName: "localhost"})
				}
				fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: %s\r\n\r\n", strings.Repeat("b", size))
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				c.Close()
				if err != nil {
					t.Fatalf("fast=%v %s: %d B head: %v", fast, l.name, size, err)
				}
				if tooLarge := resp.StatusCode == http.StatusRequestHeaderFieldsTooLarge; tooLarge != (size > 8<<10) {
					t.Errorf("fast=%v %s: %d B head answered %d", fast, l.name, size, resp.StatusCode)
				}
			}
		}
	}
}

// TestNoSiteGetsACertificateAnd404 reaches a torn-down preview host and a
// never-launched one over HTTPS: a certificate the local CA signed for the
// name, and Pier's 404 page.
func TestNoSiteGetsACertificateAnd404(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
	bundle := upload(t, ts, a, siteSaying("soon gone"))
	r := ts.Client.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "gone", "target": "edge", "bundleId": bundle}, a.header())
	task := waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	host := strings.Split(strings.TrimPrefix(task["previewUrl"].(string), "https://"), ":")[0]
	r = ts.Client.Do("POST", "/v1/services/"+task["serviceId"].(string)+"/teardown", nil, a.header())
	waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")

	for _, h := range []string{host, "never--launched.localhost"} {
		resp, err := httpsClient(ts).Get("https://" + h + "/")
		if err != nil {
			t.Fatalf("%s: %v", h, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 || !strings.Contains(string(body), "No site is launched here") || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("%s: %d %s", h, resp.StatusCode, body)
		}
		if err := resp.TLS.PeerCertificates[0].VerifyHostname(h); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	// A name outside the preview zone with no site still gets no certificate.
	if _, err := httpsClient(ts).Get("https://unknown.example/"); err == nil {
		t.Error("a certificate for a name Pier does not serve")
	}
}
