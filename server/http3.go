package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/pierhq/pier/server/internal/edge/fastpath"
)

// http3Off is the --http3-addr value that serves no HTTP/3.
const http3Off = "off"

// maxH3Streams bounds the requests a client may have open at once on one
// HTTP/3 connection: net/http's HTTP/2 default (MaxConcurrentStreams).
const maxH3Streams = 250

// maxH3Conns bounds the HTTP/3 connections open at once. A connection
// past it is closed at once with H3_EXCESSIVE_LOAD; the client falls back
// to HTTP/2 over TCP, whose connections the header and idle timeouts bound.
const maxH3Conns = 4096

// maxH3ConnsPerSource bounds the QUIC connections, handshakes included,
// one source holds at once: an IPv4 address, or an IPv6 /64 (one
// subscriber's prefix, whose addresses a client may change at will). One
// source once held over 4,000 idle connections, all of the global cap. A
// connection past it is refused before its handshake (CONNECTION_REFUSED),
// and the client falls back to HTTP/2 over TCP, so a NAT shared by many
// people loses HTTP/3 only, never the sites.
const maxH3ConnsPerSource = 128

// altSvcMaxAge is how long, in seconds, a client may remember the HTTP/3
// endpoint.
const altSvcMaxAge = 86400

// h3Listener is the HTTP/3 listener: a UDP socket and, once serving, the
// quic-go server on it. A nil *h3Listener is HTTP/3 turned off.
type h3Listener struct {
	conn net.PacketConn
	srv  *http3.Server
	// fast, when set, serves the connections for static sites itself
	// (fastpath.H3) and hands srv the others.
	fast *fastpath.H3
	// altSvc is the Alt-Svc value that announces it, as a header map
	// holds it.
	altSvc []string
}

// listenTLS binds the HTTPS listener and, unless h3Addr is "off", the
// HTTP/3 listener's UDP socket: when h3Addr is empty, on the HTTPS
// listener's host and port, so that Alt-Svc names the port the client
// already uses. When the HTTPS port is ephemeral and the same UDP port is
// taken, both are bound again.
func listenTLS(httpsAddr, h3Addr string) (net.Listener, *h3Listener, error) {
	_, port, _ := net.SplitHostPort(httpsAddr)
	for attempt := 0; ; attempt++ {
		ln, err := net.Listen("tcp", httpsAddr)
		if err != nil {
			return nil, nil, fmt.Errorf("listen %s: %w", httpsAddr, err)
		}
		addr := h3Addr
		switch addr {
		case http3Off:
			return ln, nil, nil
		case "":
			addr = ln.Addr().String()
		}
		pc, err := net.ListenPacket("udp", addr)
		if err == nil {
			_, p, _ := net.SplitHostPort(pc.LocalAddr().String())
			return ln, &h3Listener{conn: pc, altSvc: []string{`h3=":` + p + `"; ma=` + strconv.Itoa(altSvcMaxAge)}}, nil
		}
		ln.Close()
		if h3Addr != "" || port != "0" || attempt == 9 {
			return nil, nil, fmt.Errorf("listen http3 udp %s: %w", addr, err)
		}
	}
}

// HTTP3Addr is the bound HTTP/3 (UDP) address, empty when HTTP/3 is off.
func (s *Server) HTTP3Addr() string {
	if s.launch.h3 == nil {
		return ""
	}
	return s.launch.h3.conn.LocalAddr().String()
}

// headerLine is the Alt-Svc header line (CRLF included) the edge's fast
// path adds to its answers over TLS; nil when HTTP/3 is off.
func (h *h3Listener) headerLine() []byte {
	if h == nil {
		return nil
	}
	return []byte("Alt-Svc: " + h.altSvc[0] + "\r\n")
}

// serve serves handler over HTTP/3 with the HTTPS listener's certificates
// (getCert) and the listeners' bounds: the handshake within the header
// timeout, a connection closed after the idle timeout without requests, at
// most maxH3Streams requests in flight per connection, request heads
// within MaxHeaderBytes, and each request's body read and answer written
// within the read and write timeouts. fast, when set, is the edge's fast
// path's configuration: connections for static sites are served by it.
func (h *h3Listener) serve(handler http.Handler, getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error), lim ListenLimits, log *slog.Logger, fast *fastpath.Config) {
	if h == nil {
		return
	}
	h.srv = &http3.Server{
		Handler: withDeadlines(handler, lim.ReadTimeout, lim.WriteTimeout),
		// QUIC is TLS 1.3; Serve sets the ALPN to h3.
		TLSConfig: &tls.Config{GetCertificate: getCert, MinVersion: tls.VersionTLS13},
		QUICConfig: &quic.Config{
			HandshakeIdleTimeout: lim.HeaderTimeout,
			MaxIdleTimeout:       lim.IdleTimeout,
			MaxIncomingStreams:   maxH3Streams,
		},
		MaxHeaderBytes: lim.MaxHeaderBytes,
		IdleTimeout:    lim.IdleTimeout,
		Logger:         log,
	}
	sources := &sourceLimiter{max: maxH3ConnsPerSource}
	tr := &quic.Transport{Conn: h.conn, ConnContext: sources.connContext, VerifySourceAddress: sources.mustVerify}
	ln, err := tr.ListenEarly(http3.ConfigureTLSConfig(h.srv.TLSConfig), h.srv.QUICConfig)
	if err != nil {
		log.Error("http3 listener not started", "err", err)
		return
	}
	capped := &cappedListener{QUICListener: ln, max: maxH3Conns}
	serve := func() error { return h.srv.ServeListener(capped) }
	if fast != nil {
		h.fast = fastpath.NewH3(*fast, h.srv)
		serve = func() error { return h.fast.Serve(capped) }
	}
	go func() {
		if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http3 listener stopped", "err", err)
		}
	}()
}

// cappedListener hands out at most max connections open at once, closing
// any past it as soon as it is accepted.
type cappedListener struct {
	http3.QUICListener
	max  int64
	open atomic.Int64
}

// h3ExcessiveLoad is HTTP/3's H3_EXCESSIVE_LOAD error code (RFC 9114).
const h3ExcessiveLoad = 0x0107

func (l *cappedListener) Accept(ctx context.Context) (*quic.Conn, error) {
	for {
		c, err := l.QUICListener.Accept(ctx)
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			c.CloseWithError(h3ExcessiveLoad, "too many connections")
			continue
		}
		go func() {
			<-c.Context().Done()
			l.open.Add(-1)
		}()
		return c, nil
	}
}

// sourceLimiter counts the QUIC connections each source holds, from the
// first Initial packet to the connection's end, and refuses one past max.
// The address on an Initial may be spoofed: once a source holds half its
// allowance, its new connections must first prove the address with a
// Retry round trip (RFC 9000, 8.1.2), so a spoofed flood cannot take a real
// source's whole allowance, and what it takes lasts a handshake timeout.
type sourceLimiter struct {
	max  int
	mu   sync.Mutex
	open map[netip.Prefix]int
}

// sourceOf is the source a connection counts against: the IPv4 address
// (an IPv4-mapped IPv6 one included), or the IPv6 /64.
func sourceOf(addr net.Addr) netip.Prefix {
	var ap netip.AddrPort
	if u, ok := addr.(*net.UDPAddr); ok {
		ap = u.AddrPort()
	} else if p, err := netip.ParseAddrPort(addr.String()); err == nil {
		ap = p
	}
	ip := ap.Addr().Unmap()
	if ip.Is4() {
		return netip.PrefixFrom(ip, 32)
	}
	p, _ := ip.Prefix(64)
	return p
}

// errSourceBusy refuses a connection past its source's allowance.
var errSourceBusy = errors.New("http3: this source holds too many connections")

// connContext is the quic.Transport's ConnContext: it counts the
// connection against its source until the connection's context ends.
func (s *sourceLimiter) connContext(ctx context.Context, info *quic.ClientInfo) (context.Context, error) {
	src := sourceOf(info.RemoteAddr)
	s.mu.Lock()
	if s.open == nil {
		s.open = map[netip.Prefix]int{}
	}
	if s.open[src] >= s.max {
		s.mu.Unlock()
		return nil, errSourceBusy
	}
	s.open[src]++
	s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		if s.open[src]--; s.open[src] <= 0 {
			delete(s.open, src)
		}
		s.mu.Unlock()
	})
	return ctx, nil
}

// mustVerify is the quic.Transport's VerifySourceAddress: a source past
// half its allowance must prove its address before it gets another.
func (s *sourceLimiter) mustVerify(addr net.Addr) bool {
	src := sourceOf(addr)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[src] >= s.max/2
}

// held is the number of connections src holds.
func (s *sourceLimiter) held(src netip.Prefix) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[src]
}

// stop sends every HTTP/3 connection GOAWAY, waits for its requests until
// ctx ends, then closes the connections and the socket.
func (h *h3Listener) stop(ctx context.Context) error {
	if h == nil {
		return nil
	}
	var err error
	if h.fast != nil {
		err = h.fast.Shutdown(ctx)
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			err = nil
		}
	} else if h.srv != nil {
		err = h.srv.Shutdown(ctx)
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			err = nil // Shutdown closed what was still open, as net/http's Close would
		}
	}
	h.close()
	return err
}

// close closes the socket (when the other listeners fail to bind, or
// after stop).
func (h *h3Listener) close() {
	if h != nil {
		h.conn.Close()
	}
}

// withDeadlines gives each HTTP/3 request the read and write deadlines
// net/http gives an HTTP/1.1 or HTTP/2 one (ReadTimeout, WriteTimeout).
func withDeadlines(h http.Handler, read, write time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		now := time.Now()
		if read > 0 {
			_ = rc.SetReadDeadline(now.Add(read))
		}
		if write > 0 {
			_ = rc.SetWriteDeadline(now.Add(write))
		}
		h.ServeHTTP(w, r)
	})
}
