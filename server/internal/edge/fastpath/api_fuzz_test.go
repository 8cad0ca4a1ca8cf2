package fastpath

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

func apiGet(target string, extra ...string) string {
	return "GET " + target + " HTTP/1.1\r\nHost: api.localhost\r\n" + strings.Join(extra, "") + "\r\n"
}

// FuzzParseAPIAgainstNetHTTP is a differential test of parseAPI against
// net/http's reading of a request. parseAPI may leave any request to
// net/http; every one it takes must be one net/http accepts too, read
// the same way: the method, target, path and raw query the API keys its
// answers by, Host, keep-alive, the Accept, Content-Type, User-Agent and
// Authorization headers, and the head's and body's lengths.
// apiParseSeeds are the heads FuzzParseAPIAgainstNetHTTP starts from.
var apiParseSeeds = []string{
	apiGet("/v1/domains/search?q=acme&tldAllowlist=com,dev,io&maxFirstYearPriceUsd=50"),
	apiGet("/v1/domains/search?q=a%20b", "Accept: */*\r\n", "User-Agent: curl/8 x\r\n", "Accept-Encoding: gzip\r\n"),
	"POST /v1/estimate HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n{\"workload\":\"static_site\"}\n",
	"POST /v1/estimate HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
	"POST /v1/estimate HTTP/1.1\r\nHost: a\r\nContent-Length: 0001\r\n\r\nx",
	"POST /v1/estimate HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\nx",
	"POST /v1/estimate HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	apiGet("/v1/x?", "Connection: keep-alive, close\r\n"),
	apiGet("/v1/x??a=#b"),
	apiGet("/v1/x?a=1;b=2"),
	apiGet("//v1/x"),
	apiGet("/v1/%78"),
	apiGet("/v1/x", "Authorization:\r\n"),
	apiGet("/v1/x", "Authorization: Bearer  agk_x \r\n"),
	apiGet("/v1/x", "Authorization: Bearer a\r\n", "authorization: Bearer b\r\n"),
	apiGet("/v1/x", "Accept: a\r\n", "Accept: b\r\n"),
	apiGet("/v1/x", "X: 1\r\n 2\r\n"),
	apiGet("/v1/x", "If-None-Match: \"a\"\r\n"),
	"GET /v1/x HTTP/1.0\r\nHost: a\r\n\r\n",
	"GET /v1/x HTTP/1.1\nHost: a\n\n",
	"GET http://a/v1/x HTTP/1.1\r\nHost: a\r\n\r\n",
	"PUT /v1/x HTTP/1.1\r\nHost: a\r\n\r\n",
}

func FuzzParseAPIAgainstNetHTTP(f *testing.F) {
	for _, s := range apiParseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c := &bytesConn{r: bytes.NewReader(b)}
		cs := &conn{l: &Listener{cfg: Config{HeaderTimeout: time.Minute}}, c: c, br: bufio.NewReaderSize(c, maxHead)}
		n, fast, err := cs.readHead()
		if err != nil || !fast {
			return
		}
		head, _ := cs.br.Peek(n)
		var r apiReq
		if !parseAPI(head, &r) {
			return // net/http reads it, whatever it is
		}
		req, consumed, err := netHTTPRead(b)
		if err != nil {
			t.Fatalf("parseAPI takes a head net/http refuses (%v):\n%q", err, head)
		}
		path, query, _ := cut(r.target, '?')
		first := func(k string) string {
			if vs := req.Header[k]; len(vs) > 0 {
				return vs[0]
			}
			return "(none)"
		}
		value := func(v []byte, count int) string {
			if count == 0 {
				return "(none)"
			}
			return string(v)
		}
		diffs := []diff{
			{"method", r.method, req.Method},
			{"target", string(r.target), req.RequestURI},
			{"path", string(path), req.URL.Path},
			{"raw query", string(query), req.URL.RawQuery},
			{"host", string(r.host), req.Host},
			{"proto", "HTTP/1.1", req.Proto},
			{"close", r.close, req.Close},
			{"Accept", value(r.accept, r.accepts), first("Accept")},
			{"Accept count", r.accepts, len(req.Header["Accept"])},
			{"Content-Type", value(r.ctype, r.ctypes), first("Content-Type")},
			{"Content-Type count", r.ctypes, len(req.Header["Content-Type"])},
			{"User-Agent", value(r.ua, r.uas), first("User-Agent")},
			{"Authorization", value(r.authz, r.authzs), first("Authorization")},
			{"Authorization count", r.authzs, len(req.Header["Authorization"])},
			{"head length", n, consumed},
			{"body length", int64(r.clen), req.ContentLength},
			{"chunked", false, len(req.TransferEncoding) > 0},
		}
		for _, d := range diffs {
			if d.fast != d.net {
				t.Errorf("%s: parseAPI %#v, net/http %#v, for\n%q", d.what, d.fast, d.net, head)
			}
		}
		body, _ := io.ReadAll(req.Body)
		if want := b[n:min(len(b), n+r.clen)]; !bytes.Equal(body, want) {
			t.Errorf("body: net/http read %q, the fast path %q", body, want)
		}
	})
}
