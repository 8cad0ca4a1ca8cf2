package dnsserver

import (
	"context"
	"errors"
	"hash/maphash"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/time/rate"

	"github.com/pierhq/pier/server/internal/cache"
	"github.com/pierhq/pier/server/internal/store"
)

// Limits bound the server under hostile traffic, after NSD's defaults.
type Limits struct {
	// Zones bounds the zones kept in memory (present or absent), and
	// Records their records in total.
	Zones, Records int
	// RRLRate is the number of UDP answers per second one source prefix
	// (an IPv4 /24 or an IPv6 /56) gets before answers are dropped; 0 turns
	// response rate limiting off. RRLBurst is the bucket's depth.
	RRLRate, RRLBurst int
	// RRLSlip sends every Nth dropped answer as an empty truncated one, so
	// a real resolver behind a spoofed prefix retries over TCP, which is
	// never rate-limited; 0 drops them all.
	RRLSlip int
	// RRLPrefixes bounds the prefixes tracked at once.
	RRLPrefixes int
	// Answers bounds the packed answers kept, and AnswerBytes their size
	// in total (the answers, their keys and 256 bytes each besides).
	Answers     int
	AnswerBytes int64
}

// DefaultLimits are the server's defaults. RRL matches NSD's
// rrl-ratelimit 200 and rrl-slip 2.
var DefaultLimits = Limits{Zones: 10_000, Records: 1_000_000, RRLRate: 200, RRLBurst: 400, RRLSlip: 2, RRLPrefixes: 100_000,
	Answers: 65_536, AnswerBytes: 16 << 20}

// Secondary is a name server allowed to transfer zones: it signs its
// AXFR and IXFR queries with TSIG (HMAC-SHA256) under KeyName.
type Secondary struct {
	KeyName string
	// Secret is the base64 TSIG secret.
	Secret string
}

// Zones is what DNS reads from the domain: a zone by its apex, or
// store.ErrNotFound. store.Domains is one.
type Zones interface {
	Zone(ctx context.Context, domain string) (store.Zone, error)
}

// Server answers authoritatively for the zones it is given.
type Server struct {
	store Zones
	log   *slog.Logger
	udp   []*dns.Server
	tcp   *dns.Server

	limits      Limits
	secondaries map[string]string // fully qualified key name → secret
	zones       *cache.Cache[string, cached]
	answers     *cache.Cache[uint64, *packed]
	seed        maphash.Seed
	seen        []atomic.Uint64 // hashes of answers made once, by hash; see keep
	rrl         *cache.Cache[netip.Prefix, *bucket]
	now         func() time.Time
	epoch       time.Time // monotonic base of zoneVersion.loaded
	// names, when set, holds every zone apex: a query under none of them
	// is refused with no store lookup, however random its labels.
	names Names
}

// Names is the in-memory index of zone apexes (package nameindex's
// Index), lower case without the trailing dot.
type Names interface {
	Has(apex string) bool
	Add(apexes ...string)
}

// UseNames makes the server look zones up only under apexes the index
// holds. Call it before serving.
func (s *Server) UseNames(n Names) { s.names = n }

// cached is a zone apex in the cache: the zone, or nil when there is none.
type cached struct {
	z      *zoneVersion
	loaded time.Time
}

// zoneVersion is one version of a zone as read from the store.
type zoneVersion struct {
	rrs     []dns.RR
	serial  int64
	records string
	*validity
	// names holds every name that exists in the zone, lower case and
	// fully qualified: each owner and each name between an owner and the
	// apex (RFC 8020's empty non-terminals). With no wildcard in the zone,
	// a name not in it is NXDOMAIN without a scan of the records.
	names    map[string]struct{}
	wildcard bool
	// negSOA is the SOA negative answers carry, with the lesser of its TTL
	// and its minimum as TTL (RFC 2308, section 3); nil without a SOA.
	negSOA *dns.SOA
	// nx are the NXDOMAIN templates by EDNS and DO flags (negative.go).
	nx [4]atomic.Pointer[nxTemplate]
}

func newZoneVersion(rrs []dns.RR, serial int64, records string) *zoneVersion {
	v := &zoneVersion{rrs: rrs, serial: serial, records: records, validity: new(validity), names: map[string]struct{}{}}
	var apex string
	for _, rr := range rrs {
		if soa, ok := rr.(*dns.SOA); ok && v.negSOA == nil {
			v.negSOA = dns.Copy(soa).(*dns.SOA)
			v.negSOA.Hdr.Ttl = min(soa.Hdr.Ttl, soa.Minttl)
			apex = strings.ToLower(soa.Hdr.Name)
		}
	}
	for _, rr := range rrs {
		name := strings.ToLower(rr.Header().Name)
		if strings.HasPrefix(name, "*.") {
			v.wildcard = true
		}
		for {
			v.names[name] = struct{}{}
			i := strings.IndexByte(name, '.')
			if name == apex || apex == "" || i < 0 || i == len(name)-1 || !dns.IsSubDomain(apex, name[i+1:]) {
				break
			}
			name = name[i+1:]
		}
	}
	return v
}

// absent reports whether name surely does not exist in the zone.
func (z *zoneVersion) absent(name string) bool {
	if z.wildcard || z.negSOA == nil {
		return false
	}
	_, ok := z.names[name]
	return !ok
}

// validity says whether a zone version is current: not replaced by a
// changed zone or invalidated, and read or confirmed unchanged from the
// store within cacheTTL. Packed answers made from the version hold it (and
// not the version, which can leave the zone cache before them) and are
// served only while it is current.
type validity struct {
	loaded atomic.Int64 // when last read from the store, in ns since Server.epoch
	dead   atomic.Bool
}

func (s *Server) current(v *validity) bool {
	return !v.dead.Load() && time.Duration(int64(time.Since(s.epoch))-v.loaded.Load()) < cacheTTL
}

type bucket struct {
	lim     *rate.Limiter
	dropped atomic.Int64
}

// cacheTTL bounds how stale an answer can be after a zone changes on
// another replica; this process invalidates its own changes at once.
const cacheTTL = 2 * time.Second

// maxApexLabels bounds the zone apexes a query name is looked up under:
// its rightmost labels, at most this many, longest first. A name of 127
// labels costs no more lookups than a short one.
const maxApexLabels = 5

// New returns a server over the store with the default limits.
func New(st Zones, log *slog.Logger) *Server {
	return NewWithLimits(st, log, DefaultLimits, nil)
}

// NewWithLimits returns a server over the store; zero limits take the
// defaults, except RRLRate and RRLSlip, where 0 means off. secondaries may
// transfer zones.
func NewWithLimits(st Zones, log *slog.Logger, l Limits, secondaries []Secondary) *Server {
	d := DefaultLimits
	if l.Zones <= 0 {
		l.Zones = d.Zones
	}
	if l.Records <= 0 {
		l.Records = d.Records
	}
	if l.RRLBurst <= 0 {
		l.RRLBurst = max(l.RRLRate*2, 1)
	}
	if l.RRLPrefixes <= 0 {
		l.RRLPrefixes = d.RRLPrefixes
	}
	if l.Answers <= 0 {
		l.Answers = d.Answers
	}
	if l.AnswerBytes <= 0 {
		l.AnswerBytes = d.AnswerBytes
	}
	s := &Server{
		store: st, log: log, limits: l, now: time.Now, secondaries: map[string]string{}, epoch: time.Now(), seed: maphash.MakeSeed(),
		zones: cache.New(l.Zones, int64(l.Records), func(_ string, c cached) int64 {
			if c.z == nil {
				return 1
			}
			return int64(len(c.z.rrs)) + 1
		}),
		answers: cache.New(l.Answers, l.AnswerBytes, func(_ uint64, p *packed) int64 { return int64(len(p.wire)+len(p.key)) + 256 }),
		seen:    make([]atomic.Uint64, 1<<16),
		rrl:     cache.New[netip.Prefix, *bucket](l.RRLPrefixes, 0, nil),
	}
	for _, sec := range secondaries {
		s.secondaries[dns.Fqdn(strings.ToLower(sec.KeyName))] = sec.Secret
	}
	return s
}

// Invalidate drops a zone from the cache after it changed, and with it
// the answers packed from it.
func (s *Server) Invalidate(domain string) {
	apex := dns.Fqdn(strings.ToLower(domain))
	if s.names != nil {
		s.names.Add(strings.TrimSuffix(apex, "."))
	}
	if c, ok := s.zones.Get(apex); ok && c.z != nil {
		c.z.dead.Store(true)
	}
	s.zones.Delete(apex)
}

// Listen binds UDP and TCP on addr (port 0 picks one port for both when
// possible) and serves until ctx ends. It returns the bound address.
//
// UDP is read by one socket per CPU where the system shares a port
// between sockets (SO_REUSEPORT), each read in batches: a query whose
// answer is packed and current is answered from the batch, and the rest
// go to miekg/dns's server, as TCP does.
func (s *Server) Listen(ctx context.Context, addr string) (string, error) {
	tcpLn, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	conns, err := listenUDP(tcpLn.Addr().String(), udpSockets())
	if err != nil {
		tcpLn.Close()
		return "", err
	}
	h := dns.HandlerFunc(s.ServeDNS)
	var tsig map[string]string
	if len(s.secondaries) > 0 {
		tsig = s.secondaries
	}
	for _, c := range conns {
		// Room for a burst of queries while the process waits for a CPU
		// or collects garbage (the system caps it at net.core.rmem_max).
		c.SetReadBuffer(udpBuffer)
		c.SetWriteBuffer(udpBuffer)
		srv := &dns.Server{PacketConn: newPacketConn(s, c), Handler: h, TsigSecret: tsig}
		s.udp = append(s.udp, srv)
		go srv.ActivateAndServe()
	}
	// TCP connections are bounded in time, as NSD's tcp-timeout does.
	s.tcp = &dns.Server{Listener: tcpLn, Handler: h, TsigSecret: tsig,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: func() time.Duration { return 10 * time.Second }}
	go s.tcp.ActivateAndServe()
	go func() {
		<-ctx.Done()
		for _, u := range s.udp {
			u.Shutdown()
		}
		s.tcp.Shutdown()
	}()
	return tcpLn.Addr().String(), nil
}

// ZonesCached is the number of zones (present or absent) in memory.
func (s *Server) ZonesCached() int { return s.zones.Len() }

// zoneFor finds the zone that contains name among its rightmost labels.
func (s *Server) zoneFor(ctx context.Context, name string) (string, *zoneVersion, bool) {
	labels := dns.SplitDomainName(name)
	first := max(len(labels)-maxApexLabels, 0)
	for i := first; i < len(labels); i++ {
		apex := strings.Join(labels[i:], ".")
		if s.names != nil && !s.names.Has(strings.ToLower(apex)) {
			continue
		}
		apex = dns.Fqdn(apex)
		if z := s.load(ctx, apex); z != nil {
			return apex, z, true
		}
	}
	return "", nil, false
}

// load returns the zone at apex, or nil when there is none. A zone read
// again after cacheTTL and found unchanged keeps its version, and so the
// answers packed from it.
func (s *Server) load(ctx context.Context, apex string) *zoneVersion {
	c, ok := s.zones.Get(apex)
	if ok && time.Since(c.loaded) < cacheTTL {
		return c.z
	}
	// The timeout is made here, not per query: most queries find their
	// zone in the cache and never reach the store.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	z, err := s.store.Zone(ctx, strings.TrimSuffix(apex, "."))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Error("loading zone", "zone", apex, "err", err)
		return nil
	}
	now := time.Now()
	var v *zoneVersion
	switch {
	case err != nil: // not found
	case ok && c.z != nil && c.z.serial == z.Serial && c.z.records == z.Records:
		v = c.z
	default:
		recs, derr := DecodeRecords(z.Records)
		var rrs []dns.RR
		if derr == nil {
			rrs, derr = RRs(z.Domain, z.Serial, recs)
		}
		if derr != nil {
			s.log.Error("zone unreadable", "zone", apex, "err", derr)
			break
		}
		v = newZoneVersion(rrs, z.Serial, z.Records)
	}
	if ok && c.z != nil && c.z != v {
		c.z.dead.Store(true)
	}
	if v != nil {
		v.loaded.Store(int64(now.Sub(s.epoch)))
	}
	s.zones.Put(apex, cached{z: v, loaded: now})
	return v
}

// ServeDNS answers one query: from its packed answer when there is one,
// else by looking the name up in its zone, and packing the answer for the
// next query like it when it came from a zone.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	udp, v6 := isUDP(w), v6Of(w)
	limit := dns.MaxMsgSize
	if udp {
		limit = udpLimit(req)
	}
	var k []byte
	if cacheableQuery(req) {
		k = makeKey(make([]byte, 0, 264), req, v6)
	}
	if k != nil {
		if p := s.packedFor(k, limit, udp, v6); p != nil {
			s.send(w, req, p, udp)
			return
		}
	}
	m, sets, z := s.answer(w, req, udp)
	if m == nil {
		return
	}
	// The whole answer, as TCP sends it and UDP when it fits, then the
	// answer cut to this query's UDP size when it does not.
	p := s.pack(m, sets, dns.MaxMsgSize, dns.MaxMsgSize)
	if z != nil {
		s.keep(k, 0, p, z.validity)
	}
	if udp && !fits(p, limit, v6) {
		optLimit := limit
		if v6 {
			optLimit = min(limit, ednsSize6)
		}
		p = s.pack(m, sets, limit, optLimit)
		if z != nil {
			s.keep(k, limit, p, z.validity)
		}
	}
	s.send(w, req, p, udp)
}

// udpLimit is the most bytes a UDP answer to req may have: the client's
// EDNS payload size within [512, 1232], or 512 without EDNS.
func udpLimit(req *dns.Msg) int {
	size := dns.MinMsgSize
	if opt := req.IsEdns0(); opt != nil {
		size = min(max(int(opt.UDPSize()), dns.MinMsgSize), ednsSize)
	}
	return size
}

// send writes the packed answer p to req, with req's id, flags and
// question name, after response rate limiting over UDP.
func (s *Server) send(w dns.ResponseWriter, req *dns.Msg, p *packed, udp bool) {
	out := make([]byte, len(p.wire))
	copy(out, p.wire)
	if p.patch {
		patchHeader(out, req.Id, req.RecursionDesired, req.CheckingDisabled)
		if off, err := dns.PackDomainName(req.Question[0].Name, out, 12, nil, false); err != nil || off != p.qend-4 {
			// A name that packs otherwise: leave it in lower case.
			copy(out[12:p.qend], p.wire[12:p.qend])
		}
	}
	if udp {
		switch s.limit(w.RemoteAddr()) {
		case drop:
			return
		case slip:
			// Empty and truncated: a real client retries over TCP.
			out = slipAnswer(out, p.qend)
		}
	}
	w.Write(out)
}

// udpBuffer is the size of each UDP socket's receive and send buffers.
const udpBuffer = 1 << 20

// ednsSize is the UDP payload this server offers and sends at most: the
// 2020 DNS flag day's 1232 bytes, which no path fragments.
const ednsSize = 1232

// ednsSize6 bounds optional records over UDP to IPv6 clients (NSD's
// IPV6_MINIMAL_RESPONSE_SIZE).
const ednsSize6 = 1220

func isUDP(w dns.ResponseWriter) bool { return udpAddr(w.RemoteAddr()) != nil }

// section orders an answer's RRsets as NSD adds them to a message.
type section uint8

const (
	secAnswer       section = iota
	secAuthority            // the SOA of a negative answer: truncates if it does not fit
	secOptAuthority         // the zone's NS with a positive answer: left out if it does not fit
	secAdditional1          // glue: A (AAAA first for NS targets asked over IPv6)
	secAdditional2          // glue: the other family
)

type rrset struct {
	sec section
	rrs []dns.RR
}

// answer builds the reply to req: the message with its header, question
// and OPT record, the RRsets that go in it, and the zone version they came
// from (nil when none did). It returns a nil message when the reply was
// already written (a zone transfer) or must not be sent.
func (s *Server) answer(w dns.ResponseWriter, req *dns.Msg, udp bool) (*dns.Msg, []rrset, *zoneVersion) {
	m := new(dns.Msg)
	m.SetReply(req)
	// Names compressed and EDNS echoed, as an authoritative server such
	// as NSD answers.
	m.Compress = true
	var ede uint16 = noEDE
	if opt := req.IsEdns0(); opt != nil {
		if opt.Version() != 0 {
			m.SetRcode(req, dns.RcodeBadVers)
			m.SetEdns0(ednsSize, opt.Do())
			return m, nil, nil
		}
		// The DO bit is copied into the answer (RFC 3225), and extended
		// errors (RFC 8914) go where NSD gives them.
		defer func() {
			m.SetEdns0(ednsSize, opt.Do())
			if ede != noEDE {
				o := m.IsEdns0()
				o.Option = append(o.Option, &dns.EDNS0_EDE{InfoCode: ede})
			}
		}()
	}
	if len(req.Question) != 1 || req.Opcode != dns.OpcodeQuery {
		m.Rcode = dns.RcodeNotImplemented
		return m, nil, nil
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	// Only the Internet class: CHAOS (version.bind and the like) and the
	// rest are refused, not answered from IN data.
	if q.Qclass != dns.ClassINET {
		m.Rcode = dns.RcodeRefused
		ede = classRefusal(q, name)
		return m, nil, nil
	}
	apex, z, ok := s.zoneFor(context.Background(), name)
	if !ok {
		m.Rcode = dns.RcodeRefused // not authoritative for this name
		ede = dns.ExtendedErrorCodeNotAuthoritative
		return m, nil, nil
	}
	rrs := z.rrs
	if q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR {
		if udp || !s.transferAllowed(w, req) || name != apex {
			m.Rcode = dns.RcodeRefused
			if !udp {
				ede = dns.ExtendedErrorCodeProhibited
			}
			return m, nil, nil
		}
		s.transfer(w, req, rrs)
		return nil, nil, nil
	}
	m.Authoritative = true
	if z.absent(name) {
		m.Rcode = dns.RcodeNameError
		return m, []rrset{{secAuthority, []dns.RR{z.negSOA}}}, z
	}
	found, soa, nameExists := lookup(rrs, name, q.Qtype)
	if q.Qtype == dns.TypeANY && nameExists {
		// RFC 8482: a minimal answer, one synthesized HINFO, instead of
		// every record the name has.
		hinfo := &dns.HINFO{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeHINFO, Class: dns.ClassINET, Ttl: 3600}, Cpu: "RFC8482"}
		return m, []rrset{{secAnswer, []dns.RR{hinfo}}}, z
	}
	if len(found) == 0 {
		if !nameExists {
			m.Rcode = dns.RcodeNameError
		}
		if soa == nil {
			return m, nil, z
		}
		// The SOA of a negative answer has the lesser of its TTL and its
		// minimum as TTL (RFC 2308, section 3).
		neg := dns.Copy(soa).(*dns.SOA)
		neg.Hdr.Ttl = min(soa.Hdr.Ttl, soa.Minttl)
		return m, []rrset{{secAuthority, []dns.RR{neg}}}, z
	}
	return m, glue(rrs, positiveSets(rrs, found, apex, q.Qtype), v6Of(w)), z
}

// classRefusal is the extended error of a refused query of a class other
// than IN: not supported, or prohibited for the CHAOS names that would
// tell the server's version and identity (hidden, as NSD's hide-version
// and hide-identity).
func classRefusal(q dns.Question, name string) uint16 {
	if q.Qclass == dns.ClassCHAOS && (q.Qtype == dns.TypeTXT || q.Qtype == dns.TypeANY) {
		switch name {
		case "version.bind.", "version.server.", "id.server.", "hostname.bind.":
			return dns.ExtendedErrorCodeProhibited
		}
	}
	return dns.ExtendedErrorCodeNotSupported
}

// lookup finds the zone's records of name and type, its SOA, and whether
// name exists: with records of its own, or as an empty non-terminal, a
// name with names below it and no records of its own (RFC 8020).
func lookup(rrs []dns.RR, name string, qtype uint16) (found []dns.RR, soa *dns.SOA, nameExists bool) {
	for _, rr := range rrs {
		h := rr.Header()
		if r, ok := rr.(*dns.SOA); ok {
			soa = r
		}
		if !strings.EqualFold(h.Name, name) {
			if !nameExists && dns.IsSubDomain(name, strings.ToLower(h.Name)) {
				nameExists = true
			}
			continue
		}
		nameExists = true
		if h.Rrtype == qtype {
			found = append(found, rr)
		}
	}
	return found, soa, nameExists
}

// positiveSets are the RRsets of a positive answer: the records found, and
// the zone's NS with every answer but an NS one, as NSD answers (glue
// then adds the in-zone addresses of the names both name).
func positiveSets(rrs, found []dns.RR, apex string, qtype uint16) []rrset {
	sets := []rrset{{secAnswer, found}}
	if qtype == dns.TypeNS {
		return sets
	}
	var ns []dns.RR
	for _, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeNS && strings.EqualFold(rr.Header().Name, apex) {
			ns = append(ns, rr)
		}
	}
	if len(ns) > 0 {
		sets = append(sets, rrset{secOptAuthority, ns})
	}
	return sets
}

const noEDE = 0xffff

func v6Of(w dns.ResponseWriter) bool {
	if a := udpAddr(w.RemoteAddr()); a != nil {
		return a.IP.To4() == nil
	}
	if a, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.To4() == nil
	}
	return false
}

// glue appends the additional RRsets to sets as NSD adds them: for each
// name server, mail exchanger or service target that an RRset of the
// answer or authority names, in order, its A and AAAA RRsets from the zone
// (AAAA first for name servers when the client asked over IPv6), every A
// before every AAAA, and none already in the message.
func glue(zone []dns.RR, sets []rrset, v6 bool) []rrset {
	present := map[rrsetKey]bool{}
	for _, set := range sets {
		present[keyOf(set.rrs[0])] = true
	}
	var extra [2][]rrset
	for _, set := range sets {
		for _, rr := range set.rrs {
			var target string
			first, second := dns.TypeA, dns.TypeAAAA
			switch r := rr.(type) {
			case *dns.NS:
				target = r.Ns
				if v6 {
					first, second = second, first
				}
			case *dns.MX:
				target = r.Mx
			case *dns.SRV:
				target = r.Target
			default:
				continue
			}
			for i, t := range []uint16{first, second} {
				k := rrsetKey{strings.ToLower(target), t}
				if present[k] {
					continue
				}
				var found []dns.RR
				for _, z := range zone {
					if z.Header().Rrtype == t && strings.EqualFold(z.Header().Name, target) {
						found = append(found, z)
					}
				}
				if len(found) > 0 {
					present[k] = true
					extra[i] = append(extra[i], rrset{secAdditional1 + section(i), found})
				}
			}
		}
	}
	return append(append(sets, extra[0]...), extra[1]...)
}

type rrsetKey struct {
	name  string
	rtype uint16
}

func keyOf(rr dns.RR) rrsetKey {
	return rrsetKey{strings.ToLower(rr.Header().Name), rr.Header().Rrtype}
}

// fill puts sets into m within limit bytes, as NSD fills a message: the
// answer and a negative answer's SOA in whole RRsets, truncating (TC) at
// the first that does not fit; the optional RRsets after them each whole
// or not at all, none after a section where one did not fit, and over UDP
// within optLimit bytes.
func fill(m *dns.Msg, sets []rrset, limit, optLimit int) {
	var opt []dns.RR
	if o := m.IsEdns0(); o != nil {
		opt = []dns.RR{o}
	}
	m.Answer, m.Ns, m.Extra = nil, nil, nil
	m.Truncated = false
	size := func() int {
		m.Extra = append(m.Extra, opt...)
		n := m.Len()
		m.Extra = m.Extra[:len(m.Extra)-len(opt)]
		return n
	}
	for sec := secAnswer; sec <= secAdditional2 && !m.Truncated; sec++ {
		lim := limit
		if sec >= secOptAuthority {
			lim = optLimit
		}
		done := false
		for _, set := range sets {
			if set.sec != sec {
				continue
			}
			to := &m.Extra
			switch sec {
			case secAnswer:
				to = &m.Answer
			case secAuthority, secOptAuthority:
				to = &m.Ns
			}
			*to = append(*to, set.rrs...)
			if size() <= lim {
				continue
			}
			*to = (*to)[:len(*to)-len(set.rrs)]
			if sec <= secAuthority {
				m.Truncated = true
				break
			}
			done = true
		}
		if done {
			break
		}
	}
	m.Extra = append(m.Extra, opt...)
}

// transferAllowed: a configured secondary's query whose TSIG verified.
func (s *Server) transferAllowed(w dns.ResponseWriter, req *dns.Msg) bool {
	t := req.IsTsig()
	if t == nil || len(s.secondaries) == 0 {
		return false
	}
	if _, ok := s.secondaries[strings.ToLower(t.Hdr.Name)]; !ok {
		return false
	}
	return w.TsigStatus() == nil
}

// transfer sends the zone as an AXFR (an IXFR gets the same full answer,
// which RFC 1995 allows), signed with the query's TSIG key.
func (s *Server) transfer(w dns.ResponseWriter, req *dns.Msg, rrs []dns.RR) {
	var soa dns.RR
	var rest []dns.RR
	for _, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeSOA {
			soa = rr
		} else {
			rest = append(rest, rr)
		}
	}
	if soa == nil {
		return
	}
	ch := make(chan *dns.Envelope, 1)
	tr := new(dns.Transfer)
	done := make(chan error, 1)
	go func() { done <- tr.Out(w, req, ch) }()
	all := append(append([]dns.RR{soa}, rest...), soa)
	for len(all) > 0 {
		n := min(len(all), 100)
		ch <- &dns.Envelope{RR: all[:n]}
		all = all[n:]
	}
	close(ch)
	if err := <-done; err != nil {
		s.log.Debug("dns: zone transfer", "err", err)
	}
	w.Hijack()
	w.Close()
}

type verdict int

const (
	send verdict = iota
	drop
	slip
)

// limit applies response rate limiting to a UDP answer for addr, per
// source prefix: send it, drop it, or send it truncated (every RRLSlip-th
// answer that would be dropped).
func (s *Server) limit(addr net.Addr) verdict {
	if s.limits.RRLRate <= 0 {
		return send
	}
	ua := udpAddr(addr)
	if ua == nil {
		return send
	}
	ip, _ := netip.AddrFromSlice(ua.IP)
	return s.limitIP(ip)
}

func (s *Server) limitIP(ip netip.Addr) verdict {
	if s.limits.RRLRate <= 0 {
		return send
	}
	ip = ip.Unmap()
	bits := 24
	if ip.Is6() {
		bits = 56
	}
	p, err := ip.Prefix(bits)
	if err != nil {
		return send
	}
	b, ok := s.rrl.Get(p)
	if !ok {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(s.limits.RRLRate), s.limits.RRLBurst)}
		s.rrl.Put(p, b)
	}
	if b.lim.AllowN(s.now(), 1) {
		return send
	}
	if n := b.dropped.Add(1); s.limits.RRLSlip > 0 && n%int64(s.limits.RRLSlip) == 0 {
		return slip
	}
	return drop
}
