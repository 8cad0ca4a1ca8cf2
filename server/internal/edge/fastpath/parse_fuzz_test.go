package fastpath

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"testing"
	"time"

	"golang.org/x/net/http/httpguts"
)

// bytesConn is a connection that reads from a byte slice; the head reader
// only sets deadlines on it.
type bytesConn struct {
	net.Conn
	r *bytes.Reader
}

func (c *bytesConn) Read(p []byte) (int, error)      { return c.r.Read(p) }
func (c *bytesConn) SetReadDeadline(time.Time) error { return nil }

// fastParse runs the fast path's framing and parser over b as a connection
// would deliver it: ok is true when the fast path would answer the first
// request itself, n is its head's length.
func fastParse(b []byte) (r request, n int, ok bool) {
	c := &bytesConn{r: bytes.NewReader(b)}
	cs := &conn{l: &Listener{cfg: Config{HeaderTimeout: time.Minute}}, c: c, br: bufio.NewReaderSize(c, maxHead)}
	n, fast, err := cs.readHead()
	if err != nil || !fast {
		return r, 0, false
	}
	head, _ := cs.br.Peek(n)
	return r, n, parse(head, &r)
}

// netHTTPRead reads the first request of b as net/http's server does:
// http.ReadRequest, then the checks the server adds before calling a
// handler (exactly one valid Host on HTTP/1.1, valid header names and
// values). consumed is how many bytes of b the request took.
func netHTTPRead(b []byte) (req *http.Request, consumed int, err error) {
	rd := bytes.NewReader(b)
	br := bufio.NewReader(rd)
	req, err = http.ReadRequest(br)
	if err != nil {
		return nil, 0, err
	}
	consumed = len(b) - rd.Len() - br.Buffered()
	// http.ReadRequest drops the Host lines the server counts; read them
	// again as it does, with net/textproto.
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(b)))
	tp.ReadLine()
	raw, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, 0, err
	}
	hosts, haveHost := raw["Host"]
	switch {
	case req.ProtoAtLeast(1, 1) && (!haveHost || len(hosts) == 0):
		return nil, 0, errString("missing required Host header")
	case len(hosts) > 1:
		return nil, 0, errString("too many Host headers")
	case len(hosts) == 1 && !httpguts.ValidHostHeader(hosts[0]):
		return nil, 0, errString("malformed Host header")
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, 0, errString("invalid header name")
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return nil, 0, errString("invalid header value")
			}
		}
	}
	return req, consumed, nil
}

// diff is one reading of a request by both parsers.
type diff struct {
	what      string
	fast, net any
}

type errString string

func (e errString) Error() string { return string(e) }

// FuzzParseAgainstNetHTTP is a differential test of the fast path's head
// reader and parser against net/http's. The fast path may hand any request
// to net/http, so it may refuse what net/http accepts; but every request it
// answers itself must be one net/http accepts too, read the same way: the
// same method, target, path, Host, protocol version, keep-alive decision,
// If-None-Match and Accept-Encoding, and the same length, with no body.
// parseSeeds are the heads FuzzParseAgainstNetHTTP starts from.
var parseSeeds = []string{
	get("/"),
	get("/style.css", "Accept-Encoding: gzip;q=0, br\r\n", "If-None-Match: \"abc\"\r\n"),
	"HEAD /a/b.html?x=1 HTTP/1.0\r\nHost: " + siteHost + "\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n",
	"GET / HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n\r\n",
	"GET /%2e%2e/%41 HTTP/1.1\r\nhOsT:   a.b:8080 \t\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n",
	"GET / HTTP/1.1\nHost: a\n\n",
	"GET / HTTP/1.1\r\nHost: a\r\r\n\r\n",
	"GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET http://a/ HTTP/1.1\r\nHost: b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost:\r\n\r\n",
	"GET / HTTP/2.0\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX-\xff: 1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX: \x01\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n",
	"GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n",
	get("/") + get("/about"),
}

func FuzzParseAgainstNetHTTP(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, n, ok := fastParse(b)
		if !ok {
			return // net/http reads it, whatever it is
		}
		// The path the edge looks up, as answer derives it; a target that
		// needs decoding and does not parse goes to net/http there.
		fastPath := ""
		if p, plain := plainPath(r.target); plain {
			fastPath = string(p)
		} else if u, err := url.ParseRequestURI(string(r.target)); err == nil {
			fastPath = u.Path
		} else {
			return
		}
		req, consumed, err := netHTTPRead(b)
		if err != nil {
			t.Fatalf("the fast path answers a head net/http refuses (%v):\n%q", err, b[:n])
		}
		method := "GET"
		if r.head {
			method = "HEAD"
		}
		proto := "HTTP/1.1"
		if r.http10 {
			proto = "HTTP/1.0"
		}
		inm, ae := req.Header["If-None-Match"], req.Header["Accept-Encoding"]
		diffs := []diff{
			{"method", method, req.Method},
			{"target", string(r.target), req.RequestURI},
			{"host", string(r.host), req.Host},
			{"proto", proto, req.Proto},
			{"close", r.close, req.Close},
			{"If-None-Match", r.inmN > 0, len(inm) > 0},
			{"Accept-Encoding", r.aeN > 0, len(ae) > 0},
			{"head length", n, consumed},
			{"body", false, req.ContentLength != 0 || len(req.TransferEncoding) > 0},
		}
		if len(inm) > 0 {
			diffs = append(diffs, diff{"If-None-Match value", string(r.inm), inm[0]})
		}
		if len(ae) > 0 {
			diffs = append(diffs, diff{"Accept-Encoding value", string(r.ae), ae[0]})
		}
		diffs = append(diffs, diff{"path", fastPath, req.URL.Path})
		for _, d := range diffs {
			if d.fast != d.net {
				t.Errorf("%s: fast path %#v, net/http %#v, for\n%q", d.what, d.fast, d.net, b[:n])
			}
		}
		if b, _ := io.ReadAll(req.Body); len(b) > 0 {
			t.Errorf("net/http read a body of %d bytes the fast path ignores", len(b))
		}
	})
}
