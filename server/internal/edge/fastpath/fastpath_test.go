package fastpath

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/clientaddr"
	"github.com/pierhq/pier/server/internal/edge"
	"github.com/pierhq/pier/server/internal/store"
)

const siteHost = "site--prj.localhost"

var siteFiles = map[string]string{
	"index.html":       "<!doctype html><title>Hello</title>",
	"style.css":        "body { color: red; }\n" + strings.Repeat("p { margin: 0; }\n", 40),
	"docs/index.html":  "<p>docs</p>",
	"about.html":       "<p>about</p>",
	"404.html":         "<p>Not here</p>" + strings.Repeat(" ", 400),
	"assets/logo.svg":  "<svg xmlns='http://www.w3.org/2000/svg'/>",
	"1k.txt":           strings.Repeat("0123456789abcdef", 64),
	"big.bin":          strings.Repeat("\x00\x01\x02", 30000),
	"odd name!.txt":    "odd",
	"dir/page.html":    "<p>page</p>",
	"dir/index.html":   "<p>dir</p>",
	"favicon.ico":      "ico",
	"data/config.json": `{"a":1}` + strings.Repeat(" ", 300),
}

// newEdge stores a live site at siteHost and returns an edge over it.
func newEdge(t testing.TB) *edge.Edge {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	if _, err := st.Accounts().CreateOrganization(ctx, "org_1", "org", now); err != nil {
		t.Fatal(err)
	}
	var manifest []edge.File
	for p, data := range siteFiles {
		sum := sha256.Sum256([]byte(data))
		sha := hex.EncodeToString(sum[:])
		if err := st.Bundles().PutBlob(ctx, sha, []byte(data), now); err != nil {
			t.Fatal(err)
		}
		manifest = append(manifest, edge.File{Path: p, SHA256: sha, Size: int64(len(data))})
	}
	mj, _ := json.Marshal(manifest)
	if _, _, err := st.Bundles().Put(ctx, store.Bundle{ID: "bnd_1", OrgID: "org_1", SHA256: "x", FileCount: len(manifest), Manifest: string(mj), CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	err = st.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.Projects().Create(ctx, store.Project{ID: "prj_1", OrgID: "org_1", Name: "p", Policy: "{}", CreatedAt: now}); err != nil {
			return err
		}
		if err := tx.Services().Insert(ctx, store.Service{ID: "svc_1", OrgID: "org_1", ProjectID: "prj_1", Name: "site", Target: "edge",
			PreviewHost: siteHost, BundleID: "bnd_1", State: "live", TaskID: "tsk_1", CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		// The edge serves a host only for the service that holds it.
		return tx.Services().ClaimHost(ctx, siteHost, "svc_1", "org_1", now)
	})
	if err != nil {
		t.Fatal(err)
	}
	return edge.New(edge.FromStore(st), slog.New(slog.DiscardHandler))
}

func isAPI(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(host)
	return host == "" || host == "localhost" || host == "api.localhost" || net.ParseIP(host) != nil
}

// handler is the server's routing in small: the API host gets an echo,
// every other host the edge.
func handler(e *edge.Edge) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isAPI(r.Host) {
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprintf(w, "api %s %s %d", r.Method, r.URL.Path, len(b))
			return
		}
		e.ServeHTTP(w, r)
	})
}

type server struct {
	addr string
	ln   *Listener // nil for plain net/http
}

// serve starts net/http over ln, with the fast path in front when fast.
func serve(t testing.TB, e *edge.Edge, fast bool, cfg Config) *server {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: clientaddr.Middleware(cfg.Trusted, handler(e)), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute,
		ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelDebug)}
	if cfg.HeaderTimeout != 0 {
		srv.ReadHeaderTimeout, srv.IdleTimeout = cfg.HeaderTimeout, cfg.IdleTimeout
	}
	s := &server{addr: inner.Addr().String()}
	var ln net.Listener = inner
	if fast {
		cfg.Edge, cfg.API, cfg.Log = e, isAPI, slog.New(slog.DiscardHandler)
		s.ln = New(inner, cfg)
		ln = s.ln
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

func (s *server) handoffs() int64 {
	if s.ln == nil {
		return 0
	}
	return s.ln.handoffs.Load()
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (a answer) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n", a.status)
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range a.header {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %q\n", k, a.header[k])
	}
	fmt.Fprintf(&b, "body %q", a.body)
	return b.String()
}

// exchange writes raw on a new connection and reads n answers.
func exchange(t testing.TB, addr, raw string, n int, head bool) []answer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	return readAnswers(t, bufio.NewReader(c), n, head)
}

func readAnswers(t testing.TB, br *bufio.Reader, n int, head bool) []answer {
	t.Helper()
	var out []answer
	for range n {
		method := "GET"
		if head {
			method = "HEAD"
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("answer %d: %v", len(out)+1, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Header.Del("Date")
		h := resp.Header
		if resp.Close {
			h.Set("X-Closed", "true")
		}
		h.Set("X-Proto", resp.Proto)
		out = append(out, answer{resp.StatusCode, h, string(body)})
	}
	return out
}

func get(path string, extra ...string) string {
	return "GET " + path + " HTTP/1.1\r\nHost: " + siteHost + "\r\n" + strings.Join(extra, "") + "\r\n"
}

// TestSameAnswers: for each request, the fast path answers exactly what
// net/http and the edge's handler answer, and serves it itself when
// expected.
func TestSameAnswers(t *testing.T) {
	e := newEdge(t)
	ref := serve(t, e, false, Config{})
	fast := serve(t, e, true, Config{})
	etag := func() string {
		a := exchange(t, ref.addr, get("/"), 1, false)[0]
		return a.header.Get("Etag")
	}()
	cssTag := exchange(t, ref.addr, get("/style.css"), 1, false)[0].header.Get("Etag")
	cases := append(servedOnTheFastPath(etag, cssTag), handedToNetHTTP(etag)...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := exchange(t, ref.addr, c.raw, 1, c.head)[0]
			before := fast.handoffs()
			got := exchange(t, fast.addr, c.raw, 1, c.head)[0]
			if wantStatus := map[string]int{"inm br": 304, "inm br, gzip sent": 200}[c.name]; wantStatus != 0 && want.status != wantStatus {
				t.Errorf("status %d, want %d", want.status, wantStatus)
			}
			if wantEnc, ok := map[string]string{"br": "br", "br q0": "gzip", "gzip over br by q": "gzip", "star": "br", "head br": "br"}[c.name]; ok && want.header.Get("Content-Encoding") != wantEnc {
				t.Errorf("Content-Encoding %q, want %q", want.header.Get("Content-Encoding"), wantEnc)
			}
			if got.String() != want.String() {
				t.Errorf("fast path answered\n%s\nnet/http answered\n%s", got, want)
			}
			if handed := fast.handoffs() > before; handed != c.handoff {
				t.Errorf("handed to net/http: %v, want %v", handed, c.handoff)
			}
		})
	}
}

// sameAnswerCase is a raw request, whether it is a HEAD, and whether the
// fast path should hand it to net/http rather than answer it.
type sameAnswerCase struct {
	name, raw string
	head      bool
	handoff   bool
}

// servedOnTheFastPath answers the requests the fast path answers itself;
// etag is the index's ETag and cssTag the stylesheet's.
func servedOnTheFastPath(etag, cssTag string) []sameAnswerCase {
	return []sameAnswerCase{
		{"index", get("/"), false, false},
		{"1k", get("/1k.txt"), false, false},
		{"big", get("/big.bin"), false, false},
		{"query", get("/1k.txt?x=1&y=%20"), false, false},
		{"folder index", get("/docs/"), false, false},
		{"folder no slash", get("/docs"), false, false},
		{"pretty", get("/about"), false, false},
		{"dir page", get("/dir/page"), false, false},
		{"404 page", get("/missing"), false, false},
		{"404 gzip", get("/missing", "Accept-Encoding: gzip\r\n"), false, false},
		{"dotdot", get("/docs/../about.html"), false, false},
		{"escaped", get("/%61bout"), false, false},
		{"escaped space", get("/odd%20name%21.txt"), false, false},
		{"gzip", get("/style.css", "Accept-Encoding: gzip, deflate, br\r\n"), false, false},
		{"gzip q0", get("/style.css", "Accept-Encoding: gzip;q=0\r\n"), false, false},
		{"gzip uppercase", get("/style.css", "accept-encoding: GZIP\r\n"), false, false},
		{"json gzip", get("/data/config.json", "Accept-Encoding: gzip\r\n"), false, false},
		{"br", get("/style.css", "Accept-Encoding: br\r\n"), false, false},
		{"br q0", get("/style.css", "Accept-Encoding: br;q=0, gzip\r\n"), false, false},
		{"gzip over br by q", get("/style.css", "Accept-Encoding: br;q=0.5, gzip\r\n"), false, false},
		{"star", get("/style.css", "Accept-Encoding: *\r\n"), false, false},
		{"404 br", get("/missing", "Accept-Encoding: br\r\n"), false, false},
		{"inm br", get("/style.css", "Accept-Encoding: br\r\nIf-None-Match: "+strings.TrimSuffix(cssTag, `"`)+"-br\"\r\n"), false, false},
		{"inm br, gzip sent", get("/style.css", "Accept-Encoding: gzip\r\nIf-None-Match: "+strings.TrimSuffix(cssTag, `"`)+"-br\"\r\n"), false, false},
		{"head br", "HEAD /style.css HTTP/1.1\r\nHost: " + siteHost + "\r\nAccept-Encoding: br\r\n\r\n", true, false},
		{"svg", get("/assets/logo.svg"), false, false},
		{"inm", get("/", "If-None-Match: "+etag+"\r\n"), false, false},
		{"inm weak", get("/", "If-None-Match: W/"+etag+"\r\n"), false, false},
		{"inm star", get("/style.css", "If-None-Match: *\r\n"), false, false},
		{"inm list", get("/", "If-None-Match: \"x\", "+etag+"\r\n"), false, false},
		{"inm other", get("/", "If-None-Match: \"x\"\r\n"), false, false},
		{"inm 404", get("/missing", "If-None-Match: *\r\n"), false, false},
		{"head", "HEAD / HTTP/1.1\r\nHost: " + siteHost + "\r\n\r\n", true, false},
		{"head gzip", "HEAD /style.css HTTP/1.1\r\nHost: " + siteHost + "\r\nAccept-Encoding: gzip\r\n\r\n", true, false},
		{"head 304", "HEAD / HTTP/1.1\r\nHost: " + siteHost + "\r\nIf-None-Match: " + etag + "\r\n\r\n", true, false},
		{"host port", "GET / HTTP/1.1\r\nHost: " + siteHost + ":8080\r\n\r\n", false, false},
		{"host case", "GET / HTTP/1.1\r\nHost: SITE--prj.LOCALHOST\r\n\r\n", false, false},
		{"host dot", "GET / HTTP/1.1\r\nHost: " + siteHost + ".\r\n\r\n", false, false},
		{"close", get("/", "Connection: close\r\n"), false, false},
		{"keep-alive", get("/", "Connection: keep-alive\r\n"), false, false},
		{"http10", "GET / HTTP/1.0\r\nHost: " + siteHost + "\r\n\r\n", false, false},
		{"other headers", get("/", "User-Agent: x\r\nAccept: */*\r\nCookie: a=b\r\n"), false, false},
	}
}

// handedToNetHTTP answers the requests the fast path hands to net/http.
func handedToNetHTTP(etag string) []sameAnswerCase {
	return []sameAnswerCase{
		{"bad escape", get("/%zz"), false, true},
		{"http10 keep-alive", "GET / HTTP/1.0\r\nHost: " + siteHost + "\r\nConnection: keep-alive\r\n\r\n", false, true},
		{"http10 no host", "GET / HTTP/1.0\r\n\r\n", false, true},
		{"post", "POST / HTTP/1.1\r\nHost: " + siteHost + "\r\nContent-Length: 3\r\n\r\nabc", false, true},
		{"get with body", "GET / HTTP/1.1\r\nHost: " + siteHost + "\r\nContent-Length: 3\r\n\r\nabc", false, true},
		{"options", "OPTIONS / HTTP/1.1\r\nHost: " + siteHost + "\r\n\r\n", false, true},
		{"no site", "GET / HTTP/1.1\r\nHost: nobody.localhost\r\n\r\n", false, true},
		{"api", "GET /v1/x HTTP/1.1\r\nHost: localhost\r\n\r\n", false, true},
		{"api ip", "GET /v1/x HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n", false, true},
		{"absolute form", "GET http://" + siteHost + "/ HTTP/1.1\r\nHost: " + siteHost + "\r\n\r\n", false, true},
		{"upgrade", get("/", "Connection: Upgrade\r\nUpgrade: websocket\r\n"), false, true},
		{"expect", get("/", "Expect: 100-continue\r\n"), false, true},
		{"missing host", "GET / HTTP/1.1\r\n\r\n", false, true},
		{"duplicate host", get("/", "Host: "+siteHost+"\r\n"), false, true},
		{"duplicate host other", get("/", "Host: localhost\r\n"), false, true},
		{"obs-fold", get("/", "X-A: a\r\n b\r\n"), false, true},
		{"space before colon", get("/", "X-A : a\r\n"), false, true},
		{"bad header byte", get("/", "X-A: a\x01b\r\n"), false, true},
		{"bad name byte", get("/", "X\x7fA: a\r\n"), false, true},
		{"bare LF", "GET / HTTP/1.1\nHost: " + siteHost + "\n\n", false, true},
		{"bare LF in header", "GET / HTTP/1.1\r\nHost: " + siteHost + "\nX: y\r\n\r\n", false, true},
		{"bare CR", "GET / HTTP/1.1\r\nHost: " + siteHost + "\rX: y\r\n\r\n", false, true},
		{"HTTP/1.2", "GET / HTTP/1.2\r\nHost: " + siteHost + "\r\n\r\n", false, true},
		{"lowercase method", "get / HTTP/1.1\r\nHost: " + siteHost + "\r\n\r\n", false, true},
		{"two spaces", "GET  / HTTP/1.1\r\nHost: " + siteHost + "\r\n\r\n", false, true},
		{"host underscore", "GET / HTTP/1.1\r\nHost: a_b.localhost\r\n\r\n", false, true},
		{"host bad", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", false, true},
		{"long header", get("/", "X-Long: "+strings.Repeat("a", 10000)+"\r\n"), false, true},
		{"many headers", get("/", strings.Repeat("X-A: a\r\n", 101)), false, true},
		{"duplicate inm", get("/", "If-None-Match: \"x\"\r\nIf-None-Match: "+etag+"\r\n"), false, true},
		{"chunked", "GET / HTTP/1.1\r\nHost: " + siteHost + "\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false, true},
		{"h2c preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", false, true},
	}
}

// Malformed requests reach net/http, which answers 400.
func TestMalformedGets400(t *testing.T) {
	e := newEdge(t)
	fast := serve(t, e, true, Config{})
	for _, raw := range []string{
		"GET / HTTP/1.1\r\n\r\n",
		get("/", "Host: "+siteHost+"\r\n"),
		get("/", "X-A: a\x01b\r\n"),
		"GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
	} {
		if a := exchange(t, fast.addr, raw, 1, false)[0]; a.status != 400 {
			t.Errorf("%q: %d", raw, a.status)
		}
	}
}

// One keep-alive connection: edge requests on the fast path, then an API
// request and a request with a body, which net/http serves.
func TestHandoffMidConnection(t *testing.T) {
	e := newEdge(t)
	fast := serve(t, e, true, Config{})
	c, err := net.Dial("tcp", fast.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	step := func(raw string, status int, body string) {
		t.Helper()
		io.WriteString(c, raw)
		a := readAnswers(t, br, 1, false)[0]
		if a.status != status || !strings.HasPrefix(a.body, body) {
			t.Fatalf("%q: %d %q", raw, a.status, a.body)
		}
	}
	step(get("/"), 200, "<!doctype")
	step(get("/about"), 200, "<p>about")
	if fast.handoffs() != 0 {
		t.Fatal("handed off early")
	}
	step("GET /v1/x HTTP/1.1\r\nHost: localhost\r\n\r\n", 200, "api GET /v1/x 0")
	if fast.handoffs() != 1 {
		t.Fatal("API request not handed off")
	}
	step("POST /v1/y HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello", 200, "api POST /v1/y 5")
	step(get("/"), 200, "<!doctype") // net/http's edge now

	// A body after an edge request, both sent at once.
	c2, err := net.Dial("tcp", fast.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c2, get("/1k.txt")+"PUT /v1/z HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4\r\n\r\nabcd"+get("/about"))
	as := readAnswers(t, bufio.NewReader(c2), 3, false)
	if as[0].status != 200 || len(as[0].body) != 1024 || as[1].body != "api PUT /v1/z 4" || as[2].body != "<p>about</p>" {
		t.Fatalf("answers %v", as)
	}
}

func TestPipelining(t *testing.T) {
	e := newEdge(t)
	fast := serve(t, e, true, Config{})
	ref := serve(t, e, false, Config{})
	raw := strings.Repeat(get("/1k.txt")+get("/missing")+get("/style.css", "Accept-Encoding: gzip\r\n"), 50) + get("/big.bin")
	want := exchange(t, ref.addr, raw, 151, false)
	got := exchange(t, fast.addr, raw, 151, false)
	for i := range want {
		if got[i].String() != want[i].String() {
			t.Fatalf("answer %d:\n%s\nwant\n%s", i, got[i], want[i])
		}
	}
	if fast.handoffs() != 0 {
		t.Fatal("handed off")
	}
}

func TestConnectionClose(t *testing.T) {
	e := newEdge(t)
	fast := serve(t, e, true, Config{})
	for _, raw := range []string{get("/", "Connection: close\r\n"), "GET / HTTP/1.0\r\nHost: " + siteHost + "\r\n\r\n"} {
		c, err := net.Dial("tcp", fast.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, raw+get("/about"))
		b, err := io.ReadAll(c) // ends when the server closes
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b, []byte("HTTP/1.")); n != 1 || !bytes.Contains(b, []byte("Hello")) {
			t.Fatalf("%q: %q", raw, b)
		}
	}
}

func TestTimeouts(t *testing.T) {
	e := newEdge(t)
	fast := serve(t, e, true, Config{IdleTimeout: 300 * time.Millisecond, HeaderTimeout: 300 * time.Millisecond})
	closes := func(name, raw string, answers int) {
		t.Helper()
		c, err := net.Dial("tcp", fast.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		io.WriteString(c, raw)
		br := bufio.NewReader(c)
		readAnswers(t, br, answers, false)
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("%s: %v, want EOF", name, err)
		}
		if d := time.Since(start); d < 250*time.Millisecond || d > 3*time.Second {
			t.Fatalf("%s: closed after %v", name, d)
		}
	}
	closes("idle", get("/"), 1)
	closes("idle before a request", "", 0)
	closes("slow head", "GET / HTTP/1.1\r\nHost: "+siteHost+"\r\nX-Slow: ", 0)
	closes("slow head after an answer", get("/")+"GET / HTTP/1.1\r\nHo", 1)
}

// A new connection that sends nothing, or trickles its head a byte at a
// time, is closed within the header timeout, however long the idle
// timeout for kept-alive connections is.
func TestSilentAndTricklingConnectionsGetTheHeaderTimeout(t *testing.T) {
	e := newEdge(t)
	fast := serve(t, e, true, Config{IdleTimeout: time.Minute, HeaderTimeout: 400 * time.Millisecond})
	for _, trickle := range []bool{false, true} {
		c, err := net.Dial("tcp", fast.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		start := time.Now()
		closed := make(chan time.Duration, 1)
		go func() {
			buf := make([]byte, 1)
			for {
				if _, err := c.Read(buf); err != nil {
					closed <- time.Since(start)
					return
				}
			}
		}()
		if trickle {
			head := "GET / HTTP/1.1\r\nHost: " + siteHost + "\r\nX-Slow: " + strings.Repeat("a", 200)
		loop:
			for i := 0; i < len(head); i++ {
				select {
				case <-closed:
					closed <- time.Since(start)
					break loop
				case <-time.After(50 * time.Millisecond):
				}
				if _, err := c.Write([]byte{head[i]}); err != nil {
					break
				}
			}
		}
		d := <-closed
		c.Close()
		if d > 2*time.Second {
			t.Errorf("trickle=%v: closed after %v, want about the 400ms header timeout", trickle, d)
		}
	}
}

// The header timeout counts from the connection's start for its first
// request, on the fast path and after a hand-off to net/http alike: a
// client that stays silent and then trickles, or trickles a GET and then
// turns it into a head the fast path gives to net/http, gets no more than
// the one timeout in all.
func TestHeaderTimeoutHoldsAcrossSilenceAndHandoff(t *testing.T) {
	const timeout = time.Second
	e := newEdge(t)
	fast := serve(t, e, true, Config{IdleTimeout: time.Minute, HeaderTimeout: timeout})
	get := "GET / HTTP/1.1\r\nHost: " + siteHost + "\r\nX-Slow: "
	for _, tc := range []struct {
		name    string
		silent  time.Duration // before the first byte
		trickle string        // a byte every 40 ms, until 800 ms
		burst   string        // then at once
	}{
		{name: "silent, then a trickled GET", silent: 800 * time.Millisecond, trickle: get + strings.Repeat("a", 100)},
		{name: "silent, then a trickled POST", silent: 800 * time.Millisecond, trickle: "POST / HTTP/1.1\r\nHost: " + siteHost + "\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
		{name: "a trickled GET, then an oversized head", trickle: get, burst: strings.Repeat("a", maxHead)},
	} {
		c, err := net.Dial("tcp", fast.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		start := time.Now()
		closed := make(chan time.Duration, 1)
		go func() {
			io.Copy(io.Discard, c)
			closed <- time.Since(start)
		}()
		time.Sleep(tc.silent)
		for i := 0; time.Since(start) < 800*time.Millisecond; i++ {
			if i < len(tc.trickle) {
				c.Write([]byte{tc.trickle[i]})
			}
			time.Sleep(40 * time.Millisecond)
		}
		if tc.burst != "" {
			c.Write([]byte(tc.burst))
		}
		// Keep trickling: only the deadline may end the connection.
		var d time.Duration
	wait:
		for {
			select {
			case d = <-closed:
				break wait
			case <-time.After(40 * time.Millisecond):
				c.Write([]byte("a"))
			}
		}
		c.Close()
		if d > timeout+400*time.Millisecond {
			t.Errorf("%s: closed after %v, want about the %v header timeout", tc.name, d, timeout)
		}
	}
}

func TestCloseListener(t *testing.T) {
	e := newEdge(t)
	inner, _ := net.Listen("tcp", "127.0.0.1:0")
	l := New(inner, Config{Edge: e, API: isAPI, Log: slog.New(slog.DiscardHandler)})
	c, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, get("/"))
	br := bufio.NewReader(c)
	readAnswers(t, br, 1, false)
	l.Close()
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection after Close: %v", err)
	}
	if _, err := l.Accept(); err == nil {
		t.Fatal("Accept after Close")
	}
}

// FuzzConn feeds arbitrary bytes, in one write or two, to a server with
// the fast path: it must not panic and must end every exchange within its
// timeouts.
func FuzzConn(f *testing.F) {
	for _, s := range []string{get("/"), get("/style.css", "Accept-Encoding: gzip\r\n") + get("/x"), "GET / HTTP/1.1\nHost: a\n\n",
		"HEAD /%2e%2e/ HTTP/1.0\r\nHost: " + siteHost + "\r\nConnection: close\r\n\r\n", "POST / HTTP/1.1\r\nHost: " + siteHost + "\r\nContent-Length: 1\r\n\r\nx",
		get("/", "X: \r\n \r\n"), "GET / HTTP/1.1\r\nHost: " + siteHost + "\r\r\n\r\n",
		"GET /kept HTTP/1.1\r\nHost: localhost\r\n\r\n" + apiPost("/kept", "abc") + apiPost("/kept", "", "Connection: close\r\n")} {
		f.Add([]byte(s), uint8(0))
	}
	e := newEdge(f)
	// APIRead answers /kept on the API's host (api_test.go).
	fast := serve(f, e, true, Config{IdleTimeout: 200 * time.Millisecond, HeaderTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond,
		APIRead: keptRead})
	f.Fuzz(func(t *testing.T, b []byte, split uint8) {
		c, err := net.Dial("tcp", fast.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		k := min(int(split), len(b))
		c.Write(b[:k])
		c.Write(b[k:])
		// net/http's own timeouts (ReadHeaderTimeout 10 s) bound handed-off
		// connections; the fast path's close within 200 ms of idleness.
		// A reset ends it too: the server closed with bytes still unread.
		if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("connection not ended by the server: %v", err)
		}
	})
}

func BenchmarkFastPath(b *testing.B) {
	e := newEdge(b)
	fast := serve(b, e, true, Config{})
	c, err := net.Dial("tcp", fast.addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := []byte(get("/1k.txt"))
	buf := make([]byte, 64<<10)
	want := len(exchange(b, fast.addr, get("/1k.txt"), 1, false)[0].body)
	b.ReportAllocs()
	for b.Loop() {
		c.Write(req)
		n := 0
		for n < want {
			m, err := c.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			n += m
		}
	}
}

// Over TLS: h2 connections go to net/http, HTTP/1.1 ones take the fast
// path, and handed-off requests still see Request.TLS.
func TestTLS(t *testing.T) {
	e := newEdge(t)
	ts := httptest.NewTLSServer(nil)
	defer ts.Close()
	tc := &tls.Config{Certificates: ts.TLS.Certificates, NextProtos: []string{"h2", "http/1.1"}}
	inner, _ := net.Listen("tcp", "127.0.0.1:0")
	ln := New(inner, Config{Edge: e, API: isAPI, TLS: tc, Log: slog.New(slog.DiscardHandler)})
	api := handler(e)
	srv := &http.Server{TLSConfig: tc, ConnContext: ConnContext, Handler: WithTLS(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			w.Header().Set("X-No-TLS", "1")
		}
		api.ServeHTTP(w, r)
	}))}
	go srv.Serve(ln)
	defer srv.Close()
	base := ts.Client().Transport.(*http.Transport).TLSClientConfig
	for _, h2 := range []bool{false, true} {
		tr := &http.Transport{TLSClientConfig: base.Clone(), ForceAttemptHTTP2: h2}
		c := &http.Client{Transport: tr}
		for _, host := range []string{siteHost, "localhost", siteHost} {
			req, _ := http.NewRequest("GET", "https://"+inner.Addr().String()+"/about", nil)
			req.Host = host
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := "<p>about</p>"
			if host == "localhost" {
				want = "api GET /about 0"
			}
			if string(b) != want || resp.Header.Get("X-No-TLS") != "" || (resp.ProtoMajor == 2) != h2 {
				t.Fatalf("h2 %v host %s: %s %q %v", h2, host, resp.Proto, b, resp.Header)
			}
		}
		tr.CloseIdleConnections()
	}
	if n := ln.handoffs.Load(); n != 2 { // the h1 connection at its API request, the h2 one
		t.Fatalf("handoffs %d", n)
	}
}
