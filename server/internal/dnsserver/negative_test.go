package dnsserver

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pierhq/pier/server/internal/store"
	"github.com/pierhq/pier/server/internal/zone"
)

// keptWriter keeps what the server writes, as a UDP client would read it.
type keptWriter struct {
	out []byte
}

func (w *keptWriter) LocalAddr() net.Addr { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53} }
func (w *keptWriter) RemoteAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5353}
}
func (w *keptWriter) WriteMsg(m *dns.Msg) error {
	b, err := m.Pack()
	w.out = b
	return err
}
func (w *keptWriter) Write(b []byte) (int, error) {
	w.out = append([]byte(nil), b...)
	return len(b), nil
}
func (w *keptWriter) Close() error        { return nil }
func (w *keptWriter) TsigStatus() error   { return nil }
func (w *keptWriter) TsigTimersOnly(bool) {}
func (w *keptWriter) Hijack()             {}
func (w *keptWriter) Network() string     { return "udp" }

// negativeServer serves acme.dev (name servers in the zone) and shop.dev
// (name servers under another .dev zone), with no response rate limits.
func negativeServer(t *testing.T) *Server {
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for domain, cfg := range map[string]zone.ZoneConfig{
		"acme.dev": {EdgeIPv4: []byte{127, 0, 0, 1}},
		"shop.dev": {EdgeIPv4: []byte{127, 0, 0, 1}, Nameservers: []string{"ns1.dns.dev", "ns2.dns.dev"}, Hostmaster: "ops.dns.dev"},
	} {
		z := store.Zone{Domain: domain, OrgID: "org_1", Serial: 3, Records: EncodeRecords(BuildZone(domain, cfg)), UpdatedAt: time.Now()}
		if err := st.Domains().PutZone(ctx, z); err != nil {
			t.Fatal(err)
		}
	}
	return NewWithLimits(st.Domains(), slog.New(slog.DiscardHandler), Limits{}, nil)
}

// TestNegativeAnswersMatchServeDNS: the batch path's NXDOMAIN for a name
// its zone marks absent has the bytes ServeDNS writes, for names of every
// length and case, with and without EDNS and DO; names that the answer
// would compress against, and names that exist, go to the server.
func TestNegativeAnswersMatchServeDNS(t *testing.T) {
	s := negativeServer(t)
	long := strings.Repeat("a", 63)
	names := []struct {
		name string
		fast bool
	}{
		{"r1.acme.dev", true},
		{"R2-Xy.Acme.DEV", true},
		{"a.b.c.d.e.f.acme.dev", true},
		{long + "." + long + "." + long + ".x.acme.dev", true},
		{"zz.shop.dev", true},
		{"dev.shop.dev", true},
		{"x.dns.shop.dev", true},
		{"x.ns1.acme.dev", false}, // absent, but ns1 is the SOA's name server: compressed against it
		{"hostmaster.acme.dev", false},
		{"x.Hostmaster.acme.dev", false},
		{"www.acme.dev", false},
		{"acme.dev", false},
		{"r1.elsewhere.example", false},
		{"under_score.acme.dev", true},
	}
	for _, edns := range []struct {
		on, do bool
		size   uint16
	}{{}, {true, false, 1232}, {true, true, 4096}, {true, false, 512}} {
		for _, n := range names {
			req := new(dns.Msg)
			req.SetQuestion(dns.Fqdn(n.name), dns.TypeAAAA)
			req.Id, req.RecursionDesired, req.CheckingDisabled = 0x1234, true, edns.do
			if edns.on {
				req.SetEdns0(edns.size, edns.do)
			}
			compareNegative(t, s, req, n.fast)
		}
	}
}

func compareNegative(t *testing.T, s *Server, req *dns.Msg, wantFast bool) {
	t.Helper()
	w := &keptWriter{}
	s.ServeDNS(w, req) // loads the zone, as the first query for it does
	s.ServeDNS(w, req)
	pkt, err := req.Pack()
	if err != nil {
		t.Fatal(err)
	}
	k, limit, nameEnd, ok := parseQuery(nil, pkt, false)
	if !ok {
		t.Fatalf("%s: not a plain query", req.Question[0].Name)
	}
	out := make([]byte, 4096)
	n, fast := s.negative(out, pkt, k, nameEnd, limit)
	if fast != wantFast {
		t.Fatalf("%s (EDNS %v): fast path %v, want %v", req.Question[0].Name, req.IsEdns0() != nil, fast, wantFast)
	}
	if fast && !bytes.Equal(out[:n], w.out) {
		t.Fatalf("%s: fast path\n% x\nServeDNS\n% x", req.Question[0].Name, out[:n], w.out)
	}
}

// TestNegativeAnswersOverUDP: random names under a zone, asked over UDP
// through the batch reader, are answered NXDOMAIN with the zone's SOA and
// the question as asked.
func TestNegativeAnswersOverUDP(t *testing.T) {
	s := negativeServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := s.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	for i := range 300 {
		m := new(dns.Msg)
		m.SetQuestion("r"+strings.Repeat("x", i%50)+string(rune('a'+i%26))+".acme.dev.", dns.TypeA)
		m.SetEdns0(1232, false)
		r, _, err := c.Exchange(m, addr)
		if err != nil {
			t.Fatal(err)
		}
		if r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA || r.Question[0].Name != m.Question[0].Name {
			t.Fatalf("query %d: %v", i, r)
		}
	}
}
