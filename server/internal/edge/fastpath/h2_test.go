package fastpath

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/pierhq/pier/server/internal/edge"
)

const acmePrefix = "/.well-known/acme-challenge/"

// h2handler is handler with ACME challenges answered first, as the
// server's routing has them.
func h2handler(e *edge.Edge) http.Handler {
	next := handler(e)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, acmePrefix) {
			io.WriteString(w, "key-authorization "+r.URL.Path[len(acmePrefix):])
			return
		}
		next.ServeHTTP(w, r)
	})
}

var testCert = sync.OnceValue(func() tls.Certificate {
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS()
	defer ts.Close()
	return ts.TLS.Certificates[0]
})

type h2server struct {
	addr string
	ln   *Listener // nil for net/http alone
}

// serveH2 starts net/http over TLS on loopback, with the fast path in
// front (serving h2 for static sites) when fast.
func serveH2(t testing.TB, e *edge.Edge, fast bool, cfg Config) *h2server {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{testCert()}, NextProtos: []string{"h2", "http/1.1"}}
	h := h2handler(e)
	srv := &http.Server{Handler: h, TLSConfig: tc, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10, WriteTimeout: cfg.WriteTimeout,
		ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelDebug)}
	s := &h2server{addr: inner.Addr().String()}
	var ln net.Listener = tls.NewListener(inner, tc)
	if fast {
		cfg.Edge, cfg.API, cfg.TLS, cfg.Handler, cfg.Log = e, isAPI, tc, h, slog.New(slog.DiscardHandler)
		cfg.MaxHeaderBytes = srv.MaxHeaderBytes
		cfg.Reserved = func(p string) bool { return strings.HasPrefix(p, acmePrefix) }
		s.ln = New(inner, cfg)
		ln = s.ln
		srv.ConnContext, srv.Handler = ConnContext, WithTLS(h)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

func (s *h2server) served() int64 {
	if s.ln == nil {
		return 0
	}
	return s.ln.h2served.Load()
}

// h2Client is an HTTP/2 client whose connections present sni.
func h2Client(addr, sni string) *http.Client {
	tr := &http.Transport{
		Protocols:          new(http.Protocols),
		DisableCompression: true,
		DialTLSContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, ServerName: sni, NextProtos: []string{"h2"}}}
			return d.DialContext(ctx, network, addr)
		},
	}
	tr.Protocols.SetHTTP2(true)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

type h2req struct {
	name, sni, method, path, host string
	header                        []string // name, value, ...
	body                          string
}

func (r h2req) do(t *testing.T, c *http.Client) answer {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, "https://"+r.sni+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.host != "" {
		req.Host = r.host
	}
	for i := 0; i+1 < len(r.header); i += 2 {
		req.Header.Add(r.header[i], r.header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", r.name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: body: %v", r.name, err)
	}
	if resp.Header.Get("Date") == "" {
		t.Errorf("%s: no Date", r.name)
	}
	resp.Header.Del("Date")
	resp.Header.Set("X-Proto", resp.Proto)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// TestH2SameAnswers: over h2, the fast path answers every request of the
// table as net/http's h2 server with the same handler does (status,
// headers but Date, body), and serves the site's connections itself.
func TestH2SameAnswers(t *testing.T) {
	e := newEdge(t)
	ref := serveH2(t, e, false, Config{})
	fast := serveH2(t, e, true, Config{})
	etag := h2req{sni: siteHost, method: "GET", path: "/"}.do(t, h2Client(ref.addr, siteHost)).header.Get("Etag")
	cases := h2SameAnswerCases(etag)
	clients := map[string]*http.Client{}
	client := func(addr, sni string) *http.Client {
		if c, ok := clients[addr+sni]; ok {
			return c
		}
		c := h2Client(addr, sni)
		clients[addr+sni] = c
		return c
	}
	for _, c := range cases {
		if c.sni == "" {
			c.sni = siteHost
		}
		if c.method == "" {
			c.method = "GET"
		}
		t.Run(c.name, func(t *testing.T) {
			want := c.do(t, client(ref.addr, c.sni))
			got := c.do(t, client(fast.addr, c.sni))
			if got.String() != want.String() {
				t.Errorf("fast path answered\n%s\nnet/http answered\n%s", got, want)
			}
		})
	}
	// The site's connection was the fast path's; the others net/http's.
	if n := fast.served(); n != 1 {
		t.Errorf("fast path served %d h2 connections, want 1", n)
	}
	if n := fast.ln.handoffs.Load(); n != 2 {
		t.Errorf("%d connections handed to net/http, want 2", n)
	}
}

// h2SameAnswerCases answers the requests both servers get over h2; etag
// is the index's ETag. Method and SNI default to GET and the site.
func h2SameAnswerCases(etag string) []h2req {
	s := siteHost
	return []h2req{
		{name: "index", path: "/"},
		{name: "1k", path: "/1k.txt"},
		{name: "big", path: "/big.bin"},
		{name: "query", path: "/1k.txt?x=1&y=%20"},
		{name: "folder index", path: "/docs/"},
		{name: "folder no slash", path: "/docs"},
		{name: "pretty", path: "/about"},
		{name: "dir page", path: "/dir/page"},
		{name: "404 page", path: "/missing"},
		{name: "404 gzip", path: "/missing", header: []string{"Accept-Encoding", "gzip"}},
		{name: "dotdot", path: "/docs/../about.html"},
		{name: "escaped", path: "/%61bout"},
		{name: "escaped space", path: "/odd%20name%21.txt"},
		{name: "gzip", path: "/style.css", header: []string{"Accept-Encoding", "gzip, deflate, br"}},
		{name: "gzip q0", path: "/style.css", header: []string{"Accept-Encoding", "gzip;q=0"}},
		{name: "gzip upper", path: "/style.css", header: []string{"Accept-Encoding", "GZIP"}},
		{name: "gzip twice", path: "/style.css", header: []string{"Accept-Encoding", "identity", "Accept-Encoding", "gzip"}},
		{name: "json gzip", path: "/data/config.json", header: []string{"Accept-Encoding", "gzip"}},
		{name: "svg", path: "/assets/logo.svg"},
		{name: "inm", path: "/", header: []string{"If-None-Match", etag}},
		{name: "inm weak", path: "/", header: []string{"If-None-Match", "W/" + etag}},
		{name: "inm star", path: "/style.css", header: []string{"If-None-Match", "*"}},
		{name: "inm list", path: "/", header: []string{"If-None-Match", `"x", ` + etag}},
		{name: "inm other", path: "/", header: []string{"If-None-Match", `"x"`}},
		{name: "inm twice", path: "/", header: []string{"If-None-Match", `"x"`, "If-None-Match", etag}},
		{name: "inm 404", path: "/missing", header: []string{"If-None-Match", "*"}},
		{name: "head", method: "HEAD", path: "/"},
		{name: "head big", method: "HEAD", path: "/big.bin"},
		{name: "head gzip", method: "HEAD", path: "/style.css", header: []string{"Accept-Encoding", "gzip"}},
		{name: "head 304", method: "HEAD", path: "/", header: []string{"If-None-Match", etag}},
		{name: "head 404", method: "HEAD", path: "/missing"},
		{name: "host port", path: "/", host: s + ":8443"},
		{name: "host case", path: "/", host: "SITE--prj.LOCALHOST"},
		{name: "host dot", path: "/", host: s + "."},
		{name: "range", path: "/1k.txt", header: []string{"Range", "bytes=0-9"}},
		{name: "other headers", path: "/", header: []string{"User-Agent", "x", "Accept", "*/*", "Cookie", "a=b", "Cookie", "c=d"}},
		{name: "post", method: "POST", path: "/", body: "abc"},
		{name: "post big", method: "POST", path: "/", body: strings.Repeat("x", 200000)},
		{name: "post empty", method: "POST", path: "/"},
		{name: "get with body", path: "/about", body: "abc"},
		{name: "put", method: "PUT", path: "/x", body: "abc"},
		{name: "delete", method: "DELETE", path: "/"},
		{name: "options", method: "OPTIONS", path: "/"},
		{name: "acme", path: acmePrefix + "tok"},
		{name: "acme head", method: "HEAD", path: acmePrefix + "tok"},
		{name: "long header", path: "/", header: []string{"X-Long", strings.Repeat("a", 10000)}},
		// Connections net/http serves: no site, the API, over the same
		// fast-path listener.
		{name: "no site", sni: "nobody.localhost", path: "/"},
		{name: "no site post", sni: "nobody.localhost", method: "POST", path: "/", body: "x"},
		{name: "api", sni: "localhost", path: "/v1/x"},
		{name: "api post", sni: "localhost", method: "POST", path: "/v1/x", body: "abcd"},
	}
}

// A request for another host on a site's connection is misdirected: the
// connection's certificate names the site alone.
func TestH2OtherHostMisdirected(t *testing.T) {
	e := newEdge(t)
	fast := serveH2(t, e, true, Config{})
	c := h2Client(fast.addr, siteHost)
	for _, host := range []string{"localhost", "nobody.localhost", "other.example"} {
		a := h2req{name: host, sni: siteHost, method: "GET", path: "/", host: host}.do(t, c)
		if a.status != http.StatusMisdirectedRequest {
			t.Errorf("host %s: %d", host, a.status)
		}
	}
	if a := (h2req{name: "site", sni: siteHost, method: "GET", path: "/about"}).do(t, c); a.body != "<p>about</p>" {
		t.Errorf("then the site: %d %q", a.status, a.body)
	}
}

// Many streams at once on one connection, each answered in full.
func TestH2ConcurrentStreams(t *testing.T) {
	e := newEdge(t)
	fast := serveH2(t, e, true, Config{})
	c := h2Client(fast.addr, siteHost)
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for i := range 400 {
		wg.Go(func() {
			p := []string{"/1k.txt", "/big.bin", "/", "/missing"}[i%4]
			resp, err := c.Get("https://" + siteHost + p)
			if err != nil {
				errs <- err
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := siteFiles[strings.TrimPrefix(p, "/")]
			switch p {
			case "/":
				want = siteFiles["index.html"]
			case "/missing":
				want = siteFiles["404.html"]
			}
			if err != nil || string(b) != want {
				errs <- fmt.Errorf("%s: %v, %d bytes", p, err, len(b))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Past 250 streams the client opens a second connection.
	if n := fast.served(); n < 1 || fast.ln.handoffs.Load() != 0 {
		t.Errorf("fast path served %d connections, net/http %d", n, fast.ln.handoffs.Load())
	}
}

// rawH2 is a client speaking frames, for what http2.Transport does not
// let a test do.
type rawH2 struct {
	t    testing.TB
	c    *tls.Conn
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	sni  string
}

func dialRaw(t testing.TB, addr, sni string, settings ...http2.Setting) *rawH2 {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, ServerName: sni, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r := &rawH2{t: t, c: c, fr: http2.NewFramer(c, c), sni: sni}
	r.enc = hpack.NewEncoder(&r.hbuf)
	r.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	io.WriteString(c, http2.ClientPreface)
	r.fr.WriteSettings(settings...)
	return r
}

func (r *rawH2) request(id uint32, method, path string, end bool, extra ...string) {
	r.hbuf.Reset()
	for _, f := range [][2]string{{":method", method}, {":scheme", "https"}, {":authority", r.sni}, {":path", path}} {
		r.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for i := 0; i+1 < len(extra); i += 2 {
		r.enc.WriteField(hpack.HeaderField{Name: extra[i], Value: extra[i+1]})
	}
	block := r.hbuf.Bytes()
	first := block[:min(len(block), 16384)]
	if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: end, EndHeaders: len(first) == len(block)}); err != nil {
		r.t.Fatal(err)
	}
	for block = block[len(first):]; len(block) > 0; {
		k := min(len(block), 16384)
		r.fr.WriteContinuation(id, k == len(block), block[:k])
		block = block[k:]
	}
}

type h2RawAnswer struct {
	status string
	body   []byte
	reset  http2.ErrCode
	done   bool
}

// exchange reads frames until every stream in want ended, acknowledging
// settings. grant, when set, is called on each DATA frame and may send
// window updates. It returns the answers and the server's settings.
func (r *rawH2) exchange(want []uint32, grant func(f *http2.DataFrame)) (map[uint32]*h2RawAnswer, map[http2.SettingID]uint32) {
	r.t.Helper()
	out := map[uint32]*h2RawAnswer{}
	for _, id := range want {
		out[id] = &h2RawAnswer{}
	}
	settings := map[http2.SettingID]uint32{}
	left := len(want)
	// With no streams, wait for the server's settings and its ack of ours.
	gotSettings, gotAck := len(want) > 0, len(want) > 0
	for left > 0 || !gotSettings || !gotAck {
		f, err := r.fr.ReadFrame()
		if err != nil {
			r.t.Fatalf("read: %v (%d streams left)", err, left)
		}
		a := out[f.Header().StreamID]
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				f.ForeachSetting(func(s http2.Setting) error { settings[s.ID] = s.Val; return nil })
				r.fr.WriteSettingsAck()
				gotSettings = true
			} else {
				gotAck = true
			}
		case *http2.MetaHeadersFrame:
			a.status = f.PseudoValue("status")
			if f.StreamEnded() {
				a.done = true
				left--
			}
		case *http2.DataFrame:
			a.body = append(a.body, f.Data()...)
			if grant != nil {
				grant(f)
			}
			if f.StreamEnded() {
				a.done = true
				left--
			}
		case *http2.RSTStreamFrame:
			if a != nil && !a.done {
				a.reset, a.done = f.ErrCode, true
				left--
			}
		case *http2.GoAwayFrame:
			r.t.Fatalf("GOAWAY %v %q", f.ErrCode, f.DebugData())
		}
	}
	return out, settings
}

// Flow control: with a 1,000-byte stream window the server sends no more
// than the windows grant, and the body arrives whole as they open.
func TestH2FlowControl(t *testing.T) {
	e := newEdge(t)
	for _, fast := range []bool{false, true} {
		s := serveH2(t, e, fast, Config{})
		r := dialRaw(t, s.addr, siteHost, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1000},
			http2.Setting{ID: http2.SettingMaxFrameSize, Val: 16384})
		r.request(1, "GET", "/big.bin", true)
		r.request(3, "GET", "/1k.txt", true)
		window := map[uint32]int{1: 1000, 3: 1000}
		conn := 65535
		got, settings := r.exchange([]uint32{1, 3}, func(f *http2.DataFrame) {
			id, n := f.StreamID, len(f.Data())
			window[id] -= n
			conn -= n
			if window[id] < 0 || conn < 0 || n > 16384 {
				t.Fatalf("fast %v: stream %d sent %d bytes past its window (stream %d, connection %d)", fast, id, n, window[id], conn)
			}
			if n > 0 {
				r.fr.WriteWindowUpdate(id, uint32(n))
				r.fr.WriteWindowUpdate(0, uint32(n))
				window[id] += n
				conn += n
			}
		})
		if string(got[1].body) != siteFiles["big.bin"] || string(got[3].body) != siteFiles["1k.txt"] {
			t.Errorf("fast %v: bodies of %d and %d bytes", fast, len(got[1].body), len(got[3].body))
		}
		if settings[http2.SettingMaxConcurrentStreams] != 250 {
			t.Errorf("fast %v: settings %v", fast, settings)
		}
		if n := s.served(); fast && n != 1 {
			t.Errorf("served %d", n)
		}
	}
}

// Answers past one flush's worth (256 KiB) all go out although the client
// sends nothing more once the windows are open.
func TestH2LargeBatch(t *testing.T) {
	e := newEdge(t)
	s := serveH2(t, e, true, Config{})
	r := dialRaw(t, s.addr, siteHost, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30})
	r.fr.WriteWindowUpdate(0, 1<<30)
	var ids []uint32
	for i := range 40 {
		id := uint32(2*i + 1)
		ids = append(ids, id)
		r.request(id, "GET", "/big.bin", true)
	}
	got, _ := r.exchange(ids, nil)
	for _, id := range ids {
		if string(got[id].body) != siteFiles["big.bin"] {
			t.Fatalf("stream %d: %d bytes", id, len(got[id].body))
		}
	}
}

// With no window at all, streams stay open: past 250 of them the server
// refuses more, as net/http does.
func TestH2MaxConcurrentStreams(t *testing.T) {
	e := newEdge(t)
	for _, fast := range []bool{false, true} {
		s := serveH2(t, e, fast, Config{})
		r := dialRaw(t, s.addr, siteHost, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
		// Wait for the server's settings and its acknowledgement.
		var ids []uint32
		for i := range 260 {
			ids = append(ids, uint32(2*i+1))
		}
		r.exchange(nil, nil)
		for _, id := range ids {
			r.request(id, "GET", "/1k.txt", true)
		}
		// The refused streams end first; then open the windows.
		refused := 0
		for refused < 10 {
			f, err := r.fr.ReadFrame()
			if err != nil {
				t.Fatalf("fast %v: %v after %d refused", fast, err, refused)
			}
			switch f := f.(type) {
			case *http2.RSTStreamFrame:
				if f.StreamID < ids[250] || (f.ErrCode != http2.ErrCodeProtocol && f.ErrCode != http2.ErrCodeRefusedStream) {
					t.Fatalf("fast %v: stream %d reset with %v", fast, f.StreamID, f.ErrCode)
				}
				refused++
			case *http2.SettingsFrame:
				if !f.IsAck() {
					r.fr.WriteSettingsAck()
				}
			case *http2.DataFrame:
				t.Fatalf("fast %v: DATA with no window", fast)
			}
		}
		r.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65535})
		got, _ := r.exchange(ids[:250], func(f *http2.DataFrame) {
			if n := len(f.Data()); n > 0 {
				r.fr.WriteWindowUpdate(0, uint32(n))
			}
		})
		for _, id := range ids[:250] {
			if string(got[id].body) != siteFiles["1k.txt"] {
				t.Fatalf("fast %v: stream %d: %+v", fast, id, got[id])
			}
		}
	}
}

// A stream the client resets gets no more DATA; the connection goes on.
// PING is answered, and a client's GOAWAY ends the connection once its
// streams are answered.
func TestH2ResetPingGoAway(t *testing.T) {
	e := newEdge(t)
	for _, fast := range []bool{false, true} {
		s := serveH2(t, e, fast, Config{})
		r := dialRaw(t, s.addr, siteHost, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100})
		r.request(1, "GET", "/big.bin", true)
		r.exchange(nil, nil)
		r.fr.WriteRSTStream(1, http2.ErrCodeCancel)
		r.fr.WriteWindowUpdate(1, 1<<20) // for a closed stream: ignored
		r.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65535})
		r.fr.WritePing(false, [8]byte{1, 2, 3, 4, 5, 6, 7, 8})
		r.request(3, "GET", "/about", true)
		pinged := false
		var body []byte
		for done := false; !done || !pinged; {
			f, err := r.fr.ReadFrame()
			if err != nil {
				t.Fatalf("fast %v: %v", fast, err)
			}
			switch f := f.(type) {
			case *http2.PingFrame:
				if !f.IsAck() || f.Data != [8]byte{1, 2, 3, 4, 5, 6, 7, 8} {
					t.Fatalf("fast %v: ping %+v", fast, f)
				}
				pinged = true
			case *http2.DataFrame:
				if f.StreamID == 1 && len(f.Data()) > 0 {
					// At most the 100 bytes granted before the reset.
					if len(f.Data()) > 100 {
						t.Fatalf("fast %v: %d bytes for a reset stream", fast, len(f.Data()))
					}
					continue
				}
				body = append(body, f.Data()...)
				done = f.StreamEnded()
			case *http2.SettingsFrame:
				if !f.IsAck() {
					r.fr.WriteSettingsAck()
				}
			case *http2.GoAwayFrame:
				t.Fatalf("fast %v: GOAWAY %v", fast, f.ErrCode)
			}
		}
		if string(body) != "<p>about</p>" {
			t.Fatalf("fast %v: %q", fast, body)
		}
		r.fr.WriteGoAway(3, http2.ErrCodeNo, nil)
		r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, r.c); err != nil && !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("fast %v: connection not closed after GOAWAY: %v", fast, err)
		}
	}
}

// A stream kept waiting for window past the write timeout is reset with
// INTERNAL_ERROR, as net/http resets it, however often the client pings.
func TestH2StreamWriteTimeout(t *testing.T) {
	e := newEdge(t)
	for _, fast := range []bool{true, false} {
		s := serveH2(t, e, fast, Config{WriteTimeout: 500 * time.Millisecond})
		r := dialRaw(t, s.addr, siteHost, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
		r.exchange(nil, nil)
		r.request(1, "GET", "/1k.txt", true)
		start := time.Now()
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
					r.fr.WritePing(false, [8]byte{})
				}
			}
		}()
		got, _ := r.exchange([]uint32{1}, nil)
		close(stop)
		if got[1].reset != http2.ErrCodeInternal || time.Since(start) > 3*time.Second {
			t.Errorf("fast %v: %+v after %v", fast, got[1], time.Since(start))
		}
	}
}

// Protocol errors end the connection with GOAWAY and the code net/http
// sends; stream errors reset the stream alone.
func TestH2ProtocolErrors(t *testing.T) {
	e := newEdge(t)
	type step func(r *rawH2)
	cases := []struct {
		name string
		do   step
	}{
		{"even stream", func(r *rawH2) { r.request(2, "GET", "/", true) }},
		{"data on idle stream", func(r *rawH2) { r.fr.WriteData(5, true, []byte("x")) }},
		{"window overflow", func(r *rawH2) { r.fr.WriteWindowUpdate(0, 1<<31-1) }},
		{"push promise", func(r *rawH2) {
			r.fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, BlockFragment: []byte{0x82}, EndHeaders: true})
		}},
		{"bad setting", func(r *rawH2) { r.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 2}) }},
		{"oversized header list in CONTINUATION", func(r *rawH2) {
			r.request(1, "GET", "/", true, "x-a", strings.Repeat("a", 15000), "x-b", strings.Repeat("b", 15000))
		}},
		{"continuation alone", func(r *rawH2) { r.fr.WriteContinuation(1, true, []byte{0x82}) }},
		{"bad hpack", func(r *rawH2) {
			r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0xff, 0xff, 0xff}, EndStream: true, EndHeaders: true})
		}},
	}
	for _, c := range cases {
		codes := map[bool]http2.ErrCode{}
		for _, fast := range []bool{false, true} {
			codes[fast] = goAwayCode(t, e, fast, c.do)
		}
		if codes[true] != codes[false] {
			t.Errorf("%s: fast path GOAWAY %v, net/http %v", c.name, codes[true], codes[false])
		}
	}
	// Stream errors: a malformed request is reset or answered 400 or 431
	// as net/http does, and the connection goes on.
	answers := map[bool]string{}
	for _, fast := range []bool{false, true} {
		answers[fast] = streamErrorAnswers(t, e, fast)
	}
	if answers[true] != answers[false] {
		t.Errorf("fast path:\n%s\nnet/http:\n%s", answers[true], answers[false])
	}
}

// goAwayCode opens an h2 connection to the site, does the wrong thing, and
// answers the GOAWAY's code, or 99 without one.
func goAwayCode(t *testing.T, e *edge.Edge, fast bool, do func(r *rawH2)) http2.ErrCode {
	t.Helper()
	s := serveH2(t, e, fast, Config{})
	r := dialRaw(t, s.addr, siteHost)
	r.exchange(nil, nil)
	do(r)
	code := http2.ErrCode(99)
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			break
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			code = g.ErrCode
			break
		}
	}
	return code
}

// streamErrorAnswers sends malformed requests on one connection, then a
// good one, and answers how each was reset or answered.
func streamErrorAnswers(t *testing.T, e *edge.Edge, fast bool) string {
	t.Helper()
	s := serveH2(t, e, fast, Config{})
	r := dialRaw(t, s.addr, siteHost)
	reqs := [][]string{
		{"GET", "/", "connection", "close"},
		{"GET", ""},
		{"GET", "/about", "Upper", "x"},
		{"GET", "/", "te", "gzip"},
		{"GET", "/", "upgrade", "h2c", "keep-alive", "1"},
		{"GET", "/", "x-a", strings.Repeat("a", 5000), "x-b", strings.Repeat("a", 5000), "x-c", strings.Repeat("a", 5000), "x-d", strings.Repeat("a", 5000), "x-e", strings.Repeat("a", 5000)},
		{"HEAD", "/", "x-a", strings.Repeat("a", 5000), "x-b", strings.Repeat("a", 5000), "x-c", strings.Repeat("a", 5000), "x-d", strings.Repeat("a", 5000), "x-e", strings.Repeat("a", 5000)},
		{"GET", "/%zz"},
		{"GET", "about"},
		{"CONNECT", ""},
		{"GET", "/about"},
	}
	var ids []uint32
	for i, q := range reqs {
		id := uint32(2*i + 1)
		ids = append(ids, id)
		if q[0] == "CONNECT" {
			r.hbuf.Reset()
			r.enc.WriteField(hpack.HeaderField{Name: ":method", Value: "CONNECT"})
			r.enc.WriteField(hpack.HeaderField{Name: ":authority", Value: siteHost})
			r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.hbuf.Bytes(), EndStream: true, EndHeaders: true})
			continue
		}
		r.request(id, q[0], q[1], true, q[2:]...)
	}
	got, _ := r.exchange(ids, nil)
	var b strings.Builder
	for i, id := range ids {
		fmt.Fprintf(&b, "%v: status %s reset %v body %q\n", reqs[i][:2], got[id].status, got[id].reset, got[id].body)
	}
	if string(got[ids[len(ids)-1]].body) != "<p>about</p>" {
		t.Errorf("fast %v: then %+v", fast, got[ids[len(ids)-1]])
	}
	return b.String()
}

// A connection that never sends the preface, or idles, is closed within
// the header and idle timeouts; Close on the listener ends the fast
// path's connections with GOAWAY.
func TestH2Timeouts(t *testing.T) {
	e := newEdge(t)
	s := serveH2(t, e, true, Config{HeaderTimeout: 200 * time.Millisecond, IdleTimeout: 1500 * time.Millisecond})
	c, err := tls.Dial("tcp", s.addr, &tls.Config{InsecureSkipVerify: true, ServerName: siteHost, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	if _, err := io.Copy(io.Discard, c); err != nil || time.Since(start) > 3*time.Second {
		t.Fatalf("silent connection: %v after %v", err, time.Since(start))
	}
	r := dialRaw(t, s.addr, siteHost)
	r.request(1, "GET", "/", true)
	r.exchange([]uint32{1}, nil)
	start = time.Now()
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			t.Fatalf("idle connection ended without GOAWAY: %v", err)
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			if g.ErrCode != http2.ErrCodeNo || time.Since(start) > 4*time.Second {
				t.Fatalf("GOAWAY %v after %v", g.ErrCode, time.Since(start))
			}
			break
		}
	}
	r = dialRaw(t, s.addr, siteHost)
	r.request(1, "GET", "/", true)
	r.exchange([]uint32{1}, nil)
	s.ln.Close()
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			t.Fatalf("closed listener: %v", err)
		}
		if _, ok := f.(*http2.GoAwayFrame); ok {
			break
		}
	}
}

// FuzzH2 sends arbitrary bytes as the frames after the preface (and after
// a first valid SETTINGS when the seed's first byte is odd) on a site's h2
// connection: the fast path must not panic and must end every exchange
// within its timeouts.
func FuzzH2(f *testing.F) {
	var seeds [][]byte
	frames := func(write func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer)) []byte {
		var b, hb bytes.Buffer
		fr := http2.NewFramer(&b, nil)
		write(fr, hpack.NewEncoder(&hb), &hb)
		return b.Bytes()
	}
	get := func(enc *hpack.Encoder, hb *bytes.Buffer, path string, extra ...string) []byte {
		hb.Reset()
		for _, kv := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", siteHost}, {":path", path}} {
			enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
		}
		for i := 0; i+1 < len(extra); i += 2 {
			enc.WriteField(hpack.HeaderField{Name: extra[i], Value: extra[i+1]})
		}
		return bytes.Clone(hb.Bytes())
	}
	seeds = append(seeds,
		frames(func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer) {
			fr.WriteSettings()
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: get(enc, hb, "/"), EndStream: true, EndHeaders: true})
		}),
		frames(func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer) {
			fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10})
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: get(enc, hb, "/big.bin", "accept-encoding", "gzip"), EndStream: true, EndHeaders: true})
			fr.WriteWindowUpdate(1, 1000)
			fr.WriteRSTStream(1, http2.ErrCodeCancel)
			fr.WritePing(false, [8]byte{})
		}),
		frames(func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer) {
			fr.WriteSettings()
			block := get(enc, hb, "/style.css", "if-none-match", "*")
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:3], EndStream: false})
			fr.WriteContinuation(1, true, block[3:])
			fr.WriteData(1, false, []byte("body"))
			fr.WriteData(1, true, nil)
			fr.WriteGoAway(1, http2.ErrCodeNo, nil)
		}),
		frames(func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer) {
			fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0}, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20})
			fr.WriteSettingsAck()
			fr.WritePriority(3, http2.PriorityParam{StreamDep: 1, Weight: 9})
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: get(enc, hb, "/missing", "cookie", "a"), EndStream: true, EndHeaders: true})
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: get(enc, hb, "/", "host", "other"), EndStream: true, EndHeaders: true})
			fr.WriteRawFrame(0x20, 0, 0, []byte("unknown"))
		}),
	)
	for _, s := range seeds {
		f.Add(s, uint8(0))
		f.Add(s, uint8(1))
	}
	e := newEdge(f)
	s := serveH2(f, e, true, Config{IdleTimeout: 300 * time.Millisecond, HeaderTimeout: 300 * time.Millisecond})
	f.Fuzz(func(t *testing.T, b []byte, mode uint8) {
		c, err := tls.Dial("tcp", s.addr, &tls.Config{InsecureSkipVerify: true, ServerName: siteHost, NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		io.WriteString(c, http2.ClientPreface)
		if mode%2 == 1 {
			http2.NewFramer(c, nil).WriteSettings()
		}
		c.Write(b)
		// Answers are read (the server may wait on a full socket) until
		// the fast path ends the connection.
		if _, err := io.Copy(io.Discard, c); err != nil && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("connection not ended by the server: %v", err)
		}
	})
}

// BenchmarkH2FastPath sends one GET of the 1 KiB file at a time over one
// h2 connection to the fast path and to net/http's h2 server, interleaved,
// and reports each one's time per request and the ratio (net/http time /
// fast path time: above 1 is faster than net/http).
func BenchmarkH2FastPath(b *testing.B) {
	e := newEdge(b)
	var conns [2]*rawH2
	for i, fast := range []bool{true, false} {
		s := serveH2(b, e, fast, Config{})
		conns[i] = dialRaw(b, s.addr, siteHost)
		conns[i].exchange(nil, nil)
	}
	var spent [2]time.Duration
	id := uint32(1)
	b.ReportAllocs()
	for b.Loop() {
		for i, r := range conns {
			start := time.Now()
			r.c.SetDeadline(start.Add(10 * time.Second))
			r.request(id, "GET", "/1k.txt", true)
			got, _ := r.exchange([]uint32{id}, func(f *http2.DataFrame) {
				if n := len(f.Data()); n > 0 {
					r.fr.WriteWindowUpdate(0, uint32(n))
				}
			})
			if len(got[id].body) != 1024 {
				b.Fatal(strconv.Itoa(len(got[id].body)))
			}
			spent[i] += time.Since(start)
		}
		id += 2
	}
	b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "fast-ns/req")
	b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), "nethttp-ns/req")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "ratio")
}
