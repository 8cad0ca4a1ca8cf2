// Package clientaddr resolves who is calling: the TCP peer, or, when the
// peer is a proxy the operator trusts (--trusted-proxies), the client that
// proxy speaks for. It is the one place that reads X-Forwarded-For, as
// nginx's real_ip module does with real_ip_recursive on: walking the
// header from the right, the first hop that is not itself a trusted proxy
// is the client. A PROXY protocol header (read below the HTTP server, by
// the listener Wrap builds) has already replaced the peer when this runs,
// and is honoured only from a trusted peer too.
//
// Rate limits, signup limits, the anonymous caller that idempotency keys
// are scoped to and the request log all use the address resolved here; a request from an untrusted peer resolves to
// that peer whatever headers it sends.
package clientaddr

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Trusted is the set of proxies whose word on the client is taken. A nil
// *Trusted trusts none: every caller is its TCP peer.
type Trusted struct {
	prefixes []netip.Prefix
}

// Parse reads a list of CIDR prefixes or single addresses, such as
// "127.0.0.1/32,10.0.0.0/8,::1". An empty list answers nil.
func Parse(list []string) (*Trusted, error) {
	var t Trusted
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("trusted proxy %q is neither a CIDR prefix nor an address", s)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		t.prefixes = append(t.prefixes, p.Masked())
	}
	if len(t.prefixes) == 0 {
		return nil, nil
	}
	return &t, nil
}

// Contains reports whether a is a trusted proxy.
func (t *Trusted) Contains(a netip.Addr) bool {
	if t == nil || !a.IsValid() {
		return false
	}
	a = a.Unmap().WithZone("")
	for _, p := range t.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// String lists the prefixes, for logs.
func (t *Trusted) String() string {
	if t == nil {
		return ""
	}
	s := make([]string, len(t.prefixes))
	for i, p := range t.prefixes {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// Resolve answers the client of a request from peer that carried the
// X-Forwarded-For values xff (each header line's value, in order): the
// peer itself unless it is trusted; else the rightmost hop of the header
// that is not a trusted proxy. A hop that does not parse ends the walk,
// as it does in nginx: the client is then the last trusted hop before
// it. When every hop is trusted the leftmost is the client. first is the
// index, counting hops from the left over all values, of the resolved
// client, or -1 when it is the peer: Chain uses it.
func (t *Trusted) Resolve(peer netip.Addr, xff []string) (client netip.Addr, first int) {
	peer = peer.Unmap().WithZone("")
	if !t.Contains(peer) || len(xff) == 0 {
		return peer, -1
	}
	hops := splitHops(xff)
	client, first = peer, -1
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := ParseHop(hops[i])
		if !ok {
			break
		}
		client, first = a, i
		if !t.Contains(a) {
			break
		}
	}
	return client, first
}

// Chain is the X-Forwarded-For to send upstream for a request from peer
// that carried xff: from an untrusted peer the peer alone (what it claimed
// is dropped); from a trusted one the hops from the resolved client on,
// every one after it a trusted proxy, then the peer.
func (t *Trusted) Chain(peer netip.Addr, xff []string) string {
	peer = peer.Unmap().WithZone("")
	_, first := t.Resolve(peer, xff)
	if first < 0 {
		return peer.String()
	}
	hops := splitHops(xff)[first:]
	var b strings.Builder
	for _, h := range hops {
		a, _ := ParseHop(h)
		b.WriteString(a.String())
		b.WriteString(", ")
	}
	b.WriteString(peer.String())
	return b.String()
}

// splitHops splits X-Forwarded-For values into their comma-separated
// hops, in order, as several header lines join into one list (RFC 9110
// §5.3).
func splitHops(xff []string) []string {
	var hops []string
	for _, v := range xff {
		for h := range strings.SplitSeq(v, ",") {
			hops = append(hops, strings.TrimSpace(h))
		}
	}
	return hops
}

// ParseHop reads one X-Forwarded-For hop: an IPv4 or IPv6 address, with
// a port or IPv6 brackets as some proxies write them. Names, "unknown"
// and obfuscated identifiers do not parse.
func ParseHop(h string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if ap, err := netip.ParseAddrPort(h); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		if a, err := netip.ParseAddr(h[1 : len(h)-1]); err == nil && a.Is6() {
			return a.Unmap().WithZone(""), true
		}
	}
	return netip.Addr{}, false
}

// PeerOf reads the address of a host:port (or a bare address), such as
// net/http's RemoteAddr; the zero Addr when it is neither.
func PeerOf(remote string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	if a, err := netip.ParseAddr(remote); err == nil {
		return a.Unmap().WithZone("")
	}
	return netip.Addr{}
}

// PeerOfConn is PeerOf a connection's remote address.
func PeerOfConn(c net.Conn) netip.Addr {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return tcpAddr(ta)
	}
	return PeerOf(c.RemoteAddr().String())
}

func tcpAddr(ta *net.TCPAddr) netip.Addr {
	a, _ := netip.AddrFromSlice(ta.IP)
	return a.Unmap()
}

type ctxKey struct{}

// resolved is what Middleware keeps of a request from a trusted proxy.
type resolved struct {
	// client is the resolved client; chain the X-Forwarded-For to pass
	// on (Chain).
	client, chain string
}

// Middleware resolves each request's client once, before next sees it:
// Of answers it from the request's context. With no trusted proxy it
// adds nothing, and Of reads RemoteAddr.
func Middleware(t *Trusted, next http.Handler) http.Handler {
	if t == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer := PeerOf(r.RemoteAddr)
		if !t.Contains(peer) {
			next.ServeHTTP(w, r)
			return
		}
		xff := r.Header.Values("X-Forwarded-For")
		client, _ := t.Resolve(peer, xff)
		v := resolved{client: client.String(), chain: t.Chain(peer, xff)}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, v)))
	})
}

// Of is the request's client address, without a port: the one
// Middleware resolved, else RemoteAddr's host.
func Of(r *http.Request) string {
	if v, ok := r.Context().Value(ctxKey{}).(resolved); ok {
		return v.client
	}
	return peerHost(r)
}

// RemoteAddr is r.RemoteAddr with the resolved client for its host, for
// a request made on r's behalf (an MCP tool call's REST request).
func RemoteAddr(r *http.Request) string {
	v, ok := r.Context().Value(ctxKey{}).(resolved)
	if !ok {
		return r.RemoteAddr
	}
	_, port, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		port = "0"
	}
	return net.JoinHostPort(v.client, port)
}

// ForwardedFor is the X-Forwarded-For a proxy sends upstream for r: the
// trusted chain from the resolved client on, then the peer, when the
// peer is a trusted proxy (Chain); else the peer alone, so that what an
// untrusted caller claimed is not passed on.
func ForwardedFor(r *http.Request) string {
	if v, ok := r.Context().Value(ctxKey{}).(resolved); ok {
		return v.chain
	}
	return peerHost(r)
}

func peerHost(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
