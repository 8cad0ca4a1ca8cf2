package dnsserver

import (
	"encoding/binary"
	"strings"

	"github.com/miekg/dns"
)

// packed is an answer on the wire, made for the question in lower case
// with id 0 and no RD or CD flag (patch) when it answers a query: send
// gives it the query's id, RD and CD flags and question name, in the
// query's own case. Names in the answer are compressed against the
// question, so they read in the query's case too, as NSD's do.
type packed struct {
	wire  []byte
	qend  int  // the offset after the question
	patch bool // made for the lower-case question: patch id, flags, name
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
