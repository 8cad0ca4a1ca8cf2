package dnsserver

import (
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/miekg/dns"
)

// batchIO reads and writes a UDP socket's datagrams in batches.
type batchIO interface {
	// recv reads one datagram or more, waiting for the first within the
	// socket's read deadline.
	recv() (int, error)
	// packet is the i-th datagram read, its sender, and the control
	// message that sends an answer from the address it was sent to (nil
	// when the socket's own address is the one).
	packet(i int) ([]byte, netip.AddrPort, []byte)
	// reply is the buffer for an answer to the i-th datagram, and queue
	// sends its first n bytes to the sender, at the latest on flush.
	reply(i int) []byte
	queue(i, n int)
	flush()
}

// fastConn is a UDP socket as miekg/dns's server reads it, a
// net.PacketConn. Its ReadFrom reads datagrams in batches and answers
// those that are plain queries with a packed, current answer itself
// (response rate limiting included), in batches too; it returns the
// others, for the server to answer through Server.ServeDNS.
type fastConn struct {
	*net.UDPConn
	s       *Server
	io      batchIO
	n, next int    // datagrams in the batch read, and the next to look at
	key     []byte // scratch
}

func newFastConn(s *Server, c *net.UDPConn) *fastConn {
	return &fastConn{UDPConn: c, s: s, io: newBatchIO(c), key: make([]byte, 0, 264)}
}

// ReadFrom answers datagrams until one needs the server, and returns it.
func (c *fastConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		for c.next < c.n {
			i := c.next
			c.next++
			pkt, from, oob := c.io.packet(i)
			if c.answer(i, pkt, from) {
				continue
			}
			c.io.flush()
			addr := net.UDPAddrFromAddrPort(from)
			if oob != nil {
				return copy(b, pkt), &udpSession{UDPAddr: *addr, oob: append([]byte(nil), oob...)}, nil
			}
			return copy(b, pkt), addr, nil
		}
		c.io.flush()
		c.n, c.next = 0, 0
		n, err := c.io.recv()
		if err != nil {
			return 0, nil, err
		}
		c.n = n
	}
}

// WriteTo sends an answer that the server made, from the address its query
// was sent to.
func (c *fastConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	if s, ok := addr.(*udpSession); ok {
		n, _, err := c.UDPConn.WriteMsgUDP(b, s.oob, &s.UDPAddr)
		return n, err
	}
	return c.UDPConn.WriteTo(b, addr)
}

// udpSession is the address of a client whose query came to a socket bound
// to an address such as 0.0.0.0, with the control message that sends the
// answer from the address the query was sent to.
type udpSession struct {
	net.UDPAddr
	oob []byte
}

// udpAddr is the UDP address of a client, or nil over TCP.
func udpAddr(a net.Addr) *net.UDPAddr {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a
	case *udpSession:
		return &a.UDPAddr
	}
	return nil
}

// answer answers the i-th datagram from its packed answer, or reports
// false when it has none.
func (c *fastConn) answer(i int, pkt []byte, from netip.AddrPort) bool {
	ip := from.Addr()
	v6 := ip.Is6() && !ip.Is4In6()
	k, limit, nameEnd, ok := parseQuery(c.key[:0], pkt, v6)
	if !ok {
		return false
	}
	c.key = k
	p := c.s.packedFor(k, limit, true, v6)
	out := c.io.reply(i)
	var n int
	if p == nil || !p.patch || p.qend-4 != nameEnd || len(p.wire) > len(out) {
		// No answer kept: a name its zone marks absent is answered from
		// the zone's NXDOMAIN template, any other by the server.
		if n, ok = c.s.negative(out, pkt, k, nameEnd, limit); !ok {
			return false
		}
	} else {
		n = copy(out, p.wire)
		copy(out[:2], pkt[:2])
		out[2] = out[2]&^0x01 | pkt[2]&0x01 // RD
		out[3] = out[3]&^0x10 | pkt[3]&0x10 // CD
		copy(out[12:nameEnd], pkt[12:nameEnd])
	}
	switch c.s.limitIP(ip) {
	case drop:
		return true
	case slip:
		n = len(slipAnswer(out[:n], nameEnd+4))
	}
	c.io.queue(i, n)
	return true
}

// parseQuery reads a datagram that is a plain query: one question of
// class IN that is not a zone transfer, no records but an OPT of EDNS
// version 0 without options, and nothing after. It appends the query's
// key (see makeKey) to dst and returns it with the UDP size of the answer
// and the offset after the question name; ok is false for any other
// datagram, which the server reads in full.
func parseQuery(dst, pkt []byte, v6 bool) (key []byte, limit, nameEnd int, ok bool) {
	if len(pkt) < 17 || pkt[2]&0xf8 != 0 { // QR and opcode QUERY
		return nil, 0, 0, false
	}
	be := binary.BigEndian
	if be.Uint16(pkt[4:]) != 1 || be.Uint16(pkt[6:]) != 0 || be.Uint16(pkt[8:]) != 0 || be.Uint16(pkt[10:]) > 1 {
		return nil, 0, 0, false
	}
	off := 12
	for {
		if off >= len(pkt) || off-12 >= 255 {
			return nil, 0, 0, false
		}
		l := int(pkt[off])
		if l == 0 {
			dst = append(dst, 0)
			off++
			break
		}
		if l > 63 || off+1+l > len(pkt) {
			return nil, 0, 0, false
		}
		dst = append(dst, byte(l))
		for _, ch := range pkt[off+1 : off+1+l] {
			if 'A' <= ch && ch <= 'Z' {
				ch += 'a' - 'A'
			}
			dst = append(dst, ch)
		}
		off += 1 + l
	}
	nameEnd = off
	if off-12 > 255 || off+4 > len(pkt) {
		return nil, 0, 0, false
	}
	qtype, class := be.Uint16(pkt[off:]), be.Uint16(pkt[off+2:])
	if class != dns.ClassINET || qtype == dns.TypeAXFR || qtype == dns.TypeIXFR {
		return nil, 0, 0, false
	}
	off += 4
	var flags byte
	limit = dns.MinMsgSize
	if be.Uint16(pkt[10:]) == 1 {
		// OPT: root name, type, UDP size, extended rcode, version, flags,
		// and no options.
		if len(pkt)-off != 11 || pkt[off] != 0 || be.Uint16(pkt[off+1:]) != dns.TypeOPT || pkt[off+6] != 0 || be.Uint16(pkt[off+9:]) != 0 {
			return nil, 0, 0, false
		}
		flags |= keyEDNS
		if pkt[off+7]&0x80 != 0 {
			flags |= keyDO
		}
		limit = min(max(int(be.Uint16(pkt[off+3:])), dns.MinMsgSize), ednsSize)
	} else if off != len(pkt) {
		return nil, 0, 0, false
	}
	if v6 {
		flags |= keyV6
	}
	dst = append(dst, byte(qtype>>8), byte(qtype), flags)
	return dst, limit, nameEnd, true
}
