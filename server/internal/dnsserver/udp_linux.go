//go:build linux && (amd64 || arm64)

package dnsserver

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// UDP sockets per CPU sharing the port (SO_REUSEPORT), the kernel
// spreading clients across them, each read and written with recvmmsg and
// sendmmsg, up to batchSize datagrams a call.

const batchSize = 32

func udpSockets() int { return min(runtime.GOMAXPROCS(0), 16) }

func listenUDP(addr string, n int) ([]*net.UDPConn, error) {
	lc := net.ListenConfig{}
	if n > 1 {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			}); err != nil {
				return err
			}
			return serr
		}
	}
	var conns []*net.UDPConn
	for range n {
		pc, err := lc.ListenPacket(context.Background(), "udp", addr)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return nil, err
		}
		conns = append(conns, pc.(*net.UDPConn))
	}
	return conns, nil
}

func newPacketConn(s *Server, c *net.UDPConn) net.PacketConn { return newFastConn(s, c) }

// mmsghdr is struct mmsghdr: a msghdr and the bytes received or sent.
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
}

type sockaddr [unix.SizeofSockaddrInet6]byte

type mmsgIO struct {
	raw syscall.RawConn
	// pktinfo: on an address such as 0.0.0.0 or ::, each datagram comes
	// with the address it was sent to, and its answer goes from there (as
	// miekg/dns answers through its UDP sessions).
	pktinfo bool
	ctrl    [batchSize][128]byte // room for IPV6_PKTINFO and IP_PKTINFO both
	ctrlLen [batchSize]int       // of the control message that answers from there
	in      [batchSize]mmsghdr
	iovs    [batchSize]unix.Iovec
	bufs    [batchSize][512]byte // as much as miekg/dns's server reads
	names   [batchSize]sockaddr
	outs    [batchSize][ednsSize]byte
	out     [batchSize]mmsghdr
	oiovs   [batchSize]unix.Iovec
	nout    int
}

func newBatchIO(c *net.UDPConn) batchIO {
	raw, err := c.SyscallConn()
	if err != nil {
		panic(err) // a *net.UDPConn always has one
	}
	b := &mmsgIO{raw: raw}
	if a, ok := c.LocalAddr().(*net.UDPAddr); ok && a.IP.IsUnspecified() {
		var e4, e6 error
		raw.Control(func(fd uintptr) {
			e4 = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
			e6 = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
		})
		b.pktinfo = e4 == nil || e6 == nil
	}
	for i := range b.in {
		b.iovs[i].Base = &b.bufs[i][0]
		b.in[i].hdr.Name = &b.names[i][0]
		b.in[i].hdr.Iov = &b.iovs[i]
		b.in[i].hdr.SetIovlen(1)
		b.out[i].hdr.Iov = &b.oiovs[i]
		b.out[i].hdr.SetIovlen(1)
	}
	return b
}

func (b *mmsgIO) recv() (int, error) {
	for i := range b.in {
		b.iovs[i].SetLen(len(b.bufs[i]))
		b.in[i].hdr.Namelen = uint32(len(b.names[i]))
		b.in[i].hdr.Flags = 0
		b.in[i].n = 0
		if b.pktinfo {
			b.in[i].hdr.Control = &b.ctrl[i][0]
			b.in[i].hdr.SetControllen(len(b.ctrl[i]))
		}
	}
	for {
		var n int
		var errno syscall.Errno
		err := b.raw.Read(func(fd uintptr) bool {
			r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.in[0])), batchSize, 0, 0, 0)
			if e == unix.EAGAIN {
				return false
			}
			n, errno = int(r), e
			return true
		})
		if err != nil {
			return 0, err // closed, or past the read deadline
		}
		if errno == 0 && n > 0 {
			for i := range n {
				b.ctrlLen[i] = 0
				if b.pktinfo && b.in[i].hdr.Flags&unix.MSG_CTRUNC == 0 {
					b.ctrlLen[i] = sourceFromPktinfo(b.ctrl[i][:b.in[i].hdr.Controllen])
				}
			}
			return n, nil
		}
		// EINTR, or an error queued on the socket: read again.
	}
}

func (b *mmsgIO) packet(i int) ([]byte, netip.AddrPort, []byte) {
	var oob []byte
	if b.ctrlLen[i] > 0 {
		oob = b.ctrl[i][:b.ctrlLen[i]]
	}
	return b.bufs[i][:b.in[i].n], b.names[i].addrPort(), oob
}

func (b *mmsgIO) reply(i int) []byte { return b.outs[i][:] }

func (b *mmsgIO) queue(i, n int) {
	o := &b.out[b.nout]
	o.hdr.Name = b.in[i].hdr.Name
	o.hdr.Namelen = b.in[i].hdr.Namelen
	o.hdr.Control, o.hdr.Controllen = nil, 0
	if b.ctrlLen[i] > 0 {
		o.hdr.Control = &b.ctrl[i][0]
		o.hdr.SetControllen(b.ctrlLen[i])
	}
	b.oiovs[b.nout].Base = &b.outs[i][0]
	b.oiovs[b.nout].SetLen(n)
	b.nout++
}

func (b *mmsgIO) flush() {
	for sent := 0; sent < b.nout; {
		var n int
		var errno syscall.Errno
		err := b.raw.Write(func(fd uintptr) bool {
			r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.out[sent])), uintptr(b.nout-sent), 0, 0, 0)
			if e == unix.EAGAIN {
				return false
			}
			n, errno = int(r), e
			return true
		})
		if err != nil {
			break // closed
		}
		if errno != 0 || n <= 0 {
			n = 1 // the first failed: leave it out
		}
		sent += n
	}
	b.nout = 0
}

// addrPort reads a struct sockaddr_in or sockaddr_in6.
func (a *sockaddr) addrPort() netip.AddrPort {
	port := uint16(a[2])<<8 | uint16(a[3])
	switch *(*uint16)(unsafe.Pointer(&a[0])) {
	case unix.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[4:8])), port)
	case unix.AF_INET6:
		ip := netip.AddrFrom16([16]byte(a[8:24]))
		if scope := *(*uint32)(unsafe.Pointer(&a[24])); scope != 0 {
			ip = ip.WithZone(strconv.FormatUint(uint64(scope), 10))
		}
		return netip.AddrPortFrom(ip, port)
	}
	return netip.AddrPort{}
}

// sourceFromPktinfo turns the IP_PKTINFO or IPV6_PKTINFO message received
// with a datagram, at the start of ctrl, into the one that sends its answer
// from the address it was sent to, and returns its length, or 0. The
// interface is left to routing, except for an IPv6 link-local address.
func sourceFromPktinfo(ctrl []byte) int {
	const hdr = unix.SizeofCmsghdr
	if len(ctrl) < hdr {
		return 0
	}
	h := (*unix.Cmsghdr)(unsafe.Pointer(&ctrl[0]))
	n := int(h.Len)
	if n < hdr || n > len(ctrl) {
		return 0
	}
	data := ctrl[hdr:n]
	switch {
	case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
		// struct in_pktinfo: ifindex, spec_dst (the source to send from),
		// addr.
		clear(data[:4])
	case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
		// struct in6_pktinfo: addr, ifindex.
		if !netip.AddrFrom16([16]byte(data[:16])).IsLinkLocalUnicast() {
			clear(data[16:20])
		}
	default:
		return 0
	}
	return unix.CmsgSpace(len(data))
}
