// Package fastpath serves the edge's plain GET and HEAD requests over
// HTTP/1.1, and h2 connections for static sites (h2.go), without net/http,
// and hands every other connection to net/http.
//
// A Listener wraps the server's listener. Each accepted connection (after
// the TLS handshake, for TLS) is read by a goroutine of its own: while the
// requests are unambiguous GETs or HEADs without a body for a host the
// edge serves, it answers them from bytes the edge prepared per file (one
// write per response, or per batch of pipelined requests). At the first
// request that is anything else (the API's host, another method, a body,
// an upgrade, a header it does not parse strictly, an oversized head), it
// hands the connection with the bytes it has read to net/http through
// Accept, and net/http serves it from there on, answering malformed
// requests itself. Connections that negotiated h2 go to net/http at once,
// unless their SNI names a static site and Config.Handler is set.
package fastpath

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pierhq/pier/server/internal/clientaddr"
	"github.com/pierhq/pier/server/internal/edge"
)

// Config is what a Listener needs.
type Config struct {
	Edge *edge.Edge
	// API reports whether a Host header value names the API, whose
	// requests always go to net/http.
	API func(host string) bool
	// Reserved reports whether a URL path is answered by something other
	// than the edge on every host (ACME challenges); nil means none.
	Reserved func(path string) bool
	// TLS, when set, makes the Listener complete TLS handshakes itself. It
	// should offer "h2" and "http/1.1".
	TLS *tls.Config
	// TLSHeader is a header line, CRLF included, added to every answer
	// over TLS (the server's Alt-Svc); nil adds none.
	TLSHeader []byte
	// Trusted are the proxies whose X-Forwarded-For names the client
	// (clientaddr); nil trusts none.
	Trusted *clientaddr.Trusted
	// HeaderTimeout bounds a TLS handshake and reading a request's head
	// once its first byte arrived; IdleTimeout the wait for the next
	// request; WriteTimeout writing an answer. Zero values mean 10 s, 2 min
	// and 2 min. ReadTimeout bounds reading a forwarded request's body
	// (zero: 2 min).
	HeaderTimeout, IdleTimeout, WriteTimeout, ReadTimeout time.Duration
	// Handler, when set, serves h2 connections for static sites here (see
	// h2.go): it answers their requests that are not plain GETs or HEADs
	// of a file, in-process. It is the handler net/http serves.
	Handler http.Handler
	// MaxHeaderBytes is net/http's, for the h2 header list size.
	MaxHeaderBytes int
	// APIRead, when set, may answer a request for the API's host here
	// (see api.go): it appends to dst the answer's status line and header
	// lines, without Date and Connection and without the blank line that
	// ends the head, and returns them with the body, which it keeps. ok
	// false sends the request to net/http.
	APIRead func(dst []byte, q *APIRequest) (head, body []byte, ok bool)
	Log     *slog.Logger
}

// Listener is a net.Listener whose Accept returns the connections net/http
// is to serve.
type Listener struct {
	inner   net.Listener
	cfg     Config
	handoff chan net.Conn
	done    chan struct{}
	doneErr error

	mu     sync.Mutex // guards conns
	closed atomic.Bool
	conns  map[net.Conn]struct{}
	once   sync.Once
	// handoffs counts connections given to net/http, h2served the h2
	// connections served here, sendfiles the bodies sent with sendfile.
	handoffs, h2served, sendfiles atomic.Int64
}

// New starts accepting on inner.
func New(inner net.Listener, cfg Config) *Listener {
	cfg = cfg.withDefaults()
	l := &Listener{inner: inner, cfg: cfg, handoff: make(chan net.Conn), done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	go l.acceptLoop()
	return l
}

// Accept returns the next connection for net/http.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.handoff:
		return c, nil
	case <-l.done:
		return nil, l.doneErr
	}
}

// Addr is the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// Close stops accepting, and closes the fast path's connections once their
// current answer is written (idle ones at once).
func (l *Listener) Close() error {
	l.mu.Lock()
	l.closed.Store(true)
	for c := range l.conns {
		c.SetReadDeadline(time.Now()) // wakes a reader; it then sees closed
	}
	l.mu.Unlock()
	err := l.inner.Close()
	l.stop(net.ErrClosed)
	return err
}

func (l *Listener) stop(err error) {
	l.once.Do(func() {
		l.doneErr = err
		close(l.done)
	})
}

// isClosed is checked after setting a read deadline: Close sets closed and
// then wakes readers, so a deadline set afterwards is seen here.
func (l *Listener) isClosed() bool { return l.closed.Load() }

func (l *Listener) acceptLoop() {
	var delay time.Duration
	for {
		c, err := l.inner.Accept()
		if err != nil {
			if l.isClosed() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				l.cfg.Log.Warn("edge fast path: accept", "err", err, "retry", delay)
				time.Sleep(delay)
				continue
			}
			l.stop(err)
			return
		}
		delay = 0
		go l.serve(c)
	}
}

func isTemporary(err error) bool {
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

func (l *Listener) track(c net.Conn, add bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !add {
		delete(l.conns, c)
		return true
	}
	if l.closed.Load() {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

// give hands c to net/http.
func (l *Listener) give(c net.Conn) {
	l.handoffs.Add(1)
	c.SetDeadline(time.Time{})
	select {
	case l.handoff <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *Listener) serve(nc net.Conn) {
	if !l.track(nc, true) {
		nc.Close()
		return
	}
	var give net.Conn
	defer func() {
		if p := recover(); p != nil {
			l.cfg.Log.Error("edge fast path: panic", "panic", p)
			give = nil
		}
		l.track(nc, false)
		if give != nil {
			l.give(give)
		} else {
			nc.Close()
		}
	}()
	c := nc
	var tc *tls.Conn
	if l.cfg.TLS != nil {
		cork := &corkConn{Conn: nc}
		tc = tls.Server(cork, l.cfg.TLS)
		nc.SetDeadline(time.Now().Add(l.cfg.HeaderTimeout))
		ctx, cancel := context.WithTimeout(context.Background(), l.cfg.HeaderTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			l.cfg.Log.Debug("edge fast path: TLS handshake", "remote", nc.RemoteAddr(), "err", err)
			return
		}
		nc.SetDeadline(time.Time{})
		if tc.ConnectionState().NegotiatedProtocol == "h2" {
			if host := l.h2Host(tc); host != "" {
				l.serveH2(tc, cork, host, time.Now())
				return
			}
			give = tc
			return
		}
		c = tc
	}
	cs := &conn{l: l, c: c, tcp: nc, tls: tc != nil, br: bufio.NewReaderSize(c, maxHead), start: time.Now()}
	if cs.loop() {
		// A head handed off half read keeps its deadline, and a first
		// request the connection's: net/http's own header timeout, which
		// starts afresh, may not extend them.
		headBy := cs.headBy
		if headBy.IsZero() && !cs.served {
			headBy = cs.start.Add(l.cfg.HeaderTimeout)
		}
		if tc != nil {
			give = &tlsConn{bufConn{Conn: tc, br: cs.br, headBy: headBy, late: cs.late}, tc}
		} else {
			give = &bufConn{Conn: nc, br: cs.br, headBy: headBy, late: cs.late}
		}
	}
}

// maxHead bounds a request head on the fast path; larger ones go to net/http.
const maxHead = 8 << 10

// bigBody is the size from which a body is written from its own slice
// (writev on TCP) rather than copied after the head.
const bigBody = 16 << 10

type conn struct {
	l   *Listener
	c   net.Conn // what is read and written: nc or the TLS conn
	tcp net.Conn
	tls bool
	br  *bufio.Reader
	out []byte

	readBy, writeBy time.Time // deadlines set on c
	// start is when the connection was ready for its first request, and
	// headBy the deadline of a head being read (zero when none is).
	start, headBy time.Time
	// The last request's host and path as strings, and the routing of
	// that host, so that a keep-alive connection repeating them allocates
	// nothing.
	host, path string
	api        bool
	// page is the scratch a 404 for an unknown host is made in.
	page []byte
	// served is set once a request was answered.
	served bool
	// fwd is the forwarder's state, once a request was forwarded.
	fwd *fwd
	// apiReq is the last API request read (api.go), ip the peer's
	// address once known and remote with its port.
	apiReq     apiReq
	ip, remote string
	// scratch is where APIRead may make a body (APIRequest.Scratch).
	scratch []byte
	// late, when set, is the read deadline that passed before an API
	// request's body came (apiRead): the request goes to net/http, whose
	// reads keep that deadline.
	late time.Time
}

// request is one parsed head.
type request struct {
	head                  bool // HEAD, not GET
	http10                bool
	close                 bool
	host, target, inm, ae []byte
	hostN, inmN, aeN      int
}

// loop serves requests until the connection ends (false) or one is for
// net/http (true), with what was read of it still buffered.
func (cs *conn) loop() bool {
	cfg := &cs.l.cfg
	for {
		if cs.br.Buffered() == 0 {
			if err := cs.flush(); err != nil {
				return false
			}
			// A new connection gets the header timeout to send its first
			// byte, as net/http gives it; only a connection that already
			// asked something may idle for longer.
			wait := cfg.IdleTimeout
			if !cs.served {
				wait = min(wait, cfg.HeaderTimeout)
			}
			if !cs.deadline(&cs.readBy, wait, cs.c.SetReadDeadline) || cs.l.isClosed() {
				return false
			}
			if _, err := cs.br.Peek(1); err != nil {
				return false
			}
		}
		if cs.l.isClosed() {
			cs.flush()
			return false
		}
		n, fast, err := cs.readHead()
		if err != nil {
			cs.flush()
			return false
		}
		if !fast {
			return cs.flush() == nil
		}
		handled, close, err := cs.one(n)
		if err != nil {
			return false
		}
		if !handled {
			return cs.flush() == nil
		}
		cs.served = true
		if close {
			if cs.flush() == nil {
				cs.lingerClose()
			}
			return false
		}
	}
}

// one serves the request whose head is the first n buffered bytes: a
// static file, a kept API answer or a forwarded request. handled is
// false, with nothing read, when it is for net/http; close when the
// connection is to end after it.
func (cs *conn) one(n int) (handled, close bool, err error) {
	// A connection that asked the API most likely asks it again.
	triedAPI := cs.api && cs.l.cfg.APIRead != nil
	if triedAPI {
		if handled, close, err = cs.apiRead(n); handled || err != nil || !cs.late.IsZero() {
			return handled, close, err
		}
	}
	b, _ := cs.br.Peek(n)
	var r request
	if parse(b, &r) {
		if handled, err = cs.answer(&r); handled || err != nil {
			if err == nil {
				cs.br.Discard(n)
			}
			return handled, r.close, err
		}
	}
	if !triedAPI {
		if handled, close, err = cs.apiRead(n); handled || err != nil || !cs.late.IsZero() {
			return handled, close, err
		}
	}
	// Not a static site's: a process service's, to forward?
	if handled, err = cs.forward(n); !handled || err != nil {
		return handled, false, err
	}
	return true, cs.fwd.r.close, nil
}

// deadline moves a read or write deadline to now+d when it is more than a
// second short of that, so a busy connection does not reset timers per
// request; idle and write timeouts are then exact within a second.
func (cs *conn) deadline(at *time.Time, d time.Duration, set func(time.Time) error) bool {
	now := time.Now()
	if at.Sub(now) > d-time.Second {
		return true
	}
	*at = now.Add(d)
	return set(*at) == nil
}

// readHead waits for a whole request head in the buffer and returns its
// length. fast is false, without waiting, as soon as the bytes show it is
// not of a method the fast path answers or forwards, has a line not ended by CRLF or does not fit.
func (cs *conn) readHead() (n int, fast bool, err error) {
	scanned := 0
	headerDeadline := false
	for {
		b, _ := cs.br.Peek(cs.br.Buffered())
		if !methodPrefix(b) {
			return 0, false, nil
		}
		for i := max(scanned, 1); i < len(b); i++ {
			switch b[i] {
			case '\n':
				if b[i-1] != '\r' {
					return 0, false, nil
				}
				if i >= 3 && b[i-2] == '\n' && b[i-3] == '\r' {
					if headerDeadline {
						cs.readBy = time.Time{} // the idle deadline is set anew
						cs.headBy = time.Time{}
					}
					return i + 1, true, nil
				}
			case '\r':
				if i+1 < len(b) && b[i+1] != '\n' {
					return 0, false, nil
				}
			}
		}
		scanned = max(len(b)-1, 1) // a CR ending the buffer is checked again
		if len(b) >= maxHead {
			return 0, false, nil
		}
		if !headerDeadline {
			headerDeadline = true
			// The first head is due a header timeout after the connection
			// opened, as net/http has it, so that silence followed by a
			// trickle gets no more; a later one after its first byte.
			from := time.Now()
			if !cs.served {
				from = cs.start
			}
			cs.readBy = from.Add(cs.l.cfg.HeaderTimeout)
			cs.headBy = cs.readBy
			if err := cs.c.SetReadDeadline(cs.readBy); err != nil {
				return 0, false, err
			}
			if cs.l.isClosed() {
				return 0, false, net.ErrClosed
			}
		}
		if _, err := cs.br.Peek(len(b) + 1); err != nil {
			return 0, false, err
		}
	}
}

func methodPrefix(b []byte) bool {
	for _, m := range fwdMethods {
		k := min(len(b), len(m))
		if string(b[:k]) == m[:k] {
			return true
		}
	}
	return false
}

// parse reads a head strictly; false means it is for net/http.
func parse(b []byte, r *request) bool {
	line, rest := cutLine(b)
	switch {
	case hasPrefix(line, "GET "):
		line = line[4:]
	case hasPrefix(line, "HEAD "):
		line, r.head = line[5:], true
	default:
		return false
	}
	sp := -1
	for i, c := range line {
		if c == ' ' {
			sp = i
			break
		}
		if c <= ' ' || c >= 0x7f {
			return false
		}
	}
	if sp < 1 || line[0] != '/' {
		return false
	}
	r.target = line[:sp]
	switch string(line[sp+1:]) {
	case "HTTP/1.1":
	case "HTTP/1.0":
		r.http10, r.close = true, true
	default:
		return false
	}
	if !headerFields(rest, func(name, v []byte) bool {
		switch {
		case equalFold(name, "host"):
			r.host, r.hostN = v, r.hostN+1
		case equalFold(name, "if-none-match"):
			r.inm, r.inmN = v, r.inmN+1
		case equalFold(name, "accept-encoding"):
			r.ae, r.aeN = v, r.aeN+1
		case equalFold(name, "connection"):
			closing, ok := connection(v, !r.http10)
			if !ok {
				return false
			}
			r.close = r.close || closing
		case equalFold(name, "content-length"), equalFold(name, "transfer-encoding"), equalFold(name, "upgrade"),
			equalFold(name, "expect"), equalFold(name, "http2-settings"), equalFold(name, "trailer"):
			return false
		}
		return true
	}) {
		return false
	}
	if r.hostN != 1 || r.inmN > 1 || r.aeN > 1 || !plainHost(r.host) {
		return false
	}
	return true
}

// headerFields calls field for each field of a request head's header
// section, the lines of rest up to the blank one. It is false for more
// than 100 fields, a line splitField leaves to net/http, or a false from
// field.
func headerFields(rest []byte, field func(name, v []byte) bool) bool {
	for count := 0; ; count++ {
		var line []byte
		line, rest = cutLine(rest)
		if len(line) == 0 {
			return true
		}
		if count == 100 {
			return false
		}
		name, v, ok := splitField(line, false)
		if !ok || !field(name, v) {
			return false
		}
	}
}

// contentLength reads a Content-Length value of the plain form net/http
// reads the same way: one to six digits, at most limit.
func contentLength(v []byte, limit int64) (int64, bool) {
	if len(v) == 0 || len(v) > 6 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, n <= limit
}

// plainHost reports whether a Host value is a name or address the fast
// path routes as it is: letters, digits, '.', '-' and ':', at least one.
func plainHost(h []byte) bool {
	for _, c := range h {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == ':') {
			return false
		}
	}
	return len(h) > 0
}

// connection reads a Connection header: whether it asks to close. close
// and, when keepAlive allows it (HTTP/1.1, where it changes nothing),
// keep-alive are the tokens the fast path knows; ok is false for any
// other, which names hop-by-hop headers and goes to net/http.
func connection(v []byte, keepAlive bool) (closing, ok bool) {
	for tok := range tokens(v) {
		switch {
		case equalFold(tok, "close"):
			closing = true
		case equalFold(tok, "keep-alive") && keepAlive:
		default:
			return false, false
		}
	}
	return closing, true
}

func cutLine(b []byte) (line, rest []byte) {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' {
			return b[:i], b[i+2:]
		}
	}
	return b, nil
}

func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }

// trim drops the blanks (space, tab) around a header value. Unlike
// bytes.Trim it keeps an empty value non-nil: present, not absent.
func trim(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// equalFold reports whether b is lower, an ASCII string, in any case. The
// length check keeps bytes.EqualFold's Unicode folding (U+212A is k, U+017F
// is s) out: HTTP's names and tokens fold as ASCII only.
func equalFold(b []byte, lower string) bool {
	return len(b) == len(lower) && bytes.EqualFold(b, []byte(lower))
}

func isToken(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '!' || c == '#' || c == '$' || c == '%' || c == '&' || c == '\'' || c == '*' || c == '+' ||
		c == '-' || c == '.' || c == '^' || c == '_' || c == '`' || c == '|' || c == '~'
}

// plainPath reports whether a request target needs no decoding: its path
// is the bytes before any '?'.
func plainPath(t []byte) ([]byte, bool) {
	for i, c := range t {
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '/' || c == '.' || c == '-' || c == '_' || c == '~':
		case c == '?':
			return t[:i], true
		default:
			return nil, false
		}
	}
	return t, true
}

// answer queues the edge's answer; false means the request is for net/http.
func (cs *conn) answer(r *request) (bool, error) {
	cfg := &cs.l.cfg
	if string(r.host) != cs.host {
		cs.host = string(r.host)
		cs.api = cfg.API(cs.host)
	}
	if cs.api {
		return false, nil
	}
	if p, ok := plainPath(r.target); ok {
		if string(p) != cs.path {
			cs.path = string(p)
		}
	} else {
		u, err := url.ParseRequestURI(string(r.target)) // as net/http does
		if err != nil {
			return false, nil
		}
		cs.path = u.Path
	}
	if cfg.Reserved != nil && cfg.Reserved(cs.path) {
		return false, nil
	}
	var inm, ae string
	if len(r.inm) > 0 {
		inm = string(r.inm)
	}
	if len(r.ae) > 0 {
		ae = string(r.ae)
	}
	var head, body []byte
	var file *os.File
	var ok bool
	if cfg.Edge.Unknown(cs.host) {
		// No site has the host: its 404 page, made in the connection's
		// scratch.
		var n int
		cs.page, n = edge.AppendNotFound(cs.page[:0], cs.host)
		head, body = cs.page[:n], cs.page[n:]
	} else if head, body, file, ok = cfg.Edge.PreparedFile(context.Background(), cs.host, cs.path, inm, ae); !ok {
		return false, nil
	}
	if r.head {
		body = nil
	}
	if cs.tls {
		file = nil // kTLS is not offered by crypto/tls (bench/README.md)
	}
	start := len(cs.out)
	cs.out = append(cs.out, head...)
	if r.http10 {
		cs.out[start+7] = '0' // "HTTP/1.0 ", as net/http answers HTTP/1.0
	}
	if cs.tls {
		cs.out = append(cs.out, cfg.TLSHeader...)
	}
	cs.out = append(cs.out, date()...)
	if r.close && !r.http10 {
		cs.out = append(cs.out, "Connection: close\r\n"...)
	}
	cs.out = append(cs.out, "\r\n"...)
	if file != nil && len(body) >= edge.SendfileMin {
		return true, cs.sendFile(file, len(body), body)
	}
	if len(body) >= bigBody {
		return true, cs.write(body)
	}
	cs.out = append(cs.out, body...)
	if len(cs.out) >= 64<<10 {
		return true, cs.flush()
	}
	return true, nil
}

func (cs *conn) flush() error { return cs.write(nil) }

// sendFile sends the queued bytes and then body, which file holds from
// offset 0, with sendfile(2) where the connection allows it.
func (cs *conn) sendFile(file *os.File, n int, body []byte) error {
	if !cs.deadline(&cs.writeBy, cs.l.cfg.WriteTimeout, cs.c.SetWriteDeadline) {
		return errors.New("deadline")
	}
	cs.l.sendfiles.Add(1)
	handled, err := sendFile(cs.c, cs.out, file, n)
	if !handled {
		cs.l.sendfiles.Add(-1)
		return cs.write(body)
	}
	if cap(cs.out) > 256<<10 {
		cs.out = nil
	}
	cs.out = cs.out[:0]
	return err
}

// write sends the queued bytes and then body.
func (cs *conn) write(body []byte) error {
	if len(cs.out) == 0 && len(body) == 0 {
		return nil
	}
	if !cs.deadline(&cs.writeBy, cs.l.cfg.WriteTimeout, cs.c.SetWriteDeadline) {
		return errors.New("deadline")
	}
	var err error
	switch {
	case len(body) == 0:
		_, err = cs.c.Write(cs.out)
	case cs.tls:
		if _, err = cs.c.Write(cs.out); err == nil {
			_, err = cs.c.Write(body)
		}
	default:
		bufs := net.Buffers{cs.out, body}
		_, err = bufs.WriteTo(cs.c)
	}
	if cap(cs.out) > 256<<10 {
		cs.out = nil
	}
	cs.out = cs.out[:0]
	return err
}

// lingerClose ends the connection after an answer with Connection: close
// the way net/http does: it stops writing and reads what the client still
// sends for a moment, so that closing does not reset the answer away.
func (cs *conn) lingerClose() {
	if cw, ok := cs.c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	cs.c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	io.Copy(io.Discard, io.LimitReader(cs.c, 256<<10))
}

// dateCache keeps the Date field encoded for the current second, so that
// an answer's head copies it rather than formatting and encoding a time;
// HTTP/1.1, h2 and h3 each encode it their way.
type dateCache struct {
	mu     sync.Mutex
	sec    int64
	field  []byte
	encode func(date string) []byte
}

// get is the Date field for the current second.
func (c *dateCache) get() []byte {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := now.Unix(); s != c.sec || c.field == nil {
		c.sec, c.field = s, c.encode(now.UTC().Format(http.TimeFormat))
	}
	return c.field
}

// h1Date is the Date header line.
var h1Date = dateCache{encode: func(date string) []byte { return []byte("Date: " + date + "\r\n") }}

// date is the Date header line for the current second.
func date() []byte { return h1Date.get() }

// bufConn is a connection handed to net/http: reads return the bytes the
// fast path buffered first.
type bufConn struct {
	net.Conn
	br *bufio.Reader
	// headBy, when set, caps the first read deadline net/http sets, the
	// one for the head the fast path began reading.
	headBy time.Time
	// late, when set, caps every read deadline: the one that passed
	// while the fast path waited for a request's body (conn.late), so
	// that net/http's reading it, and the connection, end there as they
	// would have had net/http waited itself.
	late time.Time
}

func (c *bufConn) SetReadDeadline(t time.Time) error {
	if !c.late.IsZero() && (t.IsZero() || t.After(c.late)) {
		t = c.late
	}
	if !c.headBy.IsZero() {
		if t.IsZero() || t.After(c.headBy) {
			t = c.headBy
		}
		c.headBy = time.Time{}
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *bufConn) Read(p []byte) (int, error) {
	if c.br != nil {
		if c.br.Buffered() > 0 {
			return c.br.Read(p)
		}
		c.br = nil
	}
	return c.Conn.Read(p)
}

// tlsConn is a handed-off TLS connection; net/http does not see it as a
// *tls.Conn, so ConnContext and WithTLS restore Request.TLS.
type tlsConn struct {
	bufConn
	tc *tls.Conn
}

type tlsKey struct{}

// ConnContext is for http.Server.ConnContext: it keeps the TLS state of a
// connection the fast path handed off.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if t, ok := c.(*tlsConn); ok {
		st := t.tc.ConnectionState()
		return context.WithValue(ctx, tlsKey{}, &st)
	}
	return ctx
}

// WithTLS sets Request.TLS for requests on connections the fast path
// handed off after their TLS handshake.
func WithTLS(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			if st, ok := r.Context().Value(tlsKey{}).(*tls.ConnectionState); ok {
				r.TLS = st
			}
		}
		h.ServeHTTP(w, r)
	})
}

// withDefaults fills the timeouts and log cfg leaves unset; the TCP
// listener and HTTP/3 share them.
func (cfg Config) withDefaults() Config {
	if cfg.HeaderTimeout == 0 {
		cfg.HeaderTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 2 * time.Minute
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 2 * time.Minute
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 2 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return cfg
}
