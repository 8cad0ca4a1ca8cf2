package clientaddr

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
)

func mustParse(t *testing.T, list ...string) *Trusted {
	t.Helper()
	tr, err := Parse(list)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// The rightmost hop that is not a trusted proxy is the client, over one
// header line or several, IPv4 and IPv6 alike; a hop that does not parse
// stops the walk at the last trusted hop; an untrusted peer's header is
// ignored whatever it says.
func TestResolveRightmostUntrusted(t *testing.T) {
	tr := mustParse(t, "10.0.0.0/8", "2001:db8:1::/48", "127.0.0.1")
	cases := []struct {
		name, peer string
		xff        []string
		want       string
		chain      string
	}{
		{"untrusted peer ignores the header", "198.51.100.7", []string{"1.2.3.4"}, "198.51.100.7", "198.51.100.7"},
		{"untrusted IPv6 peer ignores the header", "2001:db8:2::1", []string{"1.2.3.4"}, "2001:db8:2::1", "2001:db8:2::1"},
		{"trusted peer without a header", "10.1.2.3", nil, "10.1.2.3", "10.1.2.3"},
		{"one hop", "10.1.2.3", []string{"203.0.113.5"}, "203.0.113.5", "203.0.113.5, 10.1.2.3"},
		{"forged left of the client", "10.1.2.3", []string{"6.6.6.6, 203.0.113.5"}, "203.0.113.5", "203.0.113.5, 10.1.2.3"},
		{"trusted hops skipped", "127.0.0.1", []string{"203.0.113.5, 10.9.9.9, 10.8.8.8"}, "203.0.113.5", "203.0.113.5, 10.9.9.9, 10.8.8.8, 127.0.0.1"},
		{"several header lines join in order", "10.1.2.3", []string{"6.6.6.6, 203.0.113.5", "10.7.7.7"}, "203.0.113.5", "203.0.113.5, 10.7.7.7, 10.1.2.3"},
		{"last line's untrusted hop wins", "10.1.2.3", []string{"203.0.113.5", "198.51.100.9"}, "198.51.100.9", "198.51.100.9, 10.1.2.3"},
		{"IPv6 client", "2001:db8:1::2", []string{"2001:db8:99::5"}, "2001:db8:99::5", "2001:db8:99::5, 2001:db8:1::2"},
		{"IPv6 with brackets and port", "10.1.2.3", []string{"[2001:db8:99::5]:4711"}, "2001:db8:99::5", "2001:db8:99::5, 10.1.2.3"},
		{"IPv6 in brackets", "10.1.2.3", []string{"[2001:db8:99::5]"}, "2001:db8:99::5", "2001:db8:99::5, 10.1.2.3"},
		{"IPv4 with a port", "10.1.2.3", []string{"203.0.113.5:8080"}, "203.0.113.5", "203.0.113.5, 10.1.2.3"},
		{"IPv4-mapped peer and hop", "::ffff:10.1.2.3", []string{"::ffff:203.0.113.5"}, "203.0.113.5", "203.0.113.5, 10.1.2.3"},
		{"malformed rightmost hop", "10.1.2.3", []string{"203.0.113.5, not-an-ip"}, "10.1.2.3", "10.1.2.3"},
		{"malformed behind a trusted hop", "10.1.2.3", []string{"garbage, 10.5.5.5"}, "10.5.5.5", "10.5.5.5, 10.1.2.3"},
		{"unknown", "10.1.2.3", []string{"unknown"}, "10.1.2.3", "10.1.2.3"},
		{"empty value", "10.1.2.3", []string{""}, "10.1.2.3", "10.1.2.3"},
		{"empty hop", "10.1.2.3", []string{"203.0.113.5, , 10.5.5.5"}, "10.5.5.5", "10.5.5.5, 10.1.2.3"},
		{"every hop trusted", "10.1.2.3", []string{"10.4.4.4, 10.5.5.5"}, "10.4.4.4", "10.4.4.4, 10.5.5.5, 10.1.2.3"},
		{"zone dropped", "10.1.2.3", []string{"fe80::1%eth0"}, "fe80::1", "fe80::1, 10.1.2.3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			peer := netip.MustParseAddr(c.peer)
			got, _ := tr.Resolve(peer, c.xff)
			if got.String() != c.want {
				t.Errorf("client %s, want %s", got, c.want)
			}
			if ch := tr.Chain(peer, c.xff); ch != c.chain {
				t.Errorf("chain %q, want %q", ch, c.chain)
			}
		})
	}
}

// With no trusted proxy nothing is read from the header.
func TestNoTrustedProxies(t *testing.T) {
	tr := mustParse(t, "", " ")
	if tr != nil {
		t.Fatalf("an empty list trusts %s", tr)
	}
	peer := netip.MustParseAddr("10.1.2.3")
	if got, _ := tr.Resolve(peer, []string{"203.0.113.5"}); got != peer {
		t.Fatalf("client %s, want the peer", got)
	}
	if _, err := Parse([]string{"10.0.0.0/33"}); err == nil {
		t.Fatal("a bad prefix parsed")
	}
	if _, err := Parse([]string{"example.com"}); err == nil {
		t.Fatal("a name parsed as a trusted proxy")
	}
}

// The middleware resolves once; Of and ForwardedFor answer from it, and
// without it from RemoteAddr.
func TestMiddleware(t *testing.T) {
	tr := mustParse(t, "127.0.0.0/8")
	var client, fwd, remote string
	h := Middleware(tr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client, fwd, remote = Of(r), ForwardedFor(r), RemoteAddr(r)
	}))
	for _, c := range []struct{ remote, xff, client, fwd string }{
		{"127.0.0.1:5000", "203.0.113.5", "203.0.113.5", "203.0.113.5, 127.0.0.1"},
		{"[::1]:5000", "203.0.113.5", "::1", "::1"},
		{"198.51.100.1:5000", "203.0.113.5", "198.51.100.1", "198.51.100.1"},
		{"127.0.0.1:5000", "", "127.0.0.1", "127.0.0.1"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		if remote != net.JoinHostPort(c.client, "5000") {
			t.Errorf("from %s with %q: RemoteAddr %q", c.remote, c.xff, remote)
		}
		if client != c.client || fwd != c.fwd {
			t.Errorf("from %s with %q: client %q, forwarded %q; want %q, %q", c.remote, c.xff, client, fwd, c.client, c.fwd)
		}
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.1:80"
	if Of(r) != "192.0.2.1" || ForwardedFor(r) != "192.0.2.1" {
		t.Fatalf("without the middleware: %q %q", Of(r), ForwardedFor(r))
	}
}

// A PROXY v2 header sets the connection's address when the peer is a
// trusted proxy; from any other peer the header is not read as one and
// the bytes reach the server as they came.
func TestListenHonoursProxyHeadersFromTrustedPeersOnly(t *testing.T) {
	for _, c := range []struct {
		name, trusted string
		honoured      bool
	}{{"trusted", "127.0.0.0/8", true}, {"untrusted", "10.0.0.0/8", false}} {
		t.Run(c.name, func(t *testing.T) {
			raw, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln := mustParse(t, c.trusted).Listen(raw, 2*time.Second)
			defer ln.Close()
			hdr := proxyproto.HeaderProxyFromAddrs(2, &net.TCPAddr{IP: net.ParseIP("203.0.113.9"), Port: 4444}, raw.Addr())
			var sent bytes.Buffer
			hdr.WriteTo(&sent)
			sent.WriteString("hello")
			go func() {
				c, err := net.Dial("tcp", raw.Addr().String())
				if err != nil {
					return
				}
				c.Write(sent.Bytes())
				c.Close()
			}()
			conn, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			got, _ := io.ReadAll(conn)
			peer := PeerOfConn(conn)
			if c.honoured {
				if peer.String() != "203.0.113.9" || string(got) != "hello" {
					t.Fatalf("trusted peer: address %s, read %q", peer, got)
				}
				return
			}
			if peer.String() != "127.0.0.1" || !bytes.Equal(got, sent.Bytes()) {
				t.Fatalf("untrusted peer: address %s, read %q (want the header passed through)", peer, got)
			}
		})
	}
}
