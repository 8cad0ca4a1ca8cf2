package edge

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pierhq/pier/server/internal/clientaddr"
)

// upstreamDial dials a version's address; see SetUpstreamDialer.
var upstreamDial atomic.Pointer[func(ctx context.Context, network, addr string) (net.Conn, error)]

func init() {
	d := (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	upstreamDial.Store(&d)
}

// SetUpstreamDialer sets how the edge (the ReverseProxy and the fast
// path's forwarder) connects to the processes it proxies to: the server
// hands it the runner's, which reaches a sandboxed version from inside its
// network namespace.
func SetUpstreamDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) {
	upstreamDial.Store(&dial)
}

// DialUpstream connects to a process the edge proxies to.
func DialUpstream(ctx context.Context, network, addr string) (net.Conn, error) {
	return (*upstreamDial.Load())(ctx, network, addr)
}

// upstreams is the one transport to every process the edge proxies to:
// connections to a version are kept and reused across requests.
var upstreams = &http.Transport{
	Proxy:                 nil,
	DialContext:           DialUpstream,
	MaxIdleConns:          4096,
	MaxIdleConnsPerHost:   512,
	IdleConnTimeout:       90 * time.Second,
	ResponseHeaderTimeout: 5 * time.Minute,
	ExpectContinueTimeout: time.Second,
	// The process decides its own encoding; the edge passes it through.
	DisableCompression: true,
	ForceAttemptHTTP2:  false,
}

// proxyTo forwards requests to a process answering at addr (host:port):
// the Host the client asked for is kept, X-Forwarded-For, -Host and -Proto
// say who asked and how, bodies stream both ways, and WebSocket upgrades
// pass through.
//
// The listener's fast path forwards simple HTTP/1.1 requests itself
// (fastpath/forward.go) and must send and answer what this does: a change
// here needs the same change there, and fastpath's
// TestForwardMatchesReverseProxy compares the two.
func (e *Edge) proxyTo(addr string) http.Handler {
	target := &url.URL{Scheme: "http", Host: addr}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
			// From a trusted proxy the chain it was sent is kept, the
			// peer appended; else the peer alone.
			pr.Out.Header.Set("X-Forwarded-For", clientaddr.ForwardedFor(pr.In))
		},
		Transport:     upstreams,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			e.log.Warn("edge: proxying", "host", r.Host, "upstream", addr, "err", err)
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("Retry-After", "2")
			msg := "the service did not answer; retry shortly"
			if strings.Contains(err.Error(), "timeout") {
				msg = "the service did not answer in time"
			}
			http.Error(w, msg, http.StatusBadGateway)
		},
	}
}
