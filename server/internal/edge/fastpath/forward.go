package fastpath

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pierhq/pier/server/internal/clientaddr"
)

// The forwarder: a request for a process service's host that is simple
// enough (see parseFwd) is sent over a kept-alive connection to the
// process and its answer copied back as it arrives, in the connection's
// own goroutine; everything else goes to net/http and the edge's
// ReverseProxy, as before. What reaches the process and the client is
// what the ReverseProxy path sends them (forward_test.go compares both).

// maxFwdBody bounds a request body the forwarder sends; larger ones go to
// net/http, which streams them. A body this small is read whole before
// the request is sent, so a request the process never answered can be
// sent again.
const maxFwdBody = 64 << 10

// scratchPool holds the buffers bodies of unknown length are read into.
var scratchPool = sync.Pool{New: func() any { return new([32 << 10]byte) }}

// fwd is a connection's forwarding state, kept across its requests.
type fwd struct {
	req      []byte // the request as sent upstream
	h        respHead
	r        fwdReq
	clientIP string
	ua       []byte
	trailers []byte
	scratch  []byte
	// interim is set once a 1xx answer was passed on: the request is not
	// sent again after that.
	interim bool
}

// fwdReq is what parseFwd reads of a request.
type fwdReq struct {
	method             string // one of fwdMethods, without the space
	target, host, ua   []byte
	clen               int64
	close, te, idemKey bool
	// xff are the request's X-Forwarded-For values, which the process
	// gets only from a trusted proxy, with the peer appended.
	xff []string
}

var fwdMethods = [...]string{"GET ", "HEAD ", "POST ", "PUT ", "PATCH ", "DELETE ", "OPTIONS "}

// parseFwd reads a head strictly for forwarding and appends to dst the
// request line and the header lines the process gets: an HTTP/1.1 request
// of a method in fwdMethods, an origin-form target net/http's
// ReverseProxy would send unchanged, one Host, at most one
// Content-Length up to maxFwdBody, no Transfer-Encoding, Upgrade, Expect
// or Trailer, and a Connection header of close and keep-alive only. The
// hop-by-hop and forwarding headers are left out, as ReverseProxy drops
// them; the caller adds the framing and X-Forwarded-*. ok is false when
// the request is for net/http.
func parseFwd(b []byte, r *fwdReq, dst []byte) (_ []byte, ok bool) {
	*r = fwdReq{clen: -1}
	line, rest := cutLine(b)
	if !r.requestLine(line) {
		return dst, false
	}
	dst = append(dst, line...)
	dst = append(dst, "\r\n"...)
	var seen fwdSeen
	if !headerFields(rest, func(name, v []byte) bool {
		dst, ok = r.field(&seen, name, v, dst)
		return ok
	}) {
		return dst, false
	}
	if seen.hosts != 1 || seen.uas > 1 || !plainHost(r.host) {
		return dst, false
	}
	return dst, true
}

// requestLine reads the method and an origin-form target of an HTTP/1.1
// request line.
func (r *fwdReq) requestLine(line []byte) bool {
	for _, m := range fwdMethods {
		if hasPrefix(line, m) {
			r.method = m[:len(m)-1]
			break
		}
	}
	if r.method == "" {
		return false
	}
	t, ok := strings.CutSuffix(string(line[len(r.method)+1:]), " HTTP/1.1")
	if !ok || !plainTarget(t) {
		return false
	}
	r.target = line[len(r.method)+1 : len(r.method)+1+len(t)]
	return true
}

// fwdSeen counts the headers a forwarded request has at most one of.
type fwdSeen struct{ hosts, uas int }

// field reads one header line, appending it to dst unless it is
// hop-by-hop or forwarding; ok is false for a header that sends the
// request to net/http.
func (r *fwdReq) field(seen *fwdSeen, name, v, dst []byte) (_ []byte, ok bool) {
	switch {
	case equalFold(name, "host"):
		seen.hosts++
		r.host = v
		dst = appendField(dst, name, v)
	case equalFold(name, "user-agent"):
		seen.uas++
		r.ua = v
		if len(v) > 0 {
			dst = appendField(dst, name, v)
		}
	case equalFold(name, "content-length"):
		if r.clen >= 0 {
			return dst, false
		}
		if r.clen, ok = contentLength(v, maxFwdBody); !ok {
			return dst, false
		}
	case equalFold(name, "connection"):
		closing, ok := connection(v, true)
		if !ok {
			return dst, false
		}
		r.close = r.close || closing
	case equalFold(name, "te"):
		for tok := range tokens(v) {
			if equalFold(tok, "trailers") {
				r.te = true
			}
		}
	case equalFold(name, "transfer-encoding"), equalFold(name, "upgrade"), equalFold(name, "expect"),
		equalFold(name, "http2-settings"), equalFold(name, "trailer"):
		return dst, false
	case equalFold(name, "keep-alive"), equalFold(name, "proxy-connection"), equalFold(name, "proxy-authenticate"),
		equalFold(name, "proxy-authorization"), equalFold(name, "forwarded"),
		equalFold(name, "x-forwarded-host"), equalFold(name, "x-forwarded-proto"):
	case equalFold(name, "x-forwarded-for"):
		r.xff = append(r.xff, string(v))
	case equalFold(name, "idempotency-key"), equalFold(name, "x-idempotency-key"):
		r.idemKey = true
		dst = appendField(dst, name, v)
	default:
		dst = appendField(dst, name, v)
	}
	return dst, true
}

func appendField(dst, k, v []byte) []byte {
	dst = append(dst, k...)
	dst = append(dst, ": "...)
	dst = append(dst, v...)
	return append(dst, "\r\n"...)
}

// plainTarget reports whether net/http's ReverseProxy sends a request
// target unchanged: a path of characters that need no escaping (or valid
// %XX escapes), and a query it does not rewrite (no ';', valid escapes).
func plainTarget(t string) bool {
	if len(t) == 0 || t[0] != '/' || strings.HasPrefix(t, "//") {
		return false
	}
	query := false
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '/' || c == '.' || c == '-' || c == '_' || c == '~':
		case c == '%':
			if i+2 >= len(t) || !isHex(t[i+1]) || !isHex(t[i+2]) {
				return false
			}
			i += 2
		case c == '?' && !query:
			query = true
		case c == ';' || c == '#' || c <= ' ' || c >= 0x7f:
			return false
		case query:
			// Any other visible character in a query passes unchanged.
		case strings.IndexByte("!$&'()*+,=:@", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// forward forwards the request whose head is the first n buffered bytes
// when its host is a live process service's and parseFwd takes it:
// handled is false (nothing read) when it is for net/http.
func (cs *conn) forward(n int) (handled bool, err error) {
	cfg := &cs.l.cfg
	if cs.fwd == nil {
		cs.fwd = &fwd{}
		if h, _, err := net.SplitHostPort(cs.tcp.RemoteAddr().String()); err == nil {
			cs.fwd.clientIP = h
		}
	}
	f := cs.fwd
	b, _ := cs.br.Peek(n)
	var ok bool
	if f.req, ok = parseFwd(b, &f.r, f.req[:0]); !ok {
		return false, nil
	}
	r := &f.r
	addr, ok := cs.upstream(r)
	if !ok {
		return false, nil
	}
	start := time.Now()
	xff := f.clientIP
	if len(r.xff) > 0 && cfg.Trusted != nil {
		xff = cfg.Trusted.Chain(clientaddr.PeerOfConn(cs.tcp), r.xff)
	}
	f.appendForwarding(cs.tls, xff)
	f.ua = append(f.ua[:0], r.ua...) // for the log; r.ua is in the read buffer
	cs.br.Discard(n)
	m := r.method
	if r.clen > 0 {
		if err := cs.readBody(int(r.clen)); err != nil {
			return true, err
		}
	}
	replayable := r.clen <= 0 && (m == "GET" || m == "HEAD" || m == "OPTIONS" || r.idemKey)
	status, err := cs.exchange(addr, m == "HEAD", replayable)
	// An idle connection keeps small buffers only, however large the
	// answer was.
	f.shrink()
	if cs.br.Buffered() == 0 && cap(cs.out) > 16<<10 {
		if cs.flush() == nil {
			cs.out = nil
		}
	}
	if lg := cfg.Log; status > 0 && (status >= 500 && status != http.StatusNotImplemented || lg.Enabled(context.Background(), slog.LevelDebug)) {
		level := slog.LevelDebug
		if status >= 500 && status != http.StatusNotImplemented {
			level = slog.LevelError
		}
		lg.Log(context.Background(), level, "request", "method", m, "path", cs.path, "status", status,
			"dur", time.Since(start), "ua", strings.SplitN(string(f.ua), " ", 2)[0])
	}
	return true, err
}

// upstream is the address of the live process service a parsed request
// is for; ok is false when the request is for net/http: an API host, a
// reserved path, or no such service.
func (cs *conn) upstream(r *fwdReq) (addr string, ok bool) {
	cfg := &cs.l.cfg
	if string(r.host) != cs.host {
		cs.host = string(r.host)
		cs.api = cfg.API(cs.host)
	}
	if cs.api {
		return "", false
	}
	p := r.target
	if i := slices.Index(p, '?'); i >= 0 {
		p = p[:i]
	}
	if string(p) != cs.path {
		cs.path = string(p)
	}
	if cfg.Reserved != nil {
		if u, err := url.PathUnescape(cs.path); err != nil || cfg.Reserved(u) {
			return "", false
		}
	}
	return cfg.Edge.Upstream(context.Background(), cs.host)
}

// appendForwarding ends the request to send upstream: its framing, as
// net/http's Transport sends a length for a body and an empty one for the
// methods servers expect one with, and the X-Forwarded-* headers.
func (f *fwd) appendForwarding(tls bool, xff string) {
	r := &f.r
	if m := r.method; r.clen > 0 || m == "POST" || m == "PUT" || m == "PATCH" {
		f.req = append(f.req, "Content-Length: "...)
		f.req = strconv.AppendInt(f.req, max(r.clen, 0), 10)
		f.req = append(f.req, "\r\n"...)
	}
	if xff != "" {
		f.req = append(f.req, "X-Forwarded-For: "...)
		f.req = append(f.req, xff...)
		f.req = append(f.req, "\r\n"...)
	}
	f.req = append(f.req, "X-Forwarded-Host: "...)
	f.req = append(f.req, r.host...)
	if tls {
		f.req = append(f.req, "\r\nX-Forwarded-Proto: https\r\n"...)
	} else {
		f.req = append(f.req, "\r\nX-Forwarded-Proto: http\r\n"...)
	}
	if r.te {
		f.req = append(f.req, "Te: trailers\r\n"...)
	}
	f.req = append(f.req, "\r\n"...)
}

// shrink gives back the buffers a large answer grew.
func (f *fwd) shrink() {
	if f.scratch != nil {
		scratchPool.Put((*[32 << 10]byte)(f.scratch))
		f.scratch = nil
	}
	if cap(f.req) > 16<<10 {
		f.req = nil
	}
}

// readBody appends the request's body of n bytes to the request, within
// the read timeout of its head.
func (cs *conn) readBody(n int) error {
	f := cs.fwd
	want := len(f.req) + n
	f.req = slices.Grow(f.req, n)
	if cs.br.Buffered() < n {
		cs.readBy = time.Time{} // the idle deadline is set anew
		if err := cs.c.SetReadDeadline(time.Now().Add(cs.l.cfg.ReadTimeout)); err != nil {
			return err
		}
	}
	for len(f.req) < want {
		k, err := cs.br.Read(f.req[len(f.req):want])
		f.req = f.req[:len(f.req)+k]
		if err != nil {
			return err
		}
	}
	return nil
}

// errAbort ends a connection whose answer was cut: the process failed
// within its body, or the client went away.
var errAbort = errors.New("fastpath: forwarded answer cut")

// exchange sends the request to addr and copies the answer to the client.
// A reused connection that fails before any byte of an answer came back
// (the process closed it as it was taken) is replaced, for a request that
// may be sent twice, as net/http's Transport does. status is the answer's
// (0 when none was sent); err ends the client's connection.
func (cs *conn) exchange(addr string, head, replayable bool) (status int, err error) {
	f := cs.fwd
	var uc *upConn
	var n int
	for attempt := 0; ; attempt++ {
		var reused bool
		var uerr error
		// A request that may be sent twice skips the peek at an idle
		// connection: it is sent again if the connection was closed.
		uc, reused, uerr = conns.get(addr, !replayable || attempt > 0)
		if uerr != nil {
			return cs.badGateway(addr, uerr)
		}
		uerr = uc.send(f.req)
		if uerr == nil {
			n, uerr = cs.readUpstreamHead(uc)
		}
		if uerr == nil {
			break
		}
		got := uc.br.Buffered() > 0 || f.interim
		uc.nc.Close()
		if errors.Is(uerr, errAbort) {
			return 0, uerr // the client went away
		}
		var ne net.Error
		timeout := errors.As(uerr, &ne) && ne.Timeout()
		if reused && replayable && !got && !timeout && attempt < 3 {
			continue
		}
		return cs.badGateway(addr, uerr)
	}
	h := &f.h
	status = h.status
	cs.writeHead(h, head)
	keep := true
	if n > 0 {
		uc.br.Discard(n)
	}
	uc.lim.left = math.MaxInt64
	noBody := head || h.status == 204 || h.status == 304 || h.status < 200
	var cerr error
	switch {
	case noBody:
	case h.chunked:
		cerr = cs.copyChunked(uc)
	case h.clen >= 0:
		cerr = cs.copyN(uc, h.clen)
	default:
		keep = false
		cerr = cs.copyToEOF(uc)
	}
	if cerr != nil {
		uc.nc.Close()
		if !errors.Is(cerr, errAbort) {
			cs.l.cfg.Log.Warn("edge: proxying", "host", cs.host, "upstream", addr, "err", cerr)
		}
		cs.flush()
		return status, errAbort
	}
	if keep && !h.close && uc.br.Buffered() == 0 {
		conns.put(addr, uc)
	} else {
		uc.nc.Close()
	}
	return status, nil
}

func (uc *upConn) send(req []byte) error {
	now := time.Now()
	if uc.writeBy.Sub(now) < responseHeaderTimeout-time.Second {
		uc.writeBy = now.Add(responseHeaderTimeout)
		if err := uc.nc.SetWriteDeadline(uc.writeBy); err != nil {
			return err
		}
	}
	_, err := uc.nc.Write(req)
	return err
}

// wait moves the upstream's read deadline before a read that may block.
func (uc *upConn) wait() error {
	now := time.Now()
	if uc.readBy.Sub(now) < responseHeaderTimeout-time.Second {
		uc.readBy = now.Add(responseHeaderTimeout)
		return uc.nc.SetReadDeadline(uc.readBy)
	}
	return nil
}

// readUpstreamHead reads the final response head into cs.fwd.h, passing
// informational (1xx) answers on to the client as ReverseProxy does; n is
// the head's length in uc.br (0 when the fallback reader consumed it).
func (cs *conn) readUpstreamHead(uc *upConn) (n int, err error) {
	h := &cs.fwd.h
	cs.fwd.interim = false
	for interim := 0; ; interim++ {
		uc.lim.left = maxResponseHead
		n = 0
		for n == 0 {
			b, _ := uc.br.Peek(uc.br.Buffered())
			if n = headEnd(b); n > 0 {
				if !parseResponseHead(b[:n], h) {
					n = 0
					if !readResponseHead(uc.br, h) {
						return 0, upErr("malformed upstream response head")
					}
				}
				break
			}
			if len(b) == uc.br.Size() {
				if !readResponseHead(uc.br, h) {
					return 0, upErr("malformed upstream response head")
				}
				break
			}
			if err := cs.flush(); err != nil {
				return 0, errAbort
			}
			if err := uc.wait(); err != nil {
				return 0, err
			}
			if _, err := uc.br.Peek(len(b) + 1); err != nil {
				return 0, err
			}
		}
		if h.status >= 200 {
			return n, nil
		}
		if h.status == http.StatusSwitchingProtocols || interim == 5 {
			return 0, upErr("unexpected informational response from upstream")
		}
		cs.fwd.interim = true
		cs.out = appendStatus(cs.out, h.status)
		for _, f := range h.fields {
			if !equalFold(f.k, "content-length") && !equalFold(f.k, "transfer-encoding") {
				cs.out = appendField(cs.out, f.k, f.v)
			}
		}
		cs.out = append(cs.out, "\r\n"...)
		if n > 0 {
			uc.br.Discard(n)
		}
	}
}

func appendStatus(b []byte, code int) []byte {
	b = append(b, "HTTP/1.1 "...)
	if text := http.StatusText(code); text != "" {
		b = strconv.AppendInt(b, int64(code), 10)
		b = append(b, ' ')
		b = append(b, text...)
	} else {
		// As net/http writes an unknown code.
		b = strconv.AppendInt(b, int64(code), 10)
		b = append(b, " status code "...)
		b = strconv.AppendInt(b, int64(code), 10)
	}
	return append(b, "\r\n"...)
}

// hopHeader reports whether a response header is hop-by-hop, which
// ReverseProxy drops (Trailer is declared again for a chunked answer).
func hopHeader(k []byte) bool {
	switch len(k) {
	case 2:
		return equalFold(k, "te")
	case 7:
		return equalFold(k, "upgrade") || equalFold(k, "trailer")
	case 10:
		return equalFold(k, "connection") || equalFold(k, "keep-alive")
	case 16:
		return equalFold(k, "proxy-connection")
	case 17:
		return equalFold(k, "transfer-encoding")
	case 18:
		return equalFold(k, "proxy-authenticate")
	case 19:
		return equalFold(k, "proxy-authorization")
	}
	return false
}

// writeHead queues the answer's head for the client as net/http writes
// what ReverseProxy hands it: net/http's status text, the process's
// headers without the hop-by-hop ones and those its Connection header
// names, a Date when the process sent none, and the framing net/http
// chooses (the process's length, or chunked).
func (cs *conn) writeHead(h *respHead, head bool) {
	out := appendStatus(cs.out, h.status)
	var named [][]byte
	for _, f := range h.fields {
		if equalFold(f.k, "connection") {
			for tok := range tokens(f.v) {
				named = append(named, tok)
			}
		}
	}
	noBody := h.status == 204 || h.status == 304 || h.status < 200
	for _, f := range h.fields {
		k := f.k
		if hopHeader(k) {
			if h.chunked && equalFold(k, "trailer") {
				out = appendField(out, k, f.v)
			}
			continue
		}
		if equalFold(k, "content-length") || h.status == 304 && equalFold(k, "content-type") {
			continue
		}
		drop := slices.ContainsFunc(named, func(tok []byte) bool {
			return len(tok) == len(k) && bytes.EqualFold(k, tok)
		})
		if !drop {
			out = appendField(out, k, f.v)
		}
	}
	if !h.hasDate {
		out = append(out, date()...)
	}
	switch {
	case noBody:
	case h.clen >= 0 && !h.chunked:
		out = append(out, "Content-Length: "...)
		out = strconv.AppendInt(out, h.clen, 10)
		out = append(out, "\r\n"...)
	case !head:
		out = append(out, "Transfer-Encoding: chunked\r\n"...)
	}
	if cs.fwd.r.close {
		out = append(out, "Connection: close\r\n"...)
	}
	cs.out = append(out, "\r\n"...)
}

// fill reads into the unused capacity of cs.out, up to k bytes, first
// writing what is queued when the read would wait for the process.
func (cs *conn) fill(uc *upConn, k int) (int, error) {
	if uc.br.Buffered() == 0 {
		if err := cs.flush(); err != nil {
			return 0, errAbort
		}
		if err := uc.wait(); err != nil {
			return 0, err
		}
	}
	cs.out = slices.Grow(cs.out, k)
	m, err := uc.br.Read(cs.out[len(cs.out) : len(cs.out)+k])
	cs.out = cs.out[:len(cs.out)+m]
	return m, err
}

// copyN copies a body of n bytes.
func (cs *conn) copyN(uc *upConn, n int64) error {
	for n > 0 {
		m, err := cs.fill(uc, int(min(n, 32<<10)))
		n -= int64(m)
		if err != nil && n > 0 {
			return err
		}
		if len(cs.out) >= 64<<10 {
			if err := cs.flush(); err != nil {
				return errAbort
			}
		}
	}
	return nil
}

// chunk reads up to k bytes and queues them as one chunk of the client's
// answer.
func (cs *conn) chunk(uc *upConn, k int) (int, error) {
	f := cs.fwd
	if f.scratch == nil {
		f.scratch = scratchPool.Get().(*[32 << 10]byte)[:]
	}
	if uc.br.Buffered() == 0 {
		if err := cs.flush(); err != nil {
			return 0, errAbort
		}
		if err := uc.wait(); err != nil {
			return 0, err
		}
	}
	m, err := uc.br.Read(f.scratch[:min(k, len(f.scratch))])
	if m > 0 {
		cs.out = strconv.AppendInt(cs.out, int64(m), 16)
		cs.out = append(cs.out, "\r\n"...)
		cs.out = append(cs.out, f.scratch[:m]...)
		cs.out = append(cs.out, "\r\n"...)
		if len(cs.out) >= 64<<10 {
			if ferr := cs.flush(); ferr != nil {
				return m, errAbort
			}
		}
	}
	return m, err
}

// copyToEOF copies a body that ends when the process closes the
// connection, as chunks.
func (cs *conn) copyToEOF(uc *upConn) error {
	for {
		_, err := cs.chunk(uc, 32<<10)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return err
			}
			cs.out = append(cs.out, "0\r\n\r\n"...)
			return nil
		}
	}
}

// copyChunked copies a chunked body chunk by chunk, and its trailers.
func (cs *conn) copyChunked(uc *upConn) error {
	for {
		line, err := cs.upLine(uc)
		if err != nil {
			return err
		}
		if i := slices.Index(line, ';'); i >= 0 {
			line = line[:i]
		}
		line = trim(line)
		if len(line) == 0 || len(line) > 16 {
			return upErr("malformed chunked encoding")
		}
		var size uint64
		for _, c := range line {
			var d byte
			switch {
			case '0' <= c && c <= '9':
				d = c - '0'
			case 'a' <= c && c <= 'f':
				d = c - 'a' + 10
			case 'A' <= c && c <= 'F':
				d = c - 'A' + 10
			default:
				return upErr("malformed chunked encoding")
			}
			size = size<<4 | uint64(d)
		}
		if size == 0 {
			return cs.copyTrailers(uc)
		}
		for size > 0 {
			m, err := cs.chunk(uc, int(min(size, 32<<10)))
			size -= uint64(m)
			if err != nil {
				return err
			}
		}
		crlf, err := cs.upLine(uc)
		if err != nil {
			return err
		}
		if len(crlf) != 0 {
			return upErr("malformed chunked encoding")
		}
	}
}

// upLine reads one line from the process, without its CRLF.
func (cs *conn) upLine(uc *upConn) ([]byte, error) {
	if uc.br.Buffered() == 0 {
		if err := cs.flush(); err != nil {
			return nil, errAbort
		}
	}
	if err := uc.wait(); err != nil {
		return nil, err
	}
	line, err := uc.br.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) > 4096 {
		return nil, upErr("chunk line too long")
	}
	line, _ = cutLF(line)
	return line, nil
}

// copyTrailers ends the chunked answer with the process's trailers.
func (cs *conn) copyTrailers(uc *upConn) error {
	f := cs.fwd
	f.trailers = append(f.trailers[:0], "0\r\n"...)
	for n := 0; ; n++ {
		line, err := cs.upLine(uc)
		if err != nil {
			return err
		}
		if len(line) == 0 {
			break
		}
		k, v, ok := strings.Cut(string(line), ":")
		if !ok || n == 100 || len(k) == 0 || strings.IndexFunc(k, func(c rune) bool { return c > 0x7f || !isToken(byte(c)) }) >= 0 {
			return upErr("malformed trailer")
		}
		f.trailers = appendField(f.trailers, []byte(k), trim([]byte(v)))
	}
	f.trailers = append(f.trailers, "\r\n"...)
	cs.out = append(cs.out, f.trailers...)
	return nil
}

// The answers for a process that did not answer, as the edge's
// ReverseProxy's ErrorHandler writes them through net/http.
const (
	msgNoAnswer = "the service did not answer; retry shortly\n"
	msgTimeout  = "the service did not answer in time\n"
)

// badGateway answers 502 for an upstream that failed before its answer's
// head, as the ReverseProxy path does.
func (cs *conn) badGateway(addr string, err error) (int, error) {
	cs.l.cfg.Log.Warn("edge: proxying", "host", cs.host, "upstream", addr, "err", err)
	msg := msgNoAnswer
	if strings.Contains(err.Error(), "timeout") {
		msg = msgTimeout
	}
	out := append(cs.out, "HTTP/1.1 502 Bad Gateway\r\nCache-Control: no-store\r\nContent-Length: "...)
	out = strconv.AppendInt(out, int64(len(msg)), 10)
	out = append(out, "\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 2\r\nX-Content-Type-Options: nosniff\r\n"...)
	out = append(out, date()...)
	if cs.fwd.r.close {
		out = append(out, "Connection: close\r\n"...)
	}
	out = append(out, "\r\n"...)
	if cs.fwd.r.method != "HEAD" {
		out = append(out, msg...)
	}
	cs.out = out
	return http.StatusBadGateway, nil
}
