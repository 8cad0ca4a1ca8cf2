package fastpath

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/clientaddr"
)

// API reads: a request for the API's host that is simple enough (see
// parseAPI) is offered to Config.APIRead, which answers it when the API
// would answer it from an answer it keeps (a pure or versioned read, a
// rate limit that allows it) or with the rate limit's refusal (429);
// everything else goes to net/http, as
// before. api_test.go in the server compares both.

// maxAPIBody bounds a request body read here; with its head it must fit
// the read buffer, so that a request not answered here is handed to
// net/http unread.
const maxAPIBody = 4 << 10

// APIRequest is what Config.APIRead is offered.
type APIRequest struct {
	// Method is GET or POST.
	Method string
	// Path and Query are the request target split at its first '?'. The
	// path is of unreserved characters and '/' only: it needs no decoding.
	Path, Query []byte
	// Accept and ContentType are the headers' values, nil when absent;
	// each was sent at most once.
	Accept, ContentType []byte
	// Authorization is set when the request carries the header, and
	// AuthorizationValue is its value (sent at most once).
	Authorization      bool
	AuthorizationValue []byte
	// MCPProtocolVersion is the MCP-Protocol-Version header's value, nil
	// when absent (sent at most once); Origin is set when the request
	// carries an Origin header.
	MCPProtocolVersion []byte
	Origin             bool
	// IdempotencyKey is the Idempotency-Key header's value, nil when
	// absent (sent at most once).
	IdempotencyKey []byte
	// Body is the whole body, of the length Content-Length announced.
	Body []byte
	// ClientIP is the peer's address without its port, RemoteAddr with
	// it (net/http's Request.RemoteAddr), Host the Host header's value.
	ClientIP, RemoteAddr, Host string
	// TLS is set for a request over TLS.
	TLS bool
	// Scratch is the connection's buffer for a body made for this answer
	// (appended to from Scratch[:0]): an answerer that makes its body
	// there sets Scratch to the buffer it made it in, which the
	// connection keeps for its next answer. The body is copied or written
	// before APIRead is called again on the connection.
	Scratch []byte
}

// apiReq is what parseAPI reads of a request.
type apiReq struct {
	method                                             string
	target, host, accept, ctype, ua, authz, mcpv, idem []byte
	clen                                               int
	close, auth                                        bool
	xff                                                []string
	hosts, accepts, ctypes, uas, clens                 int
	authzs, mcpvs, origins, idems                      int
}

// parseAPI reads a head strictly for APIRead: an HTTP/1.1 GET or POST of
// an origin-form target whose path needs no decoding and whose query
// holds visible characters other than ';' and '#', one Host, at most one
// Accept, Content-Type, User-Agent and Content-Length (up to maxAPIBody),
// at most one Authorization, MCP-Protocol-Version and Idempotency-Key, no
// Transfer-Encoding, Upgrade, Expect, Trailer or conditional or range
// headers, and a Connection header of close and keep-alive only. ok is
// false when the request is for net/http.
func parseAPI(b []byte, r *apiReq) bool {
	*r = apiReq{}
	line, rest := cutLine(b)
	switch {
	case hasPrefix(line, "GET "):
		r.method, line = "GET", line[4:]
	case hasPrefix(line, "POST "):
		r.method, line = "POST", line[5:]
	default:
		return false
	}
	t, ok := strings.CutSuffix(string(line), " HTTP/1.1")
	if !ok || !apiTarget(t) {
		return false
	}
	r.target = line[:len(t)]
	if !headerFields(rest, func(name, v []byte) bool {
		switch {
		case equalFold(name, "host"):
			r.host, r.hosts = v, r.hosts+1
		case equalFold(name, "accept"):
			r.accept, r.accepts = v, r.accepts+1
		case equalFold(name, "content-type"):
			r.ctype, r.ctypes = v, r.ctypes+1
		case equalFold(name, "user-agent"):
			r.ua, r.uas = v, r.uas+1
		case equalFold(name, "authorization"):
			r.auth, r.authz, r.authzs = true, v, r.authzs+1
		case equalFold(name, "x-forwarded-for"):
			r.xff = append(r.xff, string(v))
		case equalFold(name, "mcp-protocol-version"):
			r.mcpv, r.mcpvs = v, r.mcpvs+1
		case equalFold(name, "idempotency-key"):
			r.idem, r.idems = v, r.idems+1
		case equalFold(name, "origin"):
			r.origins++
		case equalFold(name, "content-length"):
			n, ok := contentLength(v, maxAPIBody)
			if r.clens++; r.clens > 1 || !ok {
				return false
			}
			r.clen = int(n)
		case equalFold(name, "connection"):
			closing, ok := connection(v, true)
			if !ok {
				return false
			}
			r.close = r.close || closing
		case equalFold(name, "transfer-encoding"), equalFold(name, "upgrade"), equalFold(name, "expect"),
			equalFold(name, "http2-settings"), equalFold(name, "trailer"), equalFold(name, "te"),
			equalFold(name, "if-none-match"), equalFold(name, "if-match"), equalFold(name, "if-modified-since"),
			equalFold(name, "if-unmodified-since"), equalFold(name, "if-range"), equalFold(name, "range"):
			return false
		}
		return true
	}) {
		return false
	}
	if r.hosts != 1 || r.accepts > 1 || r.ctypes > 1 || r.uas > 1 || r.authzs > 1 || r.mcpvs > 1 || r.idems > 1 || !plainHost(r.host) {
		return false
	}
	return true
}

// apiTarget reports whether t is an origin-form target that net/http
// reads as it is: a path of unreserved characters and '/', not starting
// with "//", and a query of visible characters other than ';' (which
// net/http warns of) and '#'.
func apiTarget(t string) bool {
	if len(t) == 0 || t[0] != '/' || strings.HasPrefix(t, "//") {
		return false
	}
	path, query, _ := strings.Cut(t, "?")
	for i := 0; i < len(path); i++ {
		c := path[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '/' || c == '.' || c == '-' || c == '_' || c == '~') {
			return false
		}
	}
	for i := 0; i < len(query); i++ {
		if c := query[i]; c <= ' ' || c >= 0x7f || c == ';' || c == '#' {
			return false
		}
	}
	return true
}

// apiRead answers the request whose head is the first n buffered bytes
// when it is for the API and Config.APIRead answers it; handled is false,
// with nothing read, when it is for net/http or the forwarder. close is
// the request's wish to end the connection.
func (cs *conn) apiRead(n int) (handled, close bool, err error) {
	cfg := &cs.l.cfg
	if cfg.APIRead == nil {
		return false, false, nil
	}
	b, _ := cs.br.Peek(n)
	r := &cs.apiReq
	if !parseAPI(b, r) {
		return false, false, nil
	}
	if string(r.host) != cs.host {
		cs.host = string(r.host)
		cs.api = cfg.API(cs.host)
	}
	if !cs.api {
		return false, false, nil
	}
	if n+r.clen > maxHead {
		return false, false, nil
	}
	if r.clen > 0 && cs.br.Buffered() < n+r.clen {
		// Reading the body may move the buffered bytes: the head is
		// read again.
		cs.readBy = time.Time{} // the idle deadline is set anew
		if cs.late, err = awaitBody(cs.c, cs.br, n+r.clen, cfg.ReadTimeout); err != nil || !cs.late.IsZero() {
			return false, false, err
		}
		b, _ = cs.br.Peek(n)
		parseAPI(b, r)
	}
	all, _ := cs.br.Peek(n + r.clen)
	path, query, _ := cut(r.target, '?')
	if string(path) != cs.path {
		cs.path = string(path)
	}
	if cfg.Reserved != nil && cfg.Reserved(cs.path) {
		return false, false, nil
	}
	lg := cfg.Log
	debug := lg.Enabled(context.Background(), slog.LevelDebug)
	var start time.Time
	if debug {
		start = time.Now()
	}
	remote, ip := cs.peer()
	q := APIRequest{Method: r.method, Path: path, Query: query, Accept: nilIfAbsent(r.accept, r.accepts),
		ContentType: nilIfAbsent(r.ctype, r.ctypes), Authorization: r.auth, AuthorizationValue: nilIfAbsent(r.authz, r.authzs),
		MCPProtocolVersion: nilIfAbsent(r.mcpv, r.mcpvs), Origin: r.origins > 0, IdempotencyKey: nilIfAbsent(r.idem, r.idems),
		Body: all[n:], ClientIP: clientFor(cs.l.cfg.Trusted, cs.tcp, ip, r.xff), RemoteAddr: remote, Host: cs.host, TLS: cs.tls,
		Scratch: cs.scratch[:0]}
	at := len(cs.out)
	out, body, ok := cfg.APIRead(cs.out, &q)
	if cap(q.Scratch) <= maxScratch {
		cs.scratch = q.Scratch
	}
	if !ok {
		return false, false, nil
	}
	cs.out = append(out, date()...)
	if r.close {
		cs.out = append(cs.out, "Connection: close\r\n"...)
	}
	cs.out = append(cs.out, "\r\n"...)
	if debug {
		status, _ := strconv.Atoi(string(out[at+9 : at+12])) // "HTTP/1.1 200"
		lg.Log(context.Background(), slog.LevelDebug, "request", "method", r.method, "path", cs.path, "status", status,
			"dur", time.Since(start), "ua", strings.SplitN(string(r.ua), " ", 2)[0])
	}
	close = r.close
	cs.br.Discard(n + r.clen) // r's fields are not read past here
	if len(body) >= bigBody {
		return true, close, cs.write(body)
	}
	cs.out = append(cs.out, body...)
	if len(cs.out) >= 64<<10 {
		return true, close, cs.flush()
	}
	return true, close, nil
}

// awaitBody waits until br holds n bytes, a request's head and its
// body, read from c within timeout. late is the deadline that passed
// when they did not come in time (zero when they did): then net/http
// answers the request as it would have (the chain's refusal), under that
// deadline (conn.late).
func awaitBody(c net.Conn, br *bufio.Reader, n int, timeout time.Duration) (late time.Time, err error) {
	by := time.Now().Add(timeout)
	if err := c.SetReadDeadline(by); err != nil {
		return time.Time{}, err
	}
	if _, err := br.Peek(n); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return by, nil
		}
		return time.Time{}, err
	}
	return time.Time{}, nil
}

// maxScratch bounds the buffer a connection keeps for bodies made for
// its answers (APIRequest.Scratch).
const maxScratch = 64 << 10

func nilIfAbsent(v []byte, count int) []byte {
	if count == 0 {
		return nil
	}
	return v
}

func cut(b []byte, sep byte) (before, after []byte, found bool) {
	for i, c := range b {
		if c == sep {
			return b[:i], b[i+1:], true
		}
	}
	return b, nil, false
}

// peer is the peer's address as net/http's RemoteAddr has it, and
// without its port as the API reads it from there.
func (cs *conn) peer() (remote, ip string) {
	if cs.remote == "" {
		cs.remote = cs.tcp.RemoteAddr().String()
		cs.ip = cs.remote
		if h, _, err := net.SplitHostPort(cs.remote); err == nil {
			cs.ip = h
		}
	}
	return cs.remote, cs.ip
}

// clientFor is the client of a request from peerIP on c that carried the
// X-Forwarded-For values xff, as clientaddr resolves it: the peer unless
// the peer is a trusted proxy.
func clientFor(t *clientaddr.Trusted, c net.Conn, peerIP string, xff []string) string {
	if len(xff) == 0 || t == nil {
		return peerIP
	}
	a, _ := t.Resolve(clientaddr.PeerOfConn(c), xff)
	return a.String()
}
