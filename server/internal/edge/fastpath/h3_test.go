package fastpath

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/qpack"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/quicvarint"

	"github.com/pierhq/pier/server/internal/edge"
)

// h3Server serves HTTP/3 on a loopback UDP port: with the fast path in
// front of quic-go's http3.Server when fast, with the http3.Server alone
// otherwise. It returns the address and, when fast, the H3.
func h3Server(t *testing.T, e *edge.Edge, fast bool, cfg ...Config) (string, *H3) {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS()
	certs := ts.TLS.Certificates
	ts.Close()
	tc := http3.ConfigureTLSConfig(&tls.Config{Certificates: certs, MinVersion: tls.VersionTLS13})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &quic.Transport{Conn: pc}
	ln, err := tr.ListenEarly(tc, &quic.Config{MaxIncomingStreams: 250})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http3.Server{Handler: handler(e), Logger: slog.New(slog.DiscardHandler), IdleTimeout: time.Minute}
	var h *H3
	if fast {
		var c Config
		if len(cfg) > 0 {
			c = cfg[0]
		}
		c.Edge, c.API, c.Log = e, isAPI, slog.New(slog.DiscardHandler)
		c.Reserved = func(p string) bool { return strings.HasPrefix(p, "/.well-known/acme-challenge/") }
		h = NewH3(c, srv)
		go h.Serve(ln)
	} else {
		go srv.ServeListener(ln)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if h != nil {
			h.Shutdown(ctx)
		} else {
			srv.Shutdown(ctx)
		}
		ln.Close()
		tr.Close()
	})
	return pc.LocalAddr().String(), h
}

// h3Client is an HTTP/3 client of addr whose connections name sni, with
// no transparent decompression.
func h3Client(t *testing.T, addr, sni string) *http.Client {
	tr := &http3.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, ServerName: sni}, DisableCompression: true,
		Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			return quic.DialAddrEarly(ctx, addr, tc, qc)
		}}
	t.Cleanup(func() { tr.Close() })
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

type h3Case struct {
	name, method, host, path string
	header                   http.Header
	body                     string
	fast                     bool // answered from the edge's prepared answers
}

func h3Cases(etag, cssTag string) []h3Case {
	gz, br := http.Header{"Accept-Encoding": {"gzip, deflate, br"}}, http.Header{"Accept-Encoding": {"br"}}
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Add(kv[i], kv[i+1])
		}
		return out
	}
	return []h3Case{
		{"index", "GET", siteHost, "/", nil, "", true},
		{"1k", "GET", siteHost, "/1k.txt", nil, "", true},
		{"big", "GET", siteHost, "/big.bin", nil, "", true},
		{"query", "GET", siteHost, "/1k.txt?x=1&y=%20", nil, "", true},
		{"folder index", "GET", siteHost, "/docs/", nil, "", true},
		{"pretty", "GET", siteHost, "/about", nil, "", true},
		{"404 page", "GET", siteHost, "/missing", gz, "", true},
		{"dotdot", "GET", siteHost, "/docs/../about.html", nil, "", true},
		{"escaped", "GET", siteHost, "/%61bout", nil, "", true},
		{"escaped space", "GET", siteHost, "/odd%20name%21.txt", nil, "", true},
		{"gzip", "GET", siteHost, "/style.css", gz, "", true},
		{"br", "GET", siteHost, "/style.css", br, "", true},
		{"gzip q0", "GET", siteHost, "/style.css", h("Accept-Encoding", "gzip;q=0"), "", true},
		{"two accept-encodings", "GET", siteHost, "/style.css", h("Accept-Encoding", "identity", "Accept-Encoding", "gzip"), "", true},
		{"inm", "GET", siteHost, "/", h("If-None-Match", etag), "", true},
		{"inm weak", "GET", siteHost, "/", h("If-None-Match", "W/"+etag), "", true},
		{"inm other", "GET", siteHost, "/", h("If-None-Match", `"x"`), "", true},
		{"inm br", "GET", siteHost, "/style.css", h("Accept-Encoding", "br", "If-None-Match", strings.TrimSuffix(cssTag, `"`)+`-br"`), "", true},
		{"two inms", "GET", siteHost, "/", h("If-None-Match", `"x"`, "If-None-Match", etag), "", true},
		{"head", "HEAD", siteHost, "/", nil, "", true},
		{"head gzip", "HEAD", siteHost, "/style.css", gz, "", true},
		{"head 304", "HEAD", siteHost, "/", h("If-None-Match", etag), "", true},
		{"host port", "GET", siteHost + ":8443", "/", nil, "", true},
		{"host case", "GET", "SITE--prj.LOCALHOST", "/", nil, "", true},
		{"host dot", "GET", siteHost + ".", "/", nil, "", true},
		// This edge has no index of names: a host with no site goes to
		// ServeHTTP (the server's is answered from the index).
		{"no site", "GET", "nobody.localhost", "/", nil, "", false},
		{"no site head", "HEAD", "nobody.localhost", "/x", nil, "", false},
		{"other headers", "GET", siteHost, "/", h("User-Agent", "x", "Accept", "*/*", "Cookie", "a=b", "Cookie", "c=d"), "", true},
		{"post", "POST", siteHost, "/", nil, "abc", false},
		{"get with body", "GET", siteHost, "/", h("Content-Length", "3"), "abc", false},
		{"options", "OPTIONS", siteHost, "/", nil, "", false},
		{"bad escape", "GET", siteHost, "/%zz", nil, "", false},
		{"api", "GET", "localhost", "/v1/x", nil, "", false},
		{"api ip", "GET", "127.0.0.1:80", "/v1/x", nil, "", false},
		{"acme", "GET", siteHost, "/.well-known/acme-challenge/x", nil, "", false},
		{"te", "GET", siteHost, "/", h("Te", "trailers"), "", false},
	}
}

type h3Answer struct {
	status int
	header http.Header
	body   string
}

func h3Do(t *testing.T, c *http.Client, addr string, k h3Case) h3Answer {
	t.Helper()
	var body io.Reader
	if k.body != "" {
		body = strings.NewReader(k.body)
	}
	req, err := http.NewRequest(k.method, "https://"+addr+"/", body)
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Opaque = k.path // sent as it is, escapes and all
	req.Host = k.host
	maps.Copy(req.Header, k.header)
	resp, err := c.Do(req)
	if err != nil {
		// A request quic-go refuses (a stream error): the same error
		// from both.
		return h3Answer{status: -1, body: err.Error()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.ProtoMajor != 3 {
		t.Fatalf("%s: %s %v", k.name, resp.Proto, err)
	}
	resp.Header.Del("Date")
	return h3Answer{resp.StatusCode, resp.Header, string(b)}
}

// TestH3SameAnswers asks the fast path and quic-go's http3.Server with the
// same handler the same requests over real HTTP/3, and wants the same
// status, header fields (but Date) and body from both; the requests the
// fast path answers itself, and only those, are counted as such.
func TestH3SameAnswers(t *testing.T) {
	e := newEdge(t)
	fastAddr, h := h3Server(t, e, true)
	plainAddr, _ := h3Server(t, e, false)
	fc, pc := h3Client(t, fastAddr, siteHost), h3Client(t, plainAddr, siteHost)
	etag := h3Do(t, pc, plainAddr, h3Case{name: "etag", method: "GET", host: siteHost, path: "/"}).header.Get("Etag")
	cssTag := h3Do(t, pc, plainAddr, h3Case{name: "etag", method: "GET", host: siteHost, path: "/style.css"}).header.Get("Etag")
	if etag == "" || cssTag == "" {
		t.Fatal("no ETag")
	}
	for _, k := range h3Cases(etag, cssTag) {
		_, before := h.Served()
		got := h3Do(t, fc, fastAddr, k)
		_, after := h.Served()
		want := h3Do(t, pc, plainAddr, k)
		if got.status != want.status || got.body != want.body || !headersEqual(got.header, want.header) {
			t.Errorf("%s:\nfast path: %d %v %q\nhttp3:     %d %v %q", k.name, got.status, got.header, trunc(got.body), want.status, want.header, trunc(want.body))
		}
		if fast := after > before; fast != k.fast || k.fast && got.status < 0 {
			t.Errorf("%s: answered on the fast path %v, want %v", k.name, fast, k.fast)
		}
	}
	if conns, _ := h.Served(); conns < 1 {
		t.Errorf("no connection served on the fast path")
	}
}

func headersEqual(a, b http.Header) bool {
	return maps.EqualFunc(a, b, func(x, y []string) bool { return slices.Equal(x, y) })
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// TestH3OtherConnections: a connection whose SNI names no static site
// (the API's host, none) is served by the http3.Server alone.
func TestH3OtherConnections(t *testing.T) {
	e := newEdge(t)
	addr, h := h3Server(t, e, true)
	for _, sni := range []string{"localhost", "nobody.localhost"} {
		c := h3Client(t, addr, sni)
		a := h3Do(t, c, addr, h3Case{name: sni, method: "GET", host: siteHost, path: "/about"})
		if a.status != 200 || a.body != "<p>about</p>" {
			t.Fatalf("%s: %d %q", sni, a.status, a.body)
		}
	}
	if conns, fast := h.Served(); conns != 0 || fast != 0 {
		t.Fatalf("fast path served %d connections, %d requests", conns, fast)
	}
}

// h3Dial opens a QUIC connection for HTTP/3 to addr, naming sni.
func h3Dial(t *testing.T, addr, sni string) *quic.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	qc, err := quic.DialAddr(ctx, addr, &tls.Config{InsecureSkipVerify: true, ServerName: sni, NextProtos: []string{http3.NextProtoH3}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	return qc
}

// TestH3Timeouts: on the fast path's connections a stream whose head does
// not all come within the header timeout is reset with
// H3_REQUEST_INCOMPLETE, and a connection is closed an idle timeout after
// its last request, not before.
func TestH3Timeouts(t *testing.T) {
	e := newEdge(t)
	addr, h := h3Server(t, e, true, Config{HeaderTimeout: 200 * time.Millisecond, IdleTimeout: 600 * time.Millisecond})
	qc := h3Dial(t, addr, siteHost)
	str, err := qc.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	str.Write([]byte{h3FrameHeaders, 16, 0, 0}) // a HEADERS frame of 16 bytes, 2 sent
	str.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err = io.ReadAll(str)
	var se *quic.StreamError
	if !errors.As(err, &se) || se.ErrorCode != h3RequestIncomplete {
		t.Fatalf("stream with half a head: %v", err)
	}

	c := h3Client(t, addr, siteHost)
	start := time.Now()
	for time.Since(start) < 900*time.Millisecond { // past the idle timeout, with requests
		if a := h3Do(t, c, addr, h3Case{name: "busy", method: "GET", host: siteHost, path: "/about"}); a.status != 200 {
			t.Fatalf("busy connection: %d %s", a.status, a.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if conns, _ := h.Served(); conns != 2 {
		t.Fatalf("%d connections: the busy one was closed", conns)
	}
	idle := h3Dial(t, addr, siteHost)
	select {
	case <-idle.Context().Done():
		t.Fatal("closed at once")
	case <-time.After(300 * time.Millisecond):
	}
	select {
	case <-idle.Context().Done():
	case <-time.After(3 * time.Second):
		t.Fatal("an idle connection was not closed")
	}
}

// TestH3Shutdown: Shutdown closes the fast path's connections once their
// requests are answered, at once; the http3.Server's get GOAWAY and are
// closed when the deadline ends, if their clients have not closed them.
func TestH3Shutdown(t *testing.T) {
	e := newEdge(t)
	addr, h := h3Server(t, e, true)
	fast, other := h3Dial(t, addr, siteHost), h3Dial(t, addr, "localhost")
	c := h3Client(t, addr, siteHost)
	if a := h3Do(t, c, addr, h3Case{name: "before", method: "GET", host: siteHost, path: "/about"}); a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.Shutdown(ctx) }()
	select {
	case <-fast.Context().Done():
	case <-time.After(time.Second):
		t.Fatal("the fast path's connection still open a second after Shutdown began")
	}
	select {
	case <-other.Context().Done():
		t.Fatal("the other connection closed before the deadline")
	default:
	}
	if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v", err)
	}
	select {
	case <-other.Context().Done():
	case <-time.After(time.Second):
		t.Fatal("the other connection still open after Shutdown")
	}
}

// h3Raw sends a request whose field section is fields, as they are
// (names in any case, pseudo-header fields anywhere), on a stream of its
// own, and returns the answer as text: the status and the fields but
// Date, sorted, and the body; or the stream's error code.
func h3Raw(t *testing.T, qc *quic.Conn, fields []qpack.HeaderField) string {
	t.Helper()
	var blk bytes.Buffer
	enc := qpack.NewEncoder(&blk)
	for _, f := range fields {
		enc.WriteField(f)
	}
	str, err := qc.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	req := quicvarint.Append([]byte{h3FrameHeaders}, uint64(blk.Len()))
	str.Write(append(req, blk.Bytes()...))
	str.Close()
	str.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(str)
	var se *quic.StreamError
	if errors.As(err, &se) {
		return fmt.Sprintf("stream error %#x", se.ErrorCode)
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var body []byte
	for r := bytes.NewReader(b); r.Len() > 0; {
		typ, _ := quicvarint.Read(r)
		n, _ := quicvarint.Read(r)
		p := make([]byte, n)
		io.ReadFull(r, p)
		if typ == h3FrameData {
			body = append(body, p...)
			continue
		}
		next := (&qpack.Decoder{}).Decode(p)
		for f, err := next(); err == nil; f, err = next() {
			if f.Name != "date" {
				out = append(out, f.Name+": "+f.Value)
			}
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n") + "\n\n" + string(body)
}

// TestH3OddHeads sends heads quic-go refuses or reads in its own way, as
// raw frames, to the fast path and to http3.Server: the same answer (or
// the same stream error) from both.
func TestH3OddHeads(t *testing.T) {
	e := newEdge(t)
	fastAddr, h := h3Server(t, e, true)
	plainAddr, _ := h3Server(t, e, false)
	fq, pq := h3Dial(t, fastAddr, siteHost), h3Dial(t, plainAddr, siteHost)
	hf := func(kv ...string) []qpack.HeaderField {
		var out []qpack.HeaderField
		for i := 0; i < len(kv); i += 2 {
			out = append(out, qpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	get := func(extra ...string) []qpack.HeaderField {
		return hf(append([]string{":method", "GET", ":scheme", "https", ":authority", siteHost, ":path", "/about"}, extra...)...)
	}
	for name, fields := range map[string][]qpack.HeaderField{
		"plain":               get(),
		"upper name":          get("X-A", "b"),
		"bad value":           get("x-a", "b\x00c"),
		"bad name":            get("x a", "b"),
		"pseudo after":        append(get("x-a", "b"), qpack.HeaderField{Name: ":path", Value: "/"}),
		"duplicate path":      get(":path", "/"),
		"unknown pseudo":      get(":foo", "x"),
		"status pseudo":       get(":status", "200"),
		"protocol":            get(":protocol", "websocket"),
		"no authority":        hf(":method", "GET", ":scheme", "https", ":path", "/about"),
		"host only":           hf(":method", "GET", ":scheme", "https", ":path", "/about", "host", siteHost),
		"host differs":        get("host", "other.localhost"),
		"host same":           get("host", siteHost),
		"two hosts":           hf(":method", "GET", ":scheme", "https", ":path", "/about", "host", siteHost, "host", siteHost),
		"userinfo":            hf(":method", "GET", ":scheme", "https", ":authority", "u@"+siteHost, ":path", "/about"),
		"no path":             hf(":method", "GET", ":scheme", "https", ":authority", siteHost),
		"empty path":          hf(":method", "GET", ":scheme", "https", ":authority", siteHost, ":path", ""),
		"star path":           hf(":method", "GET", ":scheme", "https", ":authority", siteHost, ":path", "*"),
		"absolute path":       hf(":method", "GET", ":scheme", "https", ":authority", siteHost, ":path", "https://"+siteHost+"/about"),
		"no method":           hf(":scheme", "https", ":authority", siteHost, ":path", "/about"),
		"lower method":        hf(":method", "get", ":scheme", "https", ":authority", siteHost, ":path", "/about"),
		"scheme upper":        hf(":method", "GET", ":scheme", "HTTPS", ":authority", siteHost, ":path", "/about"),
		"scheme http":         hf(":method", "GET", ":scheme", "http", ":authority", siteHost, ":path", "/about"),
		"no scheme":           hf(":method", "GET", ":authority", siteHost, ":path", "/about"),
		"connection":          get("connection", "close"),
		"te trailers":         get("te", "trailers"),
		"te gzip":             get("te", "gzip"),
		"content-length":      get("content-length", "0"),
		"bad content-length":  get("content-length", "x"),
		"cookies":             get("cookie", "a=b", "cookie", "c=d"),
		"control in path":     hf(":method", "GET", ":scheme", "https", ":authority", siteHost, ":path", "/ab\x7fout"),
		"space in path":       hf(":method", "GET", ":scheme", "https", ":authority", siteHost, ":path", "/ab out"),
		"percent path":        hf(":method", "GET", ":scheme", "https", ":authority", siteHost, ":path", "/%61bout"),
		"head":                hf(":method", "HEAD", ":scheme", "https", ":authority", siteHost, ":path", "/about"),
		"connect":             hf(":method", "CONNECT", ":authority", siteHost),
		"empty authority":     hf(":method", "GET", ":scheme", "https", ":authority", "", ":path", "/about"),
		"authority with port": hf(":method", "GET", ":scheme", "https", ":authority", siteHost+":443", ":path", "/about"),
		"long header":         get("x-long", strings.Repeat("a", 5000)),
	} {
		got, want := h3Raw(t, fq, fields), h3Raw(t, pq, fields)
		if got != want {
			t.Errorf("%s:\nfast path: %q\nhttp3:     %q", name, got, want)
		}
	}
	// The heads it reads as they are were answered there.
	if _, fast := h.Served(); fast < 5 {
		t.Errorf("%d answered on the fast path", fast)
	}
	if a := h3Raw(t, fq, get()); !strings.HasPrefix(a, ":status: 200\n") || !strings.HasSuffix(a, "\n\n<p>about</p>") {
		t.Errorf("plain GET: %q", a)
	}
}
