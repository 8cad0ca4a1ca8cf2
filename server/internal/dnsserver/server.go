package dnsserver

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/pierhq/pier/server/internal/store"
)

// Server answers authoritatively for the zones in the store.
type Server struct {
	store *store.Store
	log   *slog.Logger
	udp   *dns.Server
	tcp   *dns.Server

	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	rrs    []dns.RR
	loaded time.Time
	absent bool
}

// cacheTTL bounds how stale an answer can be after a zone changes on
// another replica; this process invalidates its own changes at once.
const cacheTTL = 2 * time.Second

// New returns a server over the store.
func New(st *store.Store, log *slog.Logger) *Server {
	return &Server{store: st, log: log, cache: map[string]cached{}}
}

// Invalidate drops a zone from the cache after it changed.
func (s *Server) Invalidate(domain string) {
	s.mu.Lock()
	delete(s.cache, dns.Fqdn(strings.ToLower(domain)))
	s.mu.Unlock()
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
	h := dns.HandlerFunc(s.serveDNS)
	s.udp = &dns.Server{PacketConn: pc, Handler: h}
	s.tcp = &dns.Server{Listener: tcpLn, Handler: h}
	go s.udp.ActivateAndServe()
	go s.tcp.ActivateAndServe()
	go func() {
		<-ctx.Done()
		s.udp.Shutdown()
		s.tcp.Shutdown()
	}()
	return tcpLn.Addr().String(), nil
}

// zoneFor finds the zone that contains name, walking up its labels.
func (s *Server) zoneFor(ctx context.Context, name string) (string, []dns.RR, bool) {
	labels := dns.SplitDomainName(name)
	for i := range labels {
		apex := dns.Fqdn(strings.Join(labels[i:], "."))
		if rrs, ok := s.load(ctx, apex); ok {
			return apex, rrs, true
		}
	}
	return "", nil, false
}

func (s *Server) load(ctx context.Context, apex string) ([]dns.RR, bool) {
	s.mu.Lock()
	c, ok := s.cache[apex]
	s.mu.Unlock()
	if ok && time.Since(c.loaded) < cacheTTL {
		return c.rrs, !c.absent
	}
	z, err := s.store.GetZone(ctx, strings.TrimSuffix(apex, "."))
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
	s.mu.Lock()
	s.cache[apex] = cached{rrs: rrs, loaded: time.Now(), absent: absent}
	s.mu.Unlock()
	return rrs, !absent
}

func (s *Server) serveDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	if len(req.Question) != 1 || req.Opcode != dns.OpcodeQuery {
		m.Rcode = dns.RcodeNotImplemented
		w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	apex, rrs, ok := s.zoneFor(ctx, name)
	if !ok {
		m.Rcode = dns.RcodeRefused // not authoritative for this name
		w.WriteMsg(m)
		return
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
		if q.Qtype == dns.TypeANY || h.Rrtype == q.Qtype {
			m.Answer = append(m.Answer, rr)
		}
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
	w.WriteMsg(m)
}
