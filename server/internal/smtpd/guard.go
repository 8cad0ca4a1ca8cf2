package smtpd

import (
	"crypto/tls"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"
)

// networkOf is the network a source is counted and rate-limited by: its
// /24 for IPv4, its /64 for IPv6. A sender that holds many addresses of
// one network gets one allowance, not one per address.
func networkOf(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	bits := 64
	if a.Is4() {
		bits = 24
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return netip.Prefix{}
	}
	return p
}

func addrOf(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(ta.IP)
		return ip.Unmap()
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap.Addr().Unmap()
}

// guard admits connections within the session caps, in total and per
// network (Postfix's smtpd_client_connection_count_limit), and refuses
// the rest with a 421 before go-smtp starts a session for them.
type guard struct {
	net.Listener
	s *Server
}

func (g guard) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		n := networkOf(addrOf(c.RemoteAddr()))
		if g.s.admit(n) {
			return &conn{Conn: c, s: g.s, network: n}, nil
		}
		// A fresh connection's send buffer is empty: this write does not
		// wait on the peer.
		c.SetWriteDeadline(time.Now().Add(time.Second))
		io.WriteString(c, "421 4.7.0 "+g.s.cfg.Hostname+" Too many sessions from your network; try again later\r\n")
		c.Close()
	}
}

// admit counts a new session of network n, or says there is no room.
func (s *Server) admit(n netip.Prefix) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open >= s.cfg.Sessions || s.byNetwork[n] >= s.cfg.NetworkSessions {
		return false
	}
	s.open++
	s.byNetwork[n]++
	return true
}

func (s *Server) release(n netip.Prefix) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open--
	if s.byNetwork[n]--; s.byNetwork[n] <= 0 {
		delete(s.byNetwork, n)
	}
}

// Sessions is how many sessions are open.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open
}

// conn is an admitted connection. It keeps what a session may spend
// across STARTTLS (which starts a new go-smtp session on the same
// connection): the recipients it named and the hard errors it was given.
// After its session answers 421 it hangs up, as RFC 5321 §3.8 has it,
// once that answer is written.
type conn struct {
	net.Conn
	s       *Server
	network netip.Prefix
	once    sync.Once
	hangUp  atomic.Bool

	mu         sync.Mutex
	recipients int
	hardErrors int
}

func (c *conn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if c.hangUp.Load() {
		c.Close()
	}
	return n, err
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.s.release(c.network) })
	return err
}

// connOf finds the admitted connection under a session, beneath TLS when
// the session started after STARTTLS.
func (s *Server) connOf(c *smtp.Conn) *conn {
	nc := c.Conn()
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	if gc, ok := nc.(*conn); ok {
		return gc
	}
	// Not from Serve's listener: the limits still count, and there is no
	// admission to give back.
	return &conn{s: s, network: networkOf(addrOf(nc.RemoteAddr()))}
}

// recipient counts one RCPT command; false once the session has named more
// than its limit.
func (c *conn) recipient() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recipients++
	return c.recipients <= c.s.cfg.SessionRecipients
}

// hardError counts a 5xx answer; false once the session has had its limit.
func (c *conn) hardError() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hardErrors++
	return c.hardErrors < c.s.cfg.HardErrors
}
