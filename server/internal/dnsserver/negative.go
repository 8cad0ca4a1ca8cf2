package dnsserver

import (
	"bytes"
	"encoding/binary"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Negative answers on the fast path. A name that a zone version marks
// absent (zoneVersion.absent) is NXDOMAIN whatever its labels, so random
// names under a zone, asked once each (a "water torture" flood), would
// each be unpacked, looked up and packed by the server. Instead each zone
// version keeps, per EDNS and DO flags, its NXDOMAIN answer packed for a
// sample question, and the batch reader writes a query's answer from it:
// the query's header and question, then the template's authority and
// OPT, with each compression pointer into the question's apex moved by the
// difference in length between the two questions. The bytes are those
// ServeDNS packs (TestNegativeAnswersMatchServeDNS).
type nxTemplate struct {
	wire    []byte
	apexOff int // where the apex starts in the sample question
	qend    int // the offset after the sample question
	// ptrs are the offsets in wire of compression pointers at or past
	// apexOff, with their targets.
	ptrs, targets []int
	// guards are the labels, in lower case as on the wire, just above the
	// apex in the SOA's names under it: a question with that label just
	// above the apex would be compressed against it, so it goes to the
	// server.
	guards [][]byte
}

// nxSample is the label of the sample question: a zero byte, which no
// host name has, so nothing in the answer compresses against it.
const nxSample = `\000`

// nxFor is z's NXDOMAIN template for the key flags, made the first time
// it is asked for; nil when z has none.
func (s *Server) nxFor(z *zoneVersion, flags byte) *nxTemplate {
	slot := &z.nx[flags&(keyEDNS|keyDO)]
	if t := slot.Load(); t != nil {
		return t
	}
	t := makeNX(s, z, flags)
	slot.Store(t)
	return t
}

// makeNX packs z's NXDOMAIN answer for the sample question, as answer and
// ServeDNS do, and finds its pointers; a template with no wire means the
// fast path does not apply.
func makeNX(s *Server, z *zoneVersion, flags byte) *nxTemplate {
	t := &nxTemplate{}
	if z.negSOA == nil {
		return t
	}
	apex := strings.ToLower(z.negSOA.Hdr.Name)
	req := new(dns.Msg)
	req.SetQuestion(nxSample+"."+apex, dns.TypeA)
	m := new(dns.Msg)
	m.SetReply(req)
	m.Compress = true
	m.Authoritative = true
	m.Rcode = dns.RcodeNameError
	if flags&keyEDNS != 0 {
		m.SetEdns0(ednsSize, flags&keyDO != 0)
	}
	p := s.pack(m, []rrset{{secAuthority, []dns.RR{z.negSOA}}}, dns.MaxMsgSize, dns.MaxMsgSize)
	if !p.patch {
		return t
	}
	t.apexOff, t.qend = 12+2, p.qend
	if !t.findPointers(p.wire) {
		return t
	}
	for _, name := range []string{z.negSOA.Ns, z.negSOA.Mbox} {
		if g, ok := labelAbove(strings.ToLower(name), apex); ok {
			t.guards = append(t.guards, g)
		}
	}
	t.wire = p.wire
	return t
}

// labelAbove is the label of name just above apex, as on the wire, when
// name is under apex.
func labelAbove(name, apex string) ([]byte, bool) {
	if name == apex || !dns.IsSubDomain(apex, name) {
		return nil, false
	}
	buf := make([]byte, 256)
	n, err := dns.PackDomainName(name, buf, 0, nil, false)
	if err != nil {
		return nil, false
	}
	apexLabels := dns.CountLabel(apex)
	labels := splitWire(buf[:n])
	return labels[len(labels)-apexLabels-1], true
}

// splitWire is the labels of an uncompressed name on the wire.
func splitWire(name []byte) [][]byte {
	var labels [][]byte
	for off := 0; off < len(name) && name[off] != 0; off += 1 + int(name[off]) {
		labels = append(labels, name[off+1:off+1+int(name[off])])
	}
	return labels
}

// findPointers records the compression pointers in the records after the
// question, and reports false for a message it does not expect: one with
// an answer, or a pointer into the sample label.
func (t *nxTemplate) findPointers(wire []byte) bool {
	be := binary.BigEndian
	if be.Uint16(wire[4:]) != 1 || be.Uint16(wire[6:]) != 0 {
		return false
	}
	rrs := int(be.Uint16(wire[8:])) + int(be.Uint16(wire[10:]))
	off := t.qend
	for range rrs {
		var ok bool
		if off, ok = t.name(wire, off); !ok || off+10 > len(wire) {
			return false
		}
		rrtype, rdlen := be.Uint16(wire[off:]), int(be.Uint16(wire[off+8:]))
		off += 10
		end := off + rdlen
		if end > len(wire) {
			return false
		}
		if rrtype == dns.TypeSOA {
			for range 2 {
				if off, ok = t.name(wire, off); !ok {
					return false
				}
			}
		}
		off = end
	}
	return off == len(wire)
}

// name skips the name at off, recording a pointer that ends it.
func (t *nxTemplate) name(wire []byte, off int) (int, bool) {
	for off < len(wire) {
		switch l := int(wire[off]); {
		case l == 0:
			return off + 1, true
		case l&0xc0 == 0xc0:
			if off+2 > len(wire) {
				return 0, false
			}
			target := int(binary.BigEndian.Uint16(wire[off:]) & 0x3fff)
			if target < t.apexOff {
				return 0, false
			}
			t.ptrs, t.targets = append(t.ptrs, off), append(t.targets, target)
			return off + 2, true
		case l > 63:
			return 0, false
		default:
			off += 1 + l
		}
	}
	return 0, false
}

// negative writes into out the NXDOMAIN answer to pkt, a plain query
// whose key is k and whose name ends at nameEnd, when its zone is in
// memory and current and marks the name absent. It reports false, having
// written nothing that counts, for the server to answer.
func (s *Server) negative(out, pkt, k []byte, nameEnd, limit int) (int, bool) {
	name, ok := dottedName(k[:len(k)-3])
	if !ok {
		return 0, false
	}
	apex, z := s.zoneInMemory(name)
	if z == nil || !z.absent(name) {
		return 0, false
	}
	t := s.nxFor(z, k[len(k)-1])
	if t.wire == nil || !t.allows(k[:len(k)-3], dns.CountLabel(apex)) {
		return 0, false
	}
	delta := (nameEnd - 12) - (t.qend - 4 - 12)
	n := len(t.wire) + delta
	if n > limit || n > len(out) {
		return 0, false
	}
	copy(out, t.wire[:12])
	copy(out[:2], pkt[:2])
	out[2] = out[2]&^0x01 | pkt[2]&0x01 // RD
	out[3] = out[3]&^0x10 | pkt[3]&0x10 // CD
	copy(out[12:nameEnd+4], pkt[12:nameEnd+4])
	copy(out[nameEnd+4:n], t.wire[t.qend:])
	for i, p := range t.ptrs {
		binary.BigEndian.PutUint16(out[p+delta:], 0xc000|uint16(t.targets[i]+delta))
	}
	return n, true
}

// allows: the name (lower case, on the wire) has no label just above its
// zone's apex that a name in the answer shares.
func (t *nxTemplate) allows(name []byte, apexLabels int) bool {
	labels := splitWire(name)
	if len(labels) <= apexLabels {
		return false
	}
	above := labels[len(labels)-apexLabels-1]
	for _, g := range t.guards {
		if bytes.Equal(above, g) {
			return false
		}
	}
	return true
}

// dottedName is a lower-case name on the wire as the zone's names map
// holds it, fully qualified; ok is false for a label with a byte that
// would be escaped in presentation form.
func dottedName(wire []byte) (string, bool) {
	if len(wire) <= 1 {
		return "", false
	}
	b := make([]byte, 0, len(wire))
	for off := 0; wire[off] != 0; off += 1 + int(wire[off]) {
		for _, ch := range wire[off+1 : off+1+int(wire[off])] {
			if !('a' <= ch && ch <= 'z' || '0' <= ch && ch <= '9' || ch == '-' || ch == '_') {
				return "", false
			}
		}
		b = append(append(b, wire[off+1:off+1+int(wire[off])]...), '.')
	}
	return string(b), true
}

// zoneInMemory is zoneFor without the store: the zone that holds name
// when every apex it would look at is in memory and fresh, else nil.
func (s *Server) zoneInMemory(name string) (string, *zoneVersion) {
	dots := make([]int, 0, 8)
	for i := 0; i < len(name)-1; i++ {
		if i == 0 || name[i-1] == '.' {
			dots = append(dots, i)
		}
	}
	first := max(len(dots)-maxApexLabels, 0)
	for _, start := range dots[first:] {
		apex := name[start:]
		if s.names != nil && !s.names.Has(apex[:len(apex)-1]) {
			continue
		}
		c, ok := s.zones.Get(apex)
		if !ok || time.Since(c.loaded) >= cacheTTL {
			return "", nil
		}
		if c.z != nil {
			return apex, c.z
		}
	}
	return "", nil
}
