package fastpath

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// HTTP/2 over TLS.
//
// A connection whose TLS SNI names a live static site is served here in
// full, by one goroutine, with x/net/http2's Framer and hpack: plain GETs
// and HEADs from the bytes the edge prepared per file (the header block
// encoded once per variant and connection), anything else for that host
// (another method, a body, a path with no file, an ACME challenge) by
// calling Config.Handler in-process with a buffering ResponseWriter. The
// frames answering every request read so far go out in one TLS write. A
// request for another host gets 421 Misdirected Request (RFC 9110,
// 15.5.20): the connection's certificate names only its SNI host, so a
// client retries on a connection of its own, which net/http serves. Any
// other h2 connection (no SNI, the API's host, a process service) goes to
// net/http untouched.

const (
	// h2MaxStreams is the concurrent streams advertised, net/http's
	// default.
	h2MaxStreams = 250
	// h2Flush is the output size at which frames are written even though
	// more requests are buffered.
	h2Flush = 256 << 10
	// h2MaxBuffered bounds the body a handler answers with on this path;
	// the edge's own answers are small pages.
	h2MaxBuffered = 1 << 20
	// h2Window is the flow-control window for request bodies (the
	// protocol's initial one); what a client sends is returned to the
	// connection's window as it arrives and dropped.
	h2Window = 65535
	// h2HandlerChunk is net/http's h2 handler buffer: an answer that fits
	// in it, written before the handler returned, gets a Content-Length.
	h2HandlerChunk = 4 << 10
	// h2ResetBurst and h2ResetRate are a connection's budget of stream
	// resets: the client's RST_STREAMs, and the resets its malformed or
	// excess streams make the server send (CVE-2023-44487's rapid reset,
	// and the server-side variant of 2025). Each costs the server a request
	// parsed and answered for nothing. A connection may spend the burst at
	// once (a browser cancelling a page's streams spends at most
	// h2MaxStreams) and regains h2ResetRate a second; one that overdraws
	// it gets GOAWAY(ENHANCE_YOUR_CALM) and is closed, as nginx and Go's
	// net/http close a connection resetting faster than it is served.
	h2ResetBurst = 2 * h2MaxStreams
	h2ResetRate  = 50
)

// corkConn is the TCP connection under a TLS one: while corked, the
// records the TLS layer writes (one per 16 KiB) are gathered and go out in
// one write when uncorked.
type corkConn struct {
	net.Conn
	corked bool
	buf    []byte
}

func (c *corkConn) Write(p []byte) (int, error) {
	if c.corked {
		if c.buf == nil {
			c.buf = getBuf()
		}
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *corkConn) uncork() error {
	c.corked = false
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	c.buf = c.buf[:0]
	return err
}

// frameBuf is where the Framer writes: the frames of one flush.
type frameBuf []byte

func (b *frameBuf) Write(p []byte) (int, error) {
	if *b == nil {
		*b = getBuf()
	}
	*b = append(*b, p...)
	return len(p), nil
}

// bufPool holds the output buffers of connections that went idle, so that
// a busy server reuses them and an idle one holds none.
var bufPool sync.Pool

func getBuf() []byte {
	if p, ok := bufPool.Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, 64<<10)
}

func putBuf(b []byte) {
	if cap(b) == 0 || cap(b) > 4<<20 {
		return
	}
	bufPool.Put(&b)
}

// h2Host is the host an h2 connection is served for here, or "" when it
// is for net/http.
func (l *Listener) h2Host(tc *tls.Conn) string {
	if l.cfg.Handler == nil {
		return ""
	}
	host := strings.ToLower(tc.ConnectionState().ServerName)
	if host == "" || l.cfg.API(host) || !l.cfg.Edge.Static(context.Background(), host) {
		return ""
	}
	return host
}

type h2stream struct {
	id     uint32
	window int64
	// by is when the answer must have been sent (a write timeout after
	// the request, as net/http has it per stream).
	by   time.Time
	data []byte // body still to send
	// remoteOpen: the client has not ended its side (a body follows).
	remoteOpen bool
}

type h2conn struct {
	l    *Listener
	tc   *tls.Conn
	cork *corkConn
	host string
	br   *bufio.Reader
	fr   *http2.Framer
	out  frameBuf

	// Peer settings and windows.
	connWindow    int64
	initialWindow int64
	maxFrame      uint32
	// recv is what the client sent on the connection's window since it
	// was last returned.
	recv uint32

	streams   map[uint32]*h2stream
	queue     []*h2stream // streams with data to send, in turn
	lastID    uint32
	unacked   bool // our SETTINGS not yet acknowledged
	goingAway bool

	// resets is what is left of the reset budget as of resetAt.
	resets  float64
	resetAt time.Time

	// blocks holds the header blocks made from the edge's prepared heads
	// on this connection, keyed by the head's bytes.
	blocks map[string][]byte
	enc    *hpack.Encoder
	encBuf bytes.Buffer
	hdr    []byte

	readBy, writeBy time.Time
	// lastRequest is when the last request arrived (first, when the
	// connection did), requested whether one did since idle last ran.
	lastRequest time.Time
	requested   bool
	// now is when the connection last waited for the client.
	now time.Time
}

// serveH2 serves an h2 connection until it ends.
func (l *Listener) serveH2(tc *tls.Conn, cork *corkConn, host string, start time.Time) {
	l.h2served.Add(1)
	h := l.newH2Conn(tc, cork, host, start)
	// The preface and the client's SETTINGS are due a header timeout
	// after the connection opened.
	tc.SetReadDeadline(start.Add(l.cfg.HeaderTimeout))
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(h.br, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	h.fr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: h2MaxStreams},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: h.fr.MaxHeaderListSize},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: h2Window},
	)
	first := true
	for {
		if h.br.Buffered() == 0 {
			if err := h.flush(); err != nil {
				return
			}
			if h.goingAway && len(h.streams) == 0 {
				return
			}
			if !first && !h.idle() {
				h.goAway(http2.ErrCodeNo)
				return
			}
		}
		f, err := h.fr.ReadFrame()
		if err != nil {
			if h.readFailed(err) {
				return
			}
			continue
		}
		if first {
			if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() {
				h.goAway(http2.ErrCodeProtocol)
				return
			}
			first = false
		}
		if err := h.frame(f); err != nil {
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				h.goAway(http2.ErrCode(ce))
			} else {
				h.flush()
			}
			return
		}
		for h.pump(); len(h.out) >= h2Flush; h.pump() {
			if err := h.flush(); err != nil {
				return
			}
		}
		if l.isClosed() && !h.goingAway {
			h.goingAway = true
			h.fr.WriteGoAway(h.lastID, http2.ErrCodeNo, nil)
		}
	}
}

// newH2Conn sets a connection up: its framer, and an encoder that uses no
// dynamic table.
func (l *Listener) newH2Conn(tc *tls.Conn, cork *corkConn, host string, start time.Time) *h2conn {
	h := &h2conn{l: l, tc: tc, cork: cork, host: host, br: bufio.NewReaderSize(tc, 16<<10),
		connWindow: 65535, initialWindow: 65535, maxFrame: 16384,
		streams: map[uint32]*h2stream{}, blocks: map[string][]byte{}, unacked: true, lastRequest: start, now: start,
		resets: h2ResetBurst, resetAt: start}
	h.fr = http2.NewFramer(&h.out, h.br)
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	h.fr.MaxHeaderListSize = l.maxHeaderList()
	h.fr.SetReuseFrames()
	h.enc = hpack.NewEncoder(&h.encBuf)
	h.enc.SetMaxDynamicTableSizeLimit(0)
	h.enc.WriteField(hpack.HeaderField{Name: "date"}) // spends the table size update
	h.encBuf.Reset()
	return h
}

// readFailed handles a frame that could not be read: a stream error
// resets that stream, and the connection goes on; a connection error, a
// closing listener or a timeout sends GOAWAY. It says whether the
// connection ends.
func (h *h2conn) readFailed(err error) bool {
	var se http2.StreamError
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &se):
		h.lastID = max(h.lastID, se.StreamID)
		if h.refuse(se.StreamID, se.Code) != nil {
			h.goAway(http2.ErrCodeEnhanceYourCalm)
			return true
		}
		return false
	case errors.As(err, &ce):
		h.goAway(http2.ErrCode(ce))
	case h.l.isClosed() || isTimeout(err):
		h.goAway(http2.ErrCodeNo)
	}
	return true
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// maxHeaderList is the header list size advertised, net/http's for the
// same MaxHeaderBytes (plus 32 bytes for each of ten fields).
func (l *Listener) maxHeaderList() uint32 {
	n := l.cfg.MaxHeaderBytes
	if n <= 0 {
		n = http.DefaultMaxHeaderBytes
	}
	return uint32(n + 10*32)
}

// idle sets the read deadline for the wait ahead: with no stream open, an
// idle timeout after the last request (as net/http, whatever PINGs or
// SETTINGS come meanwhile); with streams waiting for window, an idle
// timeout after the last frame. It also returns the buffers a burst grew.
func (h *h2conn) idle() bool {
	now := time.Now()
	if h.requested {
		h.requested, h.lastRequest = false, now
	}
	h.now = now
	by := now.Add(h.l.cfg.IdleTimeout)
	if len(h.streams) > 0 {
		// Streams the client's windows kept past the write timeout are
		// reset, as net/http resets them; PINGs do not keep them.
		expired := false
		for _, s := range h.streams {
			if now.After(s.by) {
				h.reset(s.id, http2.ErrCodeInternal)
				expired = true
			}
		}
		if expired && h.flush() != nil {
			return false
		}
	}
	if len(h.streams) == 0 {
		by = h.lastRequest.Add(h.l.cfg.IdleTimeout)
		putBuf(h.out)
		h.out = nil
		putBuf(h.cork.buf)
		h.cork.buf = nil
	}
	if d := by.Sub(h.readBy); d > min(time.Second, h.l.cfg.IdleTimeout/4) || d < 0 {
		h.readBy = by
		if h.tc.SetReadDeadline(by) != nil {
			return false
		}
	}
	return !h.l.isClosed()
}

// deadline moves a deadline to now+d when it is more than a second (a
// quarter of d, for short ones) short of that, so that a busy connection
// does not reset timers per flush.
func (h *h2conn) deadline(at *time.Time, d time.Duration, set func(time.Time) error) bool {
	now := time.Now()
	if at.Sub(now) > d-min(time.Second, d/4) {
		return true
	}
	*at = now.Add(d)
	return set(*at) == nil
}

// flush writes every queued frame in one TLS write and one system call.
func (h *h2conn) flush() error {
	if len(h.out) == 0 {
		return nil
	}
	if !h.deadline(&h.writeBy, h.l.cfg.WriteTimeout, h.tc.SetWriteDeadline) {
		return errors.New("deadline")
	}
	h.cork.corked = true
	_, err := h.tc.Write(h.out)
	if uerr := h.cork.uncork(); err == nil {
		err = uerr
	}
	h.out = h.out[:0]
	return err
}

func (h *h2conn) goAway(code http2.ErrCode) {
	h.fr.WriteGoAway(h.lastID, code, nil)
	h.flush()
}

func (h *h2conn) reset(id uint32, code http2.ErrCode) {
	if s := h.streams[id]; s != nil {
		h.drop(s)
	}
	h.fr.WriteRSTStream(id, code)
}

// refuse resets a stream for what the client did, from the connection's
// reset budget; a ConnectionError(ENHANCE_YOUR_CALM) once that is spent.
func (h *h2conn) refuse(id uint32, code http2.ErrCode) error {
	h.reset(id, code)
	return h.spendReset()
}

// spendReset takes one reset from the budget, which regains h2ResetRate a
// second up to h2ResetBurst.
func (h *h2conn) spendReset() error {
	now := time.Now()
	h.resets = min(h2ResetBurst, h.resets+now.Sub(h.resetAt).Seconds()*h2ResetRate)
	h.resetAt = now
	if h.resets < 1 {
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	h.resets--
	return nil
}

func (h *h2conn) drop(s *h2stream) {
	delete(h.streams, s.id)
	s.data = nil
}

// frame handles one frame from the client; an error ends the connection.
func (h *h2conn) frame(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			h.unacked = false
			return nil
		}
		if err := f.ForeachSetting(h.setting); err != nil {
			return err
		}
		return h.fr.WriteSettingsAck()
	case *http2.MetaHeadersFrame:
		return h.headers(f)
	case *http2.DataFrame:
		// Bodies are not read on this path: the window they took is
		// returned and the bytes dropped.
		id := f.Header().StreamID
		if id > h.lastID || id%2 == 0 {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		h.recv += f.Header().Length
		if h.recv >= h2Window/2 {
			h.fr.WriteWindowUpdate(0, h.recv)
			h.recv = 0
		}
		if s := h.streams[id]; s != nil && f.StreamEnded() {
			s.remoteOpen = false
		}
		return nil
	case *http2.WindowUpdateFrame:
		id, n := f.Header().StreamID, int64(f.Increment)
		if id == 0 {
			if h.connWindow+n > 1<<31-1 {
				return http2.ConnectionError(http2.ErrCodeFlowControl)
			}
			h.connWindow += n
			return nil
		}
		if id > h.lastID {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		if s := h.streams[id]; s != nil {
			if s.window+n > 1<<31-1 {
				return h.refuse(id, http2.ErrCodeFlowControl)
			}
			s.window += n
		}
		return nil
	case *http2.RSTStreamFrame:
		id := f.Header().StreamID
		if id > h.lastID {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		if s := h.streams[id]; s != nil {
			h.drop(s)
		}
		return h.spendReset()
	case *http2.PingFrame:
		if !f.IsAck() {
			return h.fr.WritePing(true, f.Data)
		}
		return nil
	case *http2.GoAwayFrame:
		h.goingAway = true
		return nil
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	// PRIORITY and unknown frames are ignored.
	return nil
}

func (h *h2conn) setting(s http2.Setting) error {
	if err := s.Valid(); err != nil {
		return err
	}
	switch s.ID {
	case http2.SettingInitialWindowSize:
		delta := int64(s.Val) - h.initialWindow
		h.initialWindow = int64(s.Val)
		for _, st := range h.streams {
			if st.window+delta > 1<<31-1 {
				return http2.ConnectionError(http2.ErrCodeFlowControl)
			}
			st.window += delta
		}
	case http2.SettingMaxFrameSize:
		h.maxFrame = s.Val
	}
	// The header table size does not matter: answers use no dynamic table.
	return nil
}

// headers starts a request: answered at once, its body (if any) queued.
func (h *h2conn) headers(f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	if open, err := h.openStream(f); !open || err != nil {
		return err
	}
	method, scheme, authority, path := f.PseudoValue("method"), f.PseudoValue("scheme"), f.PseudoValue("authority"), f.PseudoValue("path")
	connect := method == "CONNECT"
	switch {
	case f.PseudoValue("protocol") != "",
		connect && (path != "" || scheme != "" || authority == ""),
		!connect && (method == "" || path == "" || (scheme != "https" && scheme != "http")):
		return h.refuse(id, http2.ErrCodeProtocol)
	}
	rh := scanRequestHeaders(f)
	if authority == "" {
		authority = rh.host
	}
	var u *url.URL
	if connect {
		u = &url.URL{Host: authority}
	} else if pu, err := url.ParseRequestURI(path); err == nil {
		u = pu
	}
	if u == nil || strings.IndexByte(authority, '@') >= 0 && (scheme == "http" || scheme == "https") {
		return h.refuse(id, http2.ErrCodeProtocol)
	}
	body := !f.StreamEnded()
	if h.answeredBadRequest(id, f, &rh, authority, body, method == "HEAD") {
		return nil
	}
	cfg := &h.l.cfg
	if !body && (method == "GET" || method == "HEAD") && (cfg.Reserved == nil || !cfg.Reserved(u.Path)) &&
		h.answerPrepared(id, method, u.Path, rh.ifNoneMatch, rh.acceptEncoding) {
		return nil
	}
	h.handle(id, f, method, authority, u, body)
	return nil
}

// openStream checks a HEADERS frame's stream: trailers end a request
// being answered, a stream over or an even one is an error, and past the
// stream limit (or going away) it is refused. It says whether the frame
// opens a request to answer.
func (h *h2conn) openStream(f *http2.MetaHeadersFrame) (bool, error) {
	id := f.StreamID
	if id%2 == 0 {
		return false, http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if id <= h.lastID {
		// Trailers of a request being answered, or a stream that is over.
		if s := h.streams[id]; s != nil && s.remoteOpen {
			if !f.StreamEnded() {
				return false, h.refuse(id, http2.ErrCodeProtocol)
			}
			s.remoteOpen = false
			return false, nil
		}
		return false, http2.ConnectionError(http2.ErrCodeStreamClosed)
	}
	h.lastID, h.requested = id, true
	if h.goingAway {
		return false, nil
	}
	if len(h.streams) >= h2MaxStreams {
		code := http2.ErrCodeProtocol
		if h.unacked {
			code = http2.ErrCodeRefusedStream
		}
		return false, h.refuse(id, code)
	}
	return true, nil
}

// requestHeaders are the regular headers the fast path reads: the first
// If-None-Match, Accept-Encoding and Host, the first connection-specific
// header as net/http names it, and how many TE headers (2 for any but
// "trailers").
type requestHeaders struct {
	ifNoneMatch, acceptEncoding, host string
	bad                               string
	te                                int
}

func scanRequestHeaders(f *http2.MetaHeadersFrame) requestHeaders {
	var rh requestHeaders
	var inmN, aeN int
	for _, hf := range f.RegularFields() {
		switch hf.Name {
		case "if-none-match":
			if inmN == 0 {
				rh.ifNoneMatch = hf.Value
			}
			inmN++
		case "accept-encoding":
			if aeN == 0 {
				rh.acceptEncoding = hf.Value
			}
			aeN++
		case "host":
			if rh.host == "" {
				rh.host = hf.Value
			}
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
			if rh.bad == "" || connHeaderRank(hf.Name) < connHeaderRank(rh.bad) {
				rh.bad = hf.Name
			}
		case "te":
			rh.te++
			if rh.te > 1 || (hf.Value != "trailers" && hf.Value != "") {
				rh.te = 2
			}
		}
	}
	return rh
}

// answeredBadRequest answers, as net/http's h2 server does, a request
// whose head is too large, carries a connection-specific or bad TE header,
// or names a host this connection is not for. It says whether it did.
func (h *h2conn) answeredBadRequest(id uint32, f *http2.MetaHeadersFrame, rh *requestHeaders, authority string, body, head bool) bool {
	switch {
	case f.Truncated:
		h.respond(id, body, head, http.StatusRequestHeaderFieldsTooLarge, http.Header{}, []byte("<h1>HTTP Error 431</h1><p>Request Header Field(s) Too Large</p>"))
	case rh.bad != "":
		h.respond(id, body, head, http.StatusBadRequest, textHeader(), []byte("request header "+strconv.Quote(http.CanonicalHeaderKey(rh.bad))+" is not valid in HTTP/2\n"))
	case rh.te > 1:
		h.respond(id, body, head, http.StatusBadRequest, textHeader(), []byte(`request header "TE" may only be "trailers" in HTTP/2`+"\n"))
	case !h.forHost(authority):
		h.respond(id, body, head, http.StatusMisdirectedRequest, textHeader(), []byte("misdirected request: open a connection for this host\n"))
	default:
		return false
	}
	return true
}

// textHeader is the header of a plain-text refusal.
func textHeader() http.Header {
	return http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "X-Content-Type-Options": {"nosniff"}}
}

// answerPrepared answers a GET or HEAD from the edge's prepared answers,
// its header block encoded once per head. It says whether it did.
func (h *h2conn) answerPrepared(id uint32, method, path, inm, ae string) bool {
	cfg := &h.l.cfg
	head, data, ok := cfg.Edge.Prepared(context.Background(), h.host, path, inm, ae)
	if !ok {
		return false
	}
	if method == "HEAD" {
		data = nil
	}
	blk, ok := h.blocks[string(head)]
	if !ok {
		// net/http's h2 server keeps the Content-Type of a 304,
		// which the HTTP/1.1 head leaves out: it is the 200's.
		var ctype []byte
		if bytes.HasPrefix(head, []byte("HTTP/1.1 304")) {
			if h200, _, ok := cfg.Edge.Prepared(context.Background(), h.host, path, "", ""); ok {
				ctype = headerLine(h200, "Content-Type")
			}
		}
		blk = h.block(head, ctype)
	}
	h.send(id, blk, data, false)
	return true
}

// connHeaderRank orders the connection-specific headers as net/http looks
// for them, so that its 400 names the same one.
func connHeaderRank(name string) int {
	return strings.Index("connection keep-alive proxy-connection transfer-encoding upgrade", name)
}

// forHost reports whether a request's :authority names the connection's
// host.
func (h *h2conn) forHost(authority string) bool {
	host := authority
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		host = host[:i]
	}
	return strings.EqualFold(strings.TrimSuffix(host, "."), h.host)
}

// handle answers a request through the server's handler, in-process.
func (h *h2conn) handle(id uint32, f *http2.MetaHeadersFrame, method, authority string, u *url.URL, body bool) {
	cfg := &h.l.cfg
	// The host stopped being a static site (relaunched as a process):
	// its answers may stream, which this path does not do.
	if !cfg.Edge.Static(context.Background(), h.host) {
		h.respond(id, body, method == "HEAD", http.StatusMisdirectedRequest,
			http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "X-Content-Type-Options": {"nosniff"}},
			[]byte("misdirected request: open a new connection\n"))
		return
	}
	header := make(http.Header, len(f.Fields))
	for _, hf := range f.RegularFields() {
		if hf.Name == "host" {
			continue
		}
		k := http.CanonicalHeaderKey(hf.Name)
		if k == "Cookie" && len(header[k]) > 0 {
			header[k][0] += "; " + hf.Value
			continue
		}
		header[k] = append(header[k], hf.Value)
	}
	delete(header, "Expect")
	delete(header, "Trailer")
	uri := f.PseudoValue("path")
	if method == "CONNECT" {
		uri = authority
	}
	st := h.tc.ConnectionState()
	r := &http.Request{Method: method, URL: u, Proto: "HTTP/2.0", ProtoMajor: 2, Header: header,
		Host: authority, RequestURI: uri, RemoteAddr: h.tc.RemoteAddr().String(), TLS: &st, Body: http.NoBody}
	if body {
		r.ContentLength = -1
		if cl := header.Get("Content-Length"); cl != "" {
			if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
				r.ContentLength = n
			}
		}
	}
	ctx := context.WithValue(context.Background(), http.LocalAddrContextKey, h.tc.LocalAddr())
	r = r.WithContext(ctx)
	w := &h2writer{header: http.Header{}, head: method == "HEAD"}
	func() {
		defer func() {
			if p := recover(); p != nil && p != http.ErrAbortHandler {
				h.l.cfg.Log.Error("edge fast path: handler panic", "panic", p)
				w.failed = true
			}
		}()
		cfg.Handler.ServeHTTP(w, r)
	}()
	if w.failed {
		h.reset(id, http2.ErrCodeInternal)
		return
	}
	h.respond(id, body, w.head, w.status, w.header, w.buf.Bytes())
}

// h2writer is the ResponseWriter of an in-process answer: it keeps the
// answer, which is framed once the handler returned.
type h2writer struct {
	header       http.Header
	status       int
	buf          bytes.Buffer
	head, failed bool
	wroteHeader  bool
}

func (w *h2writer) Header() http.Header { return w.header }

func (w *h2writer) WriteHeader(code int) {
	if w.wroteHeader || code < 200 {
		return
	}
	w.wroteHeader, w.status = true, code
}

func (w *h2writer) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.buf.Len()+len(p) > h2MaxBuffered {
		w.failed = true
		return 0, errors.New("answer too large for the edge's h2 path")
	}
	return w.buf.Write(p)
}

func bodyAllowed(status int) bool {
	return !(status >= 100 && status <= 199 || status == http.StatusNoContent || status == http.StatusNotModified)
}

// respond frames an in-process answer as net/http's h2 server would: a
// Content-Type sniffed when none is set, a Content-Length when the whole
// body fit in its first chunk, hop-by-hop headers dropped.
func (h *h2conn) respond(id uint32, body, head bool, status int, header http.Header, data []byte) {
	if status == 0 {
		status = http.StatusOK
	}
	if _, ok := header["Content-Type"]; !ok && bodyAllowed(status) && len(data) > 0 && header.Get("Content-Encoding") == "" {
		header.Set("Content-Type", http.DetectContentType(data[:min(len(data), 512)]))
	}
	if _, ok := header["Content-Length"]; !ok && bodyAllowed(status) && len(data) <= h2HandlerChunk && (len(data) > 0 || !head) {
		header.Set("Content-Length", strconv.Itoa(len(data)))
	}
	if !bodyAllowed(status) {
		data = nil
	}
	h.encBuf.Reset()
	h.enc.WriteField(hpack.HeaderField{Name: ":status", Value: strconv.Itoa(status)})
	for k, vv := range header {
		lk := strings.ToLower(k)
		if !httpguts.ValidHeaderFieldName(k) || lk == "connection" || lk == "proxy-connection" || lk == "transfer-encoding" ||
			lk == "upgrade" || lk == "keep-alive" || lk == "date" {
			continue
		}
		for _, v := range vv {
			if httpguts.ValidHeaderFieldValue(v) {
				h.enc.WriteField(hpack.HeaderField{Name: lk, Value: strings.TrimSpace(v)})
			}
		}
	}
	if head {
		data = nil
	}
	h.send(id, h.encBuf.Bytes(), data, body)
}

// headerLine is the value of a header line in an HTTP/1.1 head, or nil.
func headerLine(head []byte, name string) []byte {
	_, rest, _ := bytes.Cut(head, []byte("\r\n"))
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		if k, v, _ := bytes.Cut(line, []byte(": ")); string(k) == name {
			return v
		}
	}
	return nil
}

// block is the header block for a head the edge prepared (status line and
// header lines in HTTP/1.1 form), with a content-type field added when
// ctype is set, made once per connection and head.
func (h *h2conn) block(head, ctype []byte) []byte {
	if len(h.blocks) >= 256 {
		clear(h.blocks)
	}
	h.encBuf.Reset()
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	status, _, _ := bytes.Cut(line[len("HTTP/1.1 "):], []byte(" "))
	h.enc.WriteField(hpack.HeaderField{Name: ":status", Value: string(status)})
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		k, v, _ := bytes.Cut(line, []byte(": "))
		h.enc.WriteField(hpack.HeaderField{Name: strings.ToLower(string(k)), Value: string(v)})
	}
	if ctype != nil {
		h.enc.WriteField(hpack.HeaderField{Name: "content-type", Value: string(ctype)})
	}
	// The line every TLS answer carries (Alt-Svc), as the HTTP/1.1 path
	// adds it.
	if k, v, ok := bytes.Cut(bytes.TrimSuffix(h.l.cfg.TLSHeader, []byte("\r\n")), []byte(": ")); ok {
		h.enc.WriteField(hpack.HeaderField{Name: strings.ToLower(string(k)), Value: string(v)})
	}
	b := bytes.Clone(h.encBuf.Bytes())
	h.blocks[string(head)] = b
	return b
}

// send writes a stream's HEADERS (block, then the Date field) and queues
// its body. remoteOpen: the client still sends a body, which is refused
// with RST_STREAM(NO_ERROR) once the answer is complete, as net/http does.
func (h *h2conn) send(id uint32, block, data []byte, remoteOpen bool) {
	h.hdr = append(append(h.hdr[:0], block...), h2Date.get()...)
	if len(h.hdr) > int(h.maxFrame) {
		h.fr.WriteRSTStream(id, http2.ErrCodeInternal)
		return
	}
	h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.hdr, EndStream: len(data) == 0, EndHeaders: true})
	if len(data) == 0 {
		if remoteOpen {
			h.fr.WriteRSTStream(id, http2.ErrCodeNo)
		}
		return
	}
	s := &h2stream{id: id, window: h.initialWindow, data: data, remoteOpen: remoteOpen, by: h.now.Add(h.l.cfg.WriteTimeout)}
	h.streams[id] = s
	h.queue = append(h.queue, s)
}

// pump writes DATA frames for the queued streams in turn, as far as the
// windows allow.
func (h *h2conn) pump() {
	for len(h.queue) > 0 && h.connWindow > 0 && len(h.out) < h2Flush {
		progress := false
		q := h.queue[:0]
		for _, s := range h.queue {
			if h.streams[s.id] != s || len(s.data) == 0 {
				continue // reset meanwhile
			}
			n := min(int64(len(s.data)), s.window, h.connWindow, int64(h.maxFrame))
			if n > 0 {
				end := n == int64(len(s.data))
				h.fr.WriteData(s.id, end, s.data[:n])
				s.data, s.window, h.connWindow = s.data[n:], s.window-n, h.connWindow-n
				progress = true
				if end {
					if s.remoteOpen {
						h.fr.WriteRSTStream(s.id, http2.ErrCodeNo)
					}
					h.drop(s)
					continue
				}
			}
			q = append(q, s)
		}
		clear(h.queue[len(q):])
		h.queue = q
		if !progress {
			return
		}
	}
}

// h2Date is the Date field hpack-encoded as a literal without indexing.
var h2Date = dateCache{encode: func(date string) []byte {
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	enc.SetMaxDynamicTableSizeLimit(0)
	enc.WriteField(hpack.HeaderField{Name: "date"})
	b.Reset()
	enc.WriteField(hpack.HeaderField{Name: "date", Value: date})
	return b.Bytes()
}}
