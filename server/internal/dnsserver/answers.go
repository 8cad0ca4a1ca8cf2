package dnsserver

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"strings"

	"github.com/miekg/dns"
)

// Packed answers. An answer from a zone is packed once, for the question
// in lower case with id 0 and no RD or CD flag, and kept by what it
// depends on: the name in lower case, the type, whether the query had EDNS
// and the DO bit, whether the client is on IPv6 (NS glue order), and, for
// an answer cut to a UDP size, that size. A query like it is answered with
// a copy whose id, RD and CD flags and question name (in the query's own
// case) are the query's. Names in the answer are compressed against the
// question, so they read in the query's case too, as NSD's do.
//
// An answer is kept with the validity of the zone version it came from
// and served only while that version is current (Server.current): a zone
// that changes, is invalidated or is not confirmed in the store within
// cacheTTL takes its answers with it.
type packed struct {
	key   []byte
	wire  []byte
	qend  int  // the offset after the question
	patch bool // made for the lower-case question: patch id, flags, name
	z     *validity
}

// Key flags.
const (
	keyEDNS = 1 << iota
	keyDO
	keyV6
)

// cacheableQuery: a query whose answer depends on nothing but the key.
func cacheableQuery(req *dns.Msg) bool {
	if req.Response || req.Opcode != dns.OpcodeQuery || len(req.Question) != 1 || req.IsTsig() != nil {
		return false
	}
	q := req.Question[0]
	if q.Qclass != dns.ClassINET || q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR {
		return false
	}
	opt := req.IsEdns0()
	return opt == nil || opt.Version() == 0
}

// makeKey appends the key of a cacheable query to dst: the question name
// in lower case as on the wire, the type, and the flags. The UDP size, 0
// for the whole answer, is appended by lookup.
func makeKey(dst []byte, req *dns.Msg, v6 bool) []byte {
	q := req.Question[0]
	buf := make([]byte, 255)
	n, err := dns.PackDomainName(strings.ToLower(q.Name), buf, 0, nil, false)
	if err != nil {
		return nil
	}
	dst = append(dst, buf[:n]...)
	var flags byte
	if opt := req.IsEdns0(); opt != nil {
		flags |= keyEDNS
		if opt.Do() {
			flags |= keyDO
		}
	}
	if v6 {
		flags |= keyV6
	}
	dst = binary.BigEndian.AppendUint16(dst, q.Qtype)
	return append(dst, flags)
}

// lookup returns the current answer kept for k and size, or nil. k must
// have room for two more bytes to be used without allocating.
func (s *Server) lookup(k []byte, size int) *packed {
	k = binary.BigEndian.AppendUint16(k, uint16(size))
	p, ok := s.answers.Get(maphash.Bytes(s.seed, k))
	if !ok || !bytes.Equal(p.key, k) || !s.current(p.z) {
		return nil
	}
	return p
}

// packedFor is the answer kept for k that fits limit bytes over UDP (any
// size over TCP), or nil.
func (s *Server) packedFor(k []byte, limit int, udp, v6 bool) *packed {
	p := s.lookup(k, 0)
	if p == nil || !udp || fits(p, limit, v6) {
		return p
	}
	return s.lookup(k, limit)
}

// fits: the whole answer p goes over UDP within limit bytes as it is,
// its optional records within 1220 bytes for an IPv6 client.
func fits(p *packed, limit int, v6 bool) bool {
	return len(p.wire) <= limit && (!v6 || len(p.wire) <= ednsSize6)
}

// keep keeps p, the answer for k and size, made from a zone version of
// validity z. An answer is kept the second time it is made within a while
// (or when a stale one is replaced), so that names asked once, such as
// random names under a zone, do not take the place of answers asked
// again.
func (s *Server) keep(k []byte, size int, p *packed, z *validity) {
	if k == nil || !p.patch {
		return
	}
	p.key = binary.BigEndian.AppendUint16(append([]byte(nil), k...), uint16(size))
	p.z = z
	h := maphash.Bytes(s.seed, p.key)
	if old, ok := s.answers.Get(h); !ok || !bytes.Equal(old.key, p.key) {
		if slot := &s.seen[h%uint64(len(s.seen))]; slot.Swap(h) != h {
			return
		}
	}
	s.answers.Put(h, p)
}

// pack fills m with sets within limit (optional records within optLimit)
// and packs it; a query's answer is packed for its question in lower case
// with id 0 and no RD or CD flag.
func (s *Server) pack(m *dns.Msg, sets []rrset, limit, optLimit int) *packed {
	fill(m, sets, limit, optLimit)
	p := &packed{}
	if m.Opcode == dns.OpcodeQuery && len(m.Question) == 1 {
		id, rd, cd, name := m.Id, m.RecursionDesired, m.CheckingDisabled, m.Question[0].Name
		m.Id, m.RecursionDesired, m.CheckingDisabled, m.Question[0].Name = 0, false, false, strings.ToLower(name)
		defer func() { m.Id, m.RecursionDesired, m.CheckingDisabled, m.Question[0].Name = id, rd, cd, name }()
		p.patch = true
	}
	wire, err := m.Pack()
	if err != nil {
		// Cannot happen for what answer builds; answer as miekg/dns would
		// fail a write: not at all, but still with a valid header.
		m.Answer, m.Ns, m.Extra = nil, nil, nil
		m.Rcode = dns.RcodeServerFailure
		wire, _ = m.Pack()
	}
	p.wire = wire
	p.qend = questionEnd(wire)
	return p
}

// questionEnd is the offset after the question section of a packed
// message with at most one question.
func questionEnd(wire []byte) int {
	if len(wire) < 12 || binary.BigEndian.Uint16(wire[4:]) != 1 {
		return min(len(wire), 12)
	}
	off := 12
	for off < len(wire) {
		l := int(wire[off])
		if l == 0 {
			return min(off+5, len(wire))
		}
		if l&0xc0 != 0 {
			return min(off+6, len(wire))
		}
		off += l + 1
	}
	return len(wire)
}

// patchHeader gives a packed answer a query's id and RD and CD flags.
func patchHeader(out []byte, id uint16, rd, cd bool) {
	binary.BigEndian.PutUint16(out, id)
	out[2] &^= 0x01
	if rd {
		out[2] |= 0x01
	}
	out[3] &^= 0x10
	if cd {
		out[3] |= 0x10
	}
}

// slipAnswer cuts an answer to its header and question, truncated (TC),
// for response rate limiting's slip.
func slipAnswer(out []byte, qend int) []byte {
	out[2] |= 0x02
	clear(out[6:12])
	return out[:qend]
}
