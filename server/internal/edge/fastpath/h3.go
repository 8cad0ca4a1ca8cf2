package fastpath

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/qpack"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/quicvarint"
	"golang.org/x/net/http/httpguts"
)

// HTTP/3.
//
// quic-go's http3.Server reads every request stream on a goroutine of its
// own, which grows its stack while it parses the head, and answers through
// an http.Request and the net/http handler chain. A QUIC connection whose
// TLS SNI names a live static site is served here instead: its request
// streams go to a pool of workers (goroutines kept, stacks already grown),
// which peek at the HEADERS frame without consuming it and answer a plain
// GET or HEAD from the edge's prepared answer, the QPACK field section
// encoded once per head. Anything else on the stream (another method, a
// head the fast path does not read as it is, a path with no file, the
// API's host, an ACME challenge) is handed, unread, to quic-go's own
// request handling on the same connection (http3.RawServerConn), with the
// server's handler: the same answer as before. Every other connection (no
// SNI, the API's host, a process service) is served by the http3.Server
// untouched. The connection's control and QPACK streams are quic-go's.

const (
	// h3Peek bounds the HEADERS frame the fast path reads; a larger one
	// goes to quic-go.
	h3Peek = 8 << 10
	// h3IdleWorkers bounds the workers kept waiting for a stream.
	h3IdleWorkers = 64
	// h3BigBody is the body size from which the answer's head and body go
	// to the stream in two writes (and the write may wait for the
	// client's flow-control window, under the write timeout).
	h3BigBody = 16 << 10
	// Frame types and error codes of RFC 9114.
	h3FrameData, h3FrameHeaders    = 0x00, 0x01
	h3NoError, h3RequestIncomplete = 0x100, 0x10d
)

// H3 serves HTTP/3 connections: those for a static site here, the others
// with Server.
type H3 struct {
	cfg Config
	// srv serves the connections not for a static site; raw makes the
	// http3.RawServerConn of each connection served here (no idle timer:
	// the connection's idle timeout is kept here).
	srv, raw *http3.Server
	ctx      context.Context
	stop     context.CancelFunc

	work chan h3work
	idle atomic.Int64 // workers waiting

	mu    sync.Mutex
	conns map[*h3conn]struct{}
	wg    sync.WaitGroup

	blocks h3Blocks
	// served counts the connections served here, fast the requests
	// answered from the edge's prepared answers.
	served, fast atomic.Int64
}

// NewH3 serves HTTP/3 with srv (its Handler, Logger, MaxHeaderBytes and
// IdleTimeout) and, for static sites, the fast path; cfg's Edge, API,
// Reserved, HeaderTimeout, IdleTimeout and WriteTimeout apply to the
// latter.
func NewH3(cfg Config, srv *http3.Server) *H3 {
	cfg = cfg.withDefaults()
	ctx, stop := context.WithCancel(context.Background())
	return &H3{cfg: cfg, srv: srv, ctx: ctx, stop: stop, work: make(chan h3work), conns: map[*h3conn]struct{}{},
		raw: &http3.Server{Handler: srv.Handler, MaxHeaderBytes: srv.MaxHeaderBytes, Logger: srv.Logger}}
}

// Serve accepts connections from ln until Shutdown, or until ln fails.
func (h *H3) Serve(ln http3.QUICListener) error {
	for {
		c, err := ln.Accept(h.ctx)
		if err != nil {
			if h.ctx.Err() != nil {
				return nil
			}
			return err
		}
		go h.conn(c)
	}
}

// conn serves a connection: here when its SNI names a live static site,
// with srv otherwise.
func (h *H3) conn(c *quic.Conn) {
	host := strings.ToLower(c.ConnectionState().TLS.ServerName)
	if host == "" || h.cfg.API(host) || !h.cfg.Edge.Static(context.Background(), host) {
		if err := h.srv.ServeQUICConn(c); err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.cfg.Log.Debug("http3: connection ended", "err", err)
		}
		// Served, or refused by a server shutting down.
		c.CloseWithError(h3NoError, "")
		return
	}
	h.serveConn(c)
}

// Shutdown stops accepting; srv sends its connections GOAWAY and waits
// for their requests, and the connections served here are closed once
// the requests they are answering are answered, all until ctx ends. The
// connections served here send no GOAWAY: a request the client sends
// after Shutdown began is not answered.
func (h *H3) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	h.stop()
	h.mu.Unlock()
	err := h.srv.Shutdown(ctx)
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		h.mu.Lock()
		for c := range h.conns {
			c.qc.CloseWithError(h3NoError, "")
		}
		h.mu.Unlock()
	}
	return err
}

// h3conn is a connection served here.
type h3conn struct {
	h   *H3
	qc  *quic.Conn
	raw *http3.RawServerConn
	// active counts its streams being handled; last is when one last
	// began or ended (Unix nanoseconds).
	active atomic.Int64
	last   atomic.Int64
	idle   *time.Timer
}

// serveConn serves a connection's streams until it or the server ends.
func (h *H3) serveConn(qc *quic.Conn) {
	raw, err := h.raw.NewRawServerConn(qc)
	if err != nil {
		qc.CloseWithError(h3NoError, "")
		return
	}
	h.served.Add(1)
	c := &h3conn{h: h, qc: qc, raw: raw}
	c.last.Store(time.Now().UnixNano())
	h.mu.Lock()
	if h.ctx.Err() != nil {
		h.mu.Unlock()
		qc.CloseWithError(h3NoError, "")
		return
	}
	h.conns[c] = struct{}{}
	h.wg.Add(1)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.conns, c)
		h.mu.Unlock()
		h.wg.Done()
	}()
	c.idle = time.AfterFunc(time.Hour, c.checkIdle)
	c.idle.Reset(h.cfg.IdleTimeout) // once c.idle is set, for checkIdle
	defer c.idle.Stop()
	go func() {
		for {
			us, err := qc.AcceptUniStream(context.Background())
			if err != nil {
				return
			}
			go raw.HandleUnidirectionalStream(us)
		}
	}()
	sc := &h3scratch{}
	for {
		str, err := qc.AcceptStream(h.ctx)
		if err != nil {
			break
		}
		c.begin()
		// Answered here when it can be at once: the answers to the
		// streams that came in one packet are then all written before
		// the connection's loop runs, and go out together.
		w := h3work{c: c, str: str}
		switch h.answer(&w, sc, true) {
		case h3Answered:
			c.end()
		default:
			h.dispatch(w)
		}
	}
	if qc.Context().Err() != nil {
		return
	}
	// Shutting down: the streams accepted are answered, then the
	// connection closes.
	for c.active.Load() > 0 && qc.Context().Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	qc.CloseWithError(h3NoError, "")
}

func (c *h3conn) begin() {
	c.active.Add(1)
	c.last.Store(time.Now().UnixNano())
}

func (c *h3conn) end() {
	c.last.Store(time.Now().UnixNano())
	c.active.Add(-1)
}

// checkIdle closes the connection an idle timeout after its last stream
// ended, as http3.Server does.
func (c *h3conn) checkIdle() {
	d := c.h.cfg.IdleTimeout
	if c.active.Load() > 0 {
		c.idle.Reset(d)
		return
	}
	if since := time.Duration(time.Now().UnixNano() - c.last.Load()); since < d {
		c.idle.Reset(d - since)
		return
	}
	c.qc.CloseWithError(h3NoError, "idle timeout")
}

// h3work is a request stream for a worker.
type h3work struct {
	c   *h3conn
	str *quic.Stream
	// toQuic: for quic-go's request handling; rest: the body still to
	// write of an answer begun.
	toQuic bool
	rest   []byte
}

// h3Outcome is what became of a request stream.
type h3Outcome int

const (
	// h3Answered: answered here, or reset.
	h3Answered h3Outcome = iota
	// h3ToQuic: for quic-go's request handling.
	h3ToQuic
	// h3Later: not at once (its head has not all come, or the answer
	// waits for the client's flow-control window); a worker goes on.
	h3Later
)

// h3InlineWait is how long the connection's accept loop waits for a
// stream's head before it gives the stream to a worker.
const h3InlineWait = time.Millisecond

// dispatch gives a stream to a waiting worker, or to a new one.
func (h *H3) dispatch(w h3work) {
	select {
	case h.work <- w:
	default:
		go h.worker(w)
	}
}

// worker handles streams, then waits for more while fewer than
// h3IdleWorkers wait.
func (h *H3) worker(w h3work) {
	sc := &h3scratch{}
	for {
		h.stream(w, sc)
		if h.idle.Add(1) > h3IdleWorkers {
			h.idle.Add(-1)
			return
		}
		select {
		case w = <-h.work:
			h.idle.Add(-1)
		case <-h.ctx.Done():
			h.idle.Add(-1)
			return
		}
	}
}

// h3scratch is the buffers of a worker, or of a connection's accept loop.
type h3scratch struct {
	peek [h3Peek]byte
	out  []byte
}

// stream answers a request stream here, finishes an answer begun, or
// hands the stream to quic-go.
func (h *H3) stream(w h3work, sc *h3scratch) {
	defer w.c.end()
	switch {
	case w.rest != nil:
		w.str.SetWriteDeadline(time.Now().Add(h.cfg.WriteTimeout))
		_, err := w.str.Write(w.rest)
		h.finish(w.str, err)
		return
	case !w.toQuic && h.answer(&w, sc, false) == h3Answered:
		return
	}
	w.str.SetReadDeadline(time.Time{})
	w.c.raw.HandleRequestStream(w.str)
}

// h3Request is what the fast path reads of a request's head.
type h3Request struct {
	method, scheme, authority, path, host string
	inm, ae                               string
	hosts                                 int
	hasAuthority                          bool
}

// answer answers a plain GET or HEAD from the edge's prepared answer,
// leaving anything else unread for quic-go. inline: without waiting (more
// than h3InlineWait for the head; for the client's window not at all),
// h3Later if it would; w then says what a worker is to do.
func (h *H3) answer(w *h3work, sc *h3scratch, inline bool) h3Outcome {
	str := w.str
	block, out := h.peekHeaders(str, sc, inline)
	if block == nil {
		w.toQuic = out == h3ToQuic
		return out
	}
	w.toQuic = true
	var r h3Request
	if !h.readHeaders(block, &r) {
		return h3ToQuic
	}
	cfg := &h.cfg
	path := r.path
	if p, ok := plainPathString(path); ok {
		path = p
	} else if u, err := url.ParseRequestURI(path); err == nil { // as quic-go does
		path = u.Path
	} else {
		return h3ToQuic
	}
	if cfg.API(r.authority) || cfg.Reserved != nil && cfg.Reserved(path) {
		return h3ToQuic
	}
	head, body, _, ok := cfg.Edge.PreparedFile(context.Background(), r.authority, path, r.inm, r.ae)
	if !ok {
		return h3ToQuic
	}
	if r.method == "HEAD" {
		body = nil
	}
	key, ctype := head, []byte(nil)
	if bytes.HasPrefix(head, []byte("HTTP/1.1 304")) {
		// ServeHTTP sets the 200's Content-Type before it writes a
		// 304, and quic-go sends it; files with the same bytes (the same
		// 304 head) may have different types.
		if h200, _, ok := cfg.Edge.Prepared(context.Background(), r.authority, path, "", ""); ok {
			ctype = headerLine(h200, "Content-Type")
		}
		key = append(append(append([]byte(nil), head...), 0), ctype...)
	}
	blk := h.blocks.get(key, func() []byte { return h3Block(head, ctype) })
	w.toQuic = false
	h.fast.Add(1) // before the client may see the answer
	out = h.write(w, sc, blk, body, inline)
	if out == h3Later && w.rest == nil {
		h.fast.Add(-1) // nothing written: a worker answers
	}
	return out
}

// peekHeaders peeks at the stream's first frame: block is the field
// section of a HEADERS frame of at most h3Peek bytes. Without one, the
// outcome says why: the stream is for quic-go, was reset here (its head
// did not come within the header timeout) or, inline, has not all come.
func (h *H3) peekHeaders(str *quic.Stream, sc *h3scratch, inline bool) (block []byte, _ h3Outcome) {
	wait := h.cfg.HeaderTimeout
	if inline {
		wait = h3InlineWait
	}
	str.SetReadDeadline(time.Now().Add(wait))
	b := sc.peek[:]
	if n, err := str.Peek(b[:2]); n < 2 || err != nil {
		return nil, h.peekFailed(str, err, inline)
	}
	if b[0] != h3FrameHeaders {
		return nil, h3ToQuic
	}
	var ll int
	switch b[1] >> 6 {
	case 0:
		ll = 1
	case 1:
		ll = 2
	case 2:
		ll = 4
	default:
		return nil, h3ToQuic
	}
	if ll > 1 {
		if n, err := str.Peek(b[:1+ll]); n < 1+ll || err != nil {
			return nil, h.peekFailed(str, err, inline)
		}
	}
	l, _, err := quicvarint.Parse(b[1 : 1+ll])
	if err != nil || l > uint64(len(b)-1-ll) || int(l) > h.maxHeaderBytes() {
		return nil, h3ToQuic
	}
	total := 1 + ll + int(l)
	if n, err := str.Peek(b[:total]); n < total || err != nil && !(n == total && err == io.EOF) {
		return nil, h.peekFailed(str, err, inline)
	}
	return b[1+ll : total], h3Answered
}

// peekFailed is the outcome of a peek that failed: a head that did not
// come in time is left to a worker (inline) or reset (past the header
// timeout); any other failure is quic-go's to handle.
func (h *H3) peekFailed(str *quic.Stream, err error, inline bool) h3Outcome {
	var ne interface{ Timeout() bool }
	switch {
	case !errors.As(err, &ne) || !ne.Timeout():
		return h3ToQuic
	case inline:
		return h3Later
	}
	str.CancelRead(h3RequestIncomplete)
	str.CancelWrite(h3RequestIncomplete)
	return h3Answered
}

func (h *H3) maxHeaderBytes() int {
	if n := h.srv.MaxHeaderBytes; n > 0 {
		return n
	}
	return 1 << 20 // http.DefaultMaxHeaderBytes
}

// readHeaders decodes a request's field section into r. It says whether
// the request is one the fast path answers: every field valid as quic-go
// requires, the pseudo-header fields of a GET or HEAD over https, no
// Content-Length, TE or connection-specific field; false sends it to
// quic-go, which answers or refuses it as before.
func (h *H3) readHeaders(block []byte, r *h3Request) bool {
	dec := qpack.Decoder{}
	next := dec.Decode(block)
	limit := h.maxHeaderBytes()
	regular := false
	for {
		f, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return false
		}
		if limit -= len(f.Name) + len(f.Value) + 32; limit < 0 || !httpguts.ValidHeaderFieldValue(f.Value) {
			return false
		}
		if f.IsPseudo() {
			if regular || !r.pseudo(f.Name, f.Value) {
				return false
			}
			continue
		}
		regular = true
		if !validLowerName(f.Name) || !r.field(f.Name, f.Value) {
			return false
		}
	}
	if !r.hasAuthority {
		r.authority = r.host
	} else if r.hosts > 0 && r.host != r.authority {
		return false
	}
	return (r.method == "GET" || r.method == "HEAD") && r.scheme == "https" && r.hosts <= 1 &&
		r.authority != "" && strings.IndexByte(r.authority, '@') < 0 && strings.HasPrefix(r.path, "/")
}

// pseudo reads a pseudo-header field; false for a duplicate or one a GET
// or HEAD does not carry.
func (r *h3Request) pseudo(name, v string) bool {
	var dst *string
	switch name {
	case ":method":
		dst = &r.method
	case ":scheme":
		dst = &r.scheme
	case ":path":
		dst = &r.path
	case ":authority":
		dst = &r.authority
		r.hasAuthority = true
	default:
		return false
	}
	if *dst != "" || v == "" {
		return false
	}
	*dst = v
	return true
}

// field reads a regular field; false for one that takes the request off
// the fast path.
func (r *h3Request) field(name, v string) bool {
	switch name {
	case "if-none-match":
		if r.inm == "" {
			r.inm = v
		}
	case "accept-encoding":
		if r.ae == "" {
			r.ae = v
		}
	case "host":
		r.host = v
		r.hosts++
	case "content-length", "te", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		return false
	}
	return true
}

// plainPathString is plainPath for a string.
func plainPathString(t string) (string, bool) {
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '/' || c == '.' || c == '-' || c == '_' || c == '~':
		case c == '?':
			return t[:i], true
		default:
			return "", false
		}
	}
	return t, true
}

// validLowerName reports whether a field name is a token in lower case.
func validLowerName(n string) bool {
	for i := 0; i < len(n); i++ {
		if c := n[i]; 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return httpguts.ValidHeaderFieldName(n)
}

// write sends the answer: the HEADERS frame (block, then the Date field),
// the body in a DATA frame, the stream's end; the client's body, if any,
// is refused with STOP_SENDING(H3_NO_ERROR), as quic-go does. inline, it
// queues the answer if the client's window takes it at once, and
// otherwise nothing (h3Later, w.rest nil); of a big body it queues the
// head and leaves the body in w.rest (h3Later).
func (h *H3) write(w *h3work, sc *h3scratch, block, body []byte, inline bool) h3Outcome {
	str := w.str
	date := h3Date.get()
	out := sc.out[:0]
	out = append(out, h3FrameHeaders)
	out = quicvarint.Append(out, uint64(len(block)+len(date)))
	out = append(append(out, block...), date...)
	if len(body) > 0 {
		out = append(out, h3FrameData)
		out = quicvarint.Append(out, uint64(len(body)))
	}
	big := len(body) >= h3BigBody
	if !big {
		out = append(out, body...)
	}
	if cap(out) <= 64<<10 {
		sc.out = out
	}
	if inline {
		if str.TryWriteAll(out) != nil {
			return h3Later
		}
		str.ReleaseStreamCredit() // as quic-go does once it handles a stream
		if big {
			// A worker writes it from the edge's bytes: TryWriteAll
			// would copy it into a buffer of its own.
			w.rest = body
			return h3Later
		}
		h.finish(str, nil)
		return h3Answered
	}
	str.ReleaseStreamCredit()
	if big {
		str.SetWriteDeadline(time.Now().Add(h.cfg.WriteTimeout))
	}
	_, err := str.Write(out)
	if err == nil && big {
		_, err = str.Write(body)
	}
	h.finish(str, err)
	return h3Answered
}

// finish ends an answer: the stream's end, or its reset when writing
// failed; the client's body, if any, is refused.
func (h *H3) finish(str *quic.Stream, err error) {
	str.CancelRead(h3NoError)
	if err != nil {
		str.CancelWrite(h3RequestIncomplete)
		return
	}
	str.Close()
}

// h3Block is the QPACK field section (prefix included) for a head the
// edge prepared, in HTTP/1.1 form: its status and fields, as quic-go's
// response writer sends them from the header map ServeHTTP fills, and a
// content-type field when ctype is set.
func h3Block(head, ctype []byte) []byte {
	var buf bytes.Buffer
	enc := qpack.NewEncoder(&buf)
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	status, _, _ := bytes.Cut(line[len("HTTP/1.1 "):], []byte(" "))
	enc.WriteField(qpack.HeaderField{Name: ":status", Value: string(status)})
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		k, v, _ := bytes.Cut(line, []byte(": "))
		enc.WriteField(qpack.HeaderField{Name: strings.ToLower(string(k)), Value: string(v)})
	}
	if ctype != nil {
		enc.WriteField(qpack.HeaderField{Name: "content-type", Value: string(ctype)})
	}
	return buf.Bytes()
}

// h3Blocks holds the field sections made from the edge's prepared heads,
// keyed by the head's bytes; it is emptied when it holds h3MaxBlocks.
type h3Blocks struct {
	mu sync.RWMutex
	m  map[string][]byte
}

const h3MaxBlocks = 4096

func (b *h3Blocks) get(key []byte, build func() []byte) []byte {
	b.mu.RLock()
	blk, ok := b.m[string(key)]
	b.mu.RUnlock()
	if ok {
		return blk
	}
	blk = build()
	b.mu.Lock()
	if b.m == nil || len(b.m) >= h3MaxBlocks {
		b.m = map[string][]byte{}
	}
	b.m[string(key)] = blk
	b.mu.Unlock()
	return blk
}

// h3Date is the Date field QPACK-encoded, a literal with the static
// table's name, without the field section's prefix.
var h3Date = dateCache{encode: func(date string) []byte {
	var b bytes.Buffer
	enc := qpack.NewEncoder(&b)
	enc.WriteField(qpack.HeaderField{Name: "date", Value: date})
	return b.Bytes()[2:]
}}

// Served is how many connections were served here, and how many requests
// answered from the edge's prepared answers.
func (h *H3) Served() (conns, fast int64) { return h.served.Load(), h.fast.Load() }
