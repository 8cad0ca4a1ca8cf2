//go:build !(linux && (amd64 || arm64))

package dnsserver

import (
	"net"
	"net/netip"
)

// One UDP socket, read and written a datagram at a time.

func udpSockets() int { return 1 }

func listenUDP(addr string, _ int) ([]*net.UDPConn, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	return []*net.UDPConn{pc.(*net.UDPConn)}, nil
}

// newPacketConn: on an address such as 0.0.0.0, miekg/dns's own UDP
// sessions, which answer from the address each query was sent to.
func newPacketConn(s *Server, c *net.UDPConn) net.PacketConn {
	if a, ok := c.LocalAddr().(*net.UDPAddr); ok && a.IP.IsUnspecified() {
		return c
	}
	return newFastConn(s, c)
}

type singleIO struct {
	c       *net.UDPConn
	in, out []byte
	n       int
	from    netip.AddrPort
}

func newBatchIO(c *net.UDPConn) batchIO {
	return &singleIO{c: c, in: make([]byte, 512), out: make([]byte, ednsSize)}
}

func (s *singleIO) recv() (int, error) {
	n, from, err := s.c.ReadFromUDPAddrPort(s.in)
	if err != nil {
		return 0, err
	}
	s.n, s.from = n, from
	return 1, nil
}

func (s *singleIO) packet(int) ([]byte, netip.AddrPort, []byte) { return s.in[:s.n], s.from, nil }
func (s *singleIO) reply(int) []byte                            { return s.out }
func (s *singleIO) queue(_, n int)                              { s.c.WriteToUDPAddrPort(s.out[:n], s.from) }
func (s *singleIO) flush()                                      {}
