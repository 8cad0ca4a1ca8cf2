package fastpath

import (
	"bufio"
	"bytes"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// FuzzResponseHead is a differential test of the forwarder's response head
// reader against net/http's (http.ReadResponse, what the Transport uses).
// The strict parser may refuse a head (the forwarder then asks net/http's
// reader); every head it accepts, net/http must accept too and read the
// same way: status, version, header fields, the body's framing and
// whether the connection stays open. The fallback must agree with
// net/http on everything net/http accepts.
func FuzzResponseHead(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n",
		"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\nContent-Length: 10\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n",
		"HTTP/1.1 200\r\n\r\n",
		"HTTP/1.1  200 OK\r\n\r\n",
		"HTTP/1.1 099 Low\r\n\r\n",
		"HTTP/1.1 2000 OK\r\n\r\n",
		"HTTP/2.0 200 OK\r\n\r\n",
		"HTTP/1.1 200 OK\nX: a\n b\n\n",
		"HTTP/1.1 200 OK\r\nX : a\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: \x01\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: caf\xc3\xa9\r\n\r\n",
		"HTTP/1.1 200 OK\r\nConnection: X-Hop, close\r\nX-Hop: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX:\r\n\r\n",
		"HTTP/1.1 200 OK\r\n\r\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n := headEnd(b)
		if n == 0 {
			return
		}
		head := b[:n]
		res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(head)), nil)
		var strict respHead
		if parseResponseHead(head, &strict) {
			if err != nil {
				t.Fatalf("the strict parser accepts a head net/http refuses (%v):\n%q", err, head)
			}
			compareHead(t, "strict", &strict, res, head)
		}
		var fallback respHead
		ok := readResponseHead(bufio.NewReader(bytes.NewReader(head)), &fallback)
		if err != nil || res.StatusCode < 100 || res.StatusCode > 999 {
			if ok {
				t.Fatalf("the fallback accepts a head net/http refuses:\n%q", head)
			}
			return
		}
		if !ok {
			t.Fatalf("the fallback refuses a head net/http reads:\n%q", head)
		}
		compareHead(t, "fallback", &fallback, res, head)
	})
}

func compareHead(t *testing.T, which string, h *respHead, res *http.Response, head []byte) {
	t.Helper()
	fields := http.Header{}
	for _, f := range h.fields {
		k := http.CanonicalHeaderKey(string(f.k))
		if k == "Transfer-Encoding" || k == "Trailer" || k == "Content-Length" {
			continue // framing, compared below
		}
		fields[k] = append(fields[k], string(f.v))
	}
	want := res.Header.Clone()
	want.Del("Trailer")
	want.Del("Content-Length")
	chunked := slices.Contains(res.TransferEncoding, "chunked")
	clen := int64(-1)
	if cl := res.Header.Get("Content-Length"); cl != "" && !chunked {
		clen = res.ContentLength
		if res.StatusCode == 204 || res.StatusCode == 304 || res.StatusCode < 200 {
			clen = h.clen // net/http reads no body; the value is kept as sent
		}
	}
	type d struct {
		what      string
		got, want any
	}
	for _, x := range []d{
		{"status", h.status, res.StatusCode},
		{"version", [2]int{h.major, h.minor}, [2]int{res.ProtoMajor, res.ProtoMinor}},
		{"headers", headerString(fields), headerString(want)},
		{"chunked", h.chunked, chunked},
		{"length", h.clen, clen},
		{"close", h.close || (!chunked && clen < 0 && res.StatusCode >= 200 && res.StatusCode != 204 && res.StatusCode != 304), res.Close},
		{"date", h.hasDate, res.Header.Get("Date") != "" || len(res.Header["Date"]) > 0},
	} {
		if x.got != x.want {
			t.Errorf("%s: %s %v, net/http %v, for\n%q", which, x.what, x.got, x.want, head)
		}
	}
}

func headerString(h http.Header) string {
	var b strings.Builder
	for _, k := range slices.Sorted(func(y func(string) bool) {
		for k := range h {
			if !y(k) {
				return
			}
		}
	}) {
		b.WriteString(k + ": " + strings.Join(h[k], "\x00") + "\n")
	}
	return b.String()
}

// BenchmarkResponseHead compares the forwarder's response head reader with
// http.ReadResponse over a head as examples/app writes it.
func BenchmarkResponseHead(b *testing.B) {
	head := []byte("HTTP/1.1 200 OK\r\nServer: BaseHTTP/0.6 Python/3.13.5\r\nDate: Mon, 02 Jan 2006 15:04:05 GMT\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\nContent-Length: 26\r\n\r\n")
	b.Run("parseResponseHead", func(b *testing.B) {
		b.ReportAllocs()
		var h respHead
		for b.Loop() {
			if !parseResponseHead(head[:headEnd(head)], &h) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("http.ReadResponse", func(b *testing.B) {
		b.ReportAllocs()
		rd := bytes.NewReader(head)
		br := bufio.NewReader(rd)
		for b.Loop() {
			rd.Reset(head)
			br.Reset(rd)
			if _, err := http.ReadResponse(br, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
