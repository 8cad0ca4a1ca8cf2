package dnsserver

import (
	"context"
	"errors"
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
}

// DefaultLimits are the server's defaults. RRL matches NSD's
// rrl-ratelimit 200 and rrl-slip 2.
var DefaultLimits = Limits{Zones: 10_000, Records: 1_000_000, RRLRate: 200, RRLBurst: 400, RRLSlip: 2, RRLPrefixes: 100_000}

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
	udp   *dns.Server
	tcp   *dns.Server

	limits      Limits
	secondaries map[string]string // fully qualified key name → secret
	zones       *cache.Cache[string, cached]
	rrl         *cache.Cache[netip.Prefix, *bucket]
	now         func() time.Time
}

type cached struct {
	rrs    []dns.RR
	loaded time.Time
	absent bool
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
	s := &Server{
		store: st, log: log, limits: l, now: time.Now, secondaries: map[string]string{},
		zones: cache.New(l.Zones, int64(l.Records), func(_ string, c cached) int64 { return int64(len(c.rrs)) + 1 }),
		rrl:   cache.New[netip.Prefix, *bucket](l.RRLPrefixes, 0, nil),
	}
	for _, sec := range secondaries {
		s.secondaries[dns.Fqdn(strings.ToLower(sec.KeyName))] = sec.Secret
	}
	return s
}

// Invalidate drops a zone from the cache after it changed.
func (s *Server) Invalidate(domain string) {
	s.zones.Delete(dns.Fqdn(strings.ToLower(domain)))
}

// Listen binds UDP and TCP on addr (port 0 picks one port for both when
// possible) and serves until ctx ends. It returns the bound address.
func (s *Server) Listen(ctx context.Context, addr string) (string, error) {
	tcpLn, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	pc, err := net.ListenPacket("udp", tcpLn.Addr().String())
	if err != nil {
		tcpLn.Close()
		return "", err
	}
	h := dns.HandlerFunc(s.ServeDNS)
	var tsig map[string]string
	if len(s.secondaries) > 0 {
		tsig = s.secondaries
	}
	s.udp = &dns.Server{PacketConn: pc, Handler: h, TsigSecret: tsig}
	// TCP connections are bounded in time, as NSD's tcp-timeout does.
	s.tcp = &dns.Server{Listener: tcpLn, Handler: h, TsigSecret: tsig,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: func() time.Duration { return 10 * time.Second }}
	go s.udp.ActivateAndServe()
	go s.tcp.ActivateAndServe()
	go func() {
		<-ctx.Done()
		s.udp.Shutdown()
		s.tcp.Shutdown()
	}()
	return tcpLn.Addr().String(), nil
}

// ZonesCached is the number of zones (present or absent) in memory.
func (s *Server) ZonesCached() int { return s.zones.Len() }

// zoneFor finds the zone that contains name among its rightmost labels.
func (s *Server) zoneFor(ctx context.Context, name string) (string, []dns.RR, bool) {
	labels := dns.SplitDomainName(name)
	first := max(len(labels)-maxApexLabels, 0)
	for i := first; i < len(labels); i++ {
		apex := dns.Fqdn(strings.Join(labels[i:], "."))
		if rrs, ok := s.load(ctx, apex); ok {
			return apex, rrs, true
		}
	}
	return "", nil, false
}

func (s *Server) load(ctx context.Context, apex string) ([]dns.RR, bool) {
	if c, ok := s.zones.Get(apex); ok && time.Since(c.loaded) < cacheTTL {
		return c.rrs, !c.absent
	}
	z, err := s.store.Zone(ctx, strings.TrimSuffix(apex, "."))
	var rrs []dns.RR
	absent := errors.Is(err, store.ErrNotFound)
	if err == nil {
		recs, derr := DecodeRecords(z.Records)
		if derr == nil {
			rrs, derr = RRs(z.Domain, z.Serial, recs)
		}
		if derr != nil {
			s.log.Error("zone unreadable", "zone", apex, "err", derr)
			absent = true
		}
	} else if !absent {
		s.log.Error("loading zone", "zone", apex, "err", err)
		return nil, false
	}
	s.zones.Put(apex, cached{rrs: rrs, loaded: time.Now(), absent: absent})
	return rrs, !absent
}

// ServeDNS answers one query.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	udp := isUDP(w)
	m := s.answer(w, req, udp)
	if m == nil {
		return
	}
	if udp {
		switch s.limit(w.RemoteAddr()) {
		case drop:
			return
		case slip:
			// Empty and truncated: a real client retries over TCP.
			m.Truncated = true
			m.Answer, m.Ns, m.Extra = nil, nil, nil
			w.WriteMsg(m)
			return
		}
		size := dns.MinMsgSize
		if opt := req.IsEdns0(); opt != nil {
			size = min(max(int(opt.UDPSize()), dns.MinMsgSize), ednsSize)
		}
		m.Truncate(size)
		// Truncate turns compression off when the answer fits; names are
		// compressed anyway, as NSD sends them.
		m.Compress = true
	}
	w.WriteMsg(m)
}

// ednsSize is the UDP payload this server offers and sends at most: the
// 2020 DNS flag day's 1232 bytes, which no path fragments.
const ednsSize = 1232

func isUDP(w dns.ResponseWriter) bool {
	_, ok := w.RemoteAddr().(*net.UDPAddr)
	return ok
}

// answer builds the reply to req, or nil when it was already written (a
// zone transfer) or must not be answered.
func (s *Server) answer(w dns.ResponseWriter, req *dns.Msg, udp bool) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(req)
	// Names compressed and EDNS echoed, as an authoritative server such
	// as NSD answers.
	m.Compress = true
	if opt := req.IsEdns0(); opt != nil {
		if opt.Version() != 0 {
			m.SetRcode(req, dns.RcodeBadVers)
			m.SetEdns0(ednsSize, false)
			return m
		}
		defer m.SetEdns0(ednsSize, false)
	}
	if len(req.Question) != 1 || req.Opcode != dns.OpcodeQuery {
		m.Rcode = dns.RcodeNotImplemented
		return m
	}
	q := req.Question[0]
	// Only the Internet class: CHAOS (version.bind and the like) and the
	// rest are refused, not answered from IN data.
	if q.Qclass != dns.ClassINET {
		m.Rcode = dns.RcodeRefused
		return m
	}
	name := strings.ToLower(q.Name)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	apex, rrs, ok := s.zoneFor(ctx, name)
	if !ok {
		m.Rcode = dns.RcodeRefused // not authoritative for this name
		return m
	}
	if q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR {
		if udp || !s.transferAllowed(w, req) || name != apex {
			m.Rcode = dns.RcodeRefused
			return m
		}
		s.transfer(w, req, rrs)
		return nil
	}
	m.Authoritative = true
	var soa dns.RR
	nameExists := false
	for _, rr := range rrs {
		h := rr.Header()
		if h.Rrtype == dns.TypeSOA {
			soa = rr
		}
		if !strings.EqualFold(h.Name, name) {
			continue
		}
		nameExists = true
		if h.Rrtype == q.Qtype {
			m.Answer = append(m.Answer, rr)
		}
	}
	if q.Qtype == dns.TypeANY && nameExists {
		// RFC 8482: a minimal answer, one synthesized HINFO, instead of
		// every record the name has.
		m.Answer = []dns.RR{&dns.HINFO{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeHINFO, Class: dns.ClassINET, Ttl: 3600}, Cpu: "RFC8482"}}
		return m
	}
	if len(m.Answer) == 0 {
		if !nameExists {
			m.Rcode = dns.RcodeNameError
		}
		if soa != nil {
			m.Ns = append(m.Ns, soa)
		}
	} else if q.Qtype != dns.TypeNS {
		for _, rr := range rrs {
			if rr.Header().Rrtype == dns.TypeNS && strings.EqualFold(rr.Header().Name, apex) {
				m.Ns = append(m.Ns, rr)
			}
		}
	}
	m.Extra = glue(rrs, append(m.Answer, m.Ns...))
	return m
}

// glue is the additional section: the in-zone addresses of the name
// servers and mail hosts the answer names.
func glue(zone []dns.RR, named []dns.RR) []dns.RR {
	var targets []string
	for _, rr := range named {
		switch r := rr.(type) {
		case *dns.NS:
			targets = append(targets, r.Ns)
		case *dns.MX:
			targets = append(targets, r.Mx)
		}
	}
	var out []dns.RR
	for _, t := range targets {
		for _, rr := range zone {
			h := rr.Header()
			if (h.Rrtype == dns.TypeA || h.Rrtype == dns.TypeAAAA) && strings.EqualFold(h.Name, t) {
				out = append(out, rr)
			}
		}
	}
	return out
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
	ua, ok := addr.(*net.UDPAddr)
	if !ok {
		return send
	}
	ip, _ := netip.AddrFromSlice(ua.IP)
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
