package dnsserver_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pierhq/pier/internal/testkit/memtest"
	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/server/internal/dnsserver"
	"github.com/pierhq/pier/server/internal/store"
)

func TestMain(m *testing.M) { os.Exit(testpg.Run(m)) }

const tsigKey, tsigSecret = "secondary.pier.test.", "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTEyMzQ="

// serve starts a server on loopback over a store holding acme.dev.
func serve(t testing.TB, l dnsserver.Limits, secondaries ...dnsserver.Secondary) (*dnsserver.Server, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := store.Open(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	recs := dnsserver.BuildZone("acme.dev", dnsserver.ZoneConfig{EdgeIPv4: []byte{127, 0, 0, 1}, EdgeIPv6: make([]byte, 16), CAAIssuers: []string{"pier.local"}})
	recs = append(recs, dnsserver.Record{Name: "@", Type: "TXT", TTL: 300, Value: `"` + strings.Repeat("v", 200) + `"`})
	if err := st.Domains().PutZone(ctx, store.Zone{Domain: "acme.dev", OrgID: "org_1", Serial: 7, Records: dnsserver.EncodeRecords(recs), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	s := dnsserver.NewWithLimits(st.Domains(), slog.New(slog.DiscardHandler), l, secondaries)
	addr, err := s.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return s, addr
}

func ask(t *testing.T, addr, net, name string, qtype, class uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.Question[0].Qclass = class
	c := &dns.Client{Net: net, Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s %s: %v", net, name, dns.TypeToString[qtype], err)
	}
	return r
}

var noRRL = dnsserver.Limits{RRLRate: 0}

func TestAnswers(t *testing.T) {
	_, addr := serve(t, noRRL)
	for _, net := range []string{"udp", "tcp"} {
		r := ask(t, addr, net, "www.acme.dev", dns.TypeA, dns.ClassINET)
		if r.Rcode != dns.RcodeSuccess || !r.Authoritative || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "127.0.0.1" {
			t.Errorf("%s A: %v", net, r)
		}
		if r := ask(t, addr, net, "nope.acme.dev", dns.TypeA, dns.ClassINET); r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 {
			t.Errorf("%s NXDOMAIN: %v", net, r)
		}
		if r := ask(t, addr, net, "other.example", dns.TypeA, dns.ClassINET); r.Rcode != dns.RcodeRefused {
			t.Errorf("%s a zone not served: %v", net, r)
		}
		if r := ask(t, addr, net, "acme.dev", dns.TypeSOA, dns.ClassINET); len(r.Answer) != 1 || r.Answer[0].(*dns.SOA).Serial != 7 {
			t.Errorf("%s SOA: %v", net, r)
		}
	}
}

func TestRefusals(t *testing.T) {
	_, addr := serve(t, noRRL)
	// Classes other than IN are refused, not answered from IN data.
	for _, class := range []uint16{dns.ClassCHAOS, dns.ClassHESIOD, dns.ClassANY} {
		for _, name := range []string{"acme.dev", "version.bind"} {
			if r := ask(t, addr, "udp", name, dns.TypeTXT, class); r.Rcode != dns.RcodeRefused || len(r.Answer) != 0 {
				t.Errorf("class %d %s: %v", class, name, r)
			}
		}
	}
	// Zone transfers without TSIG are refused, over TCP and UDP.
	for _, qt := range []uint16{dns.TypeAXFR, dns.TypeIXFR} {
		for _, net := range []string{"tcp", "udp"} {
			if r := ask(t, addr, net, "acme.dev", qt, dns.ClassINET); r.Rcode != dns.RcodeRefused || len(r.Answer) != 0 {
				t.Errorf("%s %s: %v", net, dns.TypeToString[qt], r)
			}
		}
	}
}

// ANY gets RFC 8482's minimal answer: one HINFO, whatever the name holds.
func TestANYIsMinimal(t *testing.T) {
	_, addr := serve(t, noRRL)
	query := new(dns.Msg)
	query.SetQuestion("acme.dev.", dns.TypeANY)
	qlen := query.Len()
	r := ask(t, addr, "udp", "acme.dev", dns.TypeANY, dns.ClassINET)
	if len(r.Answer) != 1 {
		t.Fatalf("ANY: %d records", len(r.Answer))
	}
	h, ok := r.Answer[0].(*dns.HINFO)
	if !ok || h.Cpu != "RFC8482" {
		t.Fatalf("ANY: %v", r.Answer[0])
	}
	if amp := float64(r.Len()) / float64(qlen); amp > 4 {
		t.Errorf("ANY amplifies ×%.1f", amp)
	}
	if r := ask(t, addr, "udp", "nope.acme.dev", dns.TypeANY, dns.ClassINET); r.Rcode != dns.RcodeNameError {
		t.Errorf("ANY for a missing name: %v", r)
	}
}

// A configured secondary transfers the zone with TSIG; a wrong key or
// secret is refused.
func TestTransferToTSIGSecondary(t *testing.T) {
	_, addr := serve(t, noRRL, dnsserver.Secondary{KeyName: tsigKey, Secret: tsigSecret})
	transfer := func(key, secret string) ([]dns.RR, error) {
		m := new(dns.Msg)
		m.SetAxfr("acme.dev.")
		m.SetTsig(key, dns.HmacSHA256, 300, time.Now().Unix())
		tr := &dns.Transfer{TsigSecret: map[string]string{key: secret}}
		ch, err := tr.In(m, addr)
		if err != nil {
			return nil, err
		}
		var rrs []dns.RR
		for env := range ch {
			if env.Error != nil {
				return rrs, env.Error
			}
			rrs = append(rrs, env.RR...)
		}
		return rrs, nil
	}
	rrs, err := transfer(tsigKey, tsigSecret)
	if err != nil {
		t.Fatal(err)
	}
	if len(rrs) < 4 || rrs[0].Header().Rrtype != dns.TypeSOA || rrs[len(rrs)-1].Header().Rrtype != dns.TypeSOA {
		t.Fatalf("AXFR: %d records: %v", len(rrs), rrs)
	}
	if rrs, err := transfer(tsigKey, "d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC13cm9uZw=="); err == nil && len(rrs) > 0 {
		t.Error("a wrong TSIG secret transferred the zone")
	}
	if rrs, err := transfer("stranger.example.", tsigSecret); err == nil && len(rrs) > 0 {
		t.Error("an unknown TSIG key transferred the zone")
	}
}

// Answers too large for the client's UDP size are truncated.
func TestUDPTruncation(t *testing.T) {
	_, addr := serve(t, noRRL)
	r := ask(t, addr, "udp", "acme.dev", dns.TypeTXT, dns.ClassINET)
	if r.Len() > dns.MinMsgSize {
		t.Errorf("a %d-byte UDP answer to a client without EDNS", r.Len())
	}
}

// Response rate limiting: a burst from one prefix over UDP is cut down to
// the rate, every other dropped answer slips through truncated, and TCP is
// never limited; for answers made for each query (distinct names) and for
// packed ones (one name asked again and again).
func TestResponseRateLimiting(t *testing.T) {
	for _, c := range []struct {
		name  string
		qname func(i int) string
	}{
		{"distinct names", func(i int) string { return fmt.Sprintf("n%d.acme.dev.", i) }},
		{"packed answers", func(int) string { return "www.acme.dev." }},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, addr := serve(t, dnsserver.Limits{RRLRate: 10, RRLBurst: 10, RRLSlip: 2})
			conn, err := dns.Dial("udp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// A burst of 60, sent without waiting, then every answer that comes.
			for i := range 60 {
				m := new(dns.Msg)
				m.SetQuestion(c.qname(i), dns.TypeA)
				if err := conn.WriteMsg(m); err != nil {
					t.Fatal(err)
				}
			}
			var answered, truncated int
			for {
				conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
				r, err := conn.ReadMsg()
				if err != nil {
					break
				}
				if r.Truncated {
					if len(r.Answer)+len(r.Ns)+len(r.Extra) != 0 || len(r.Question) != 1 {
						t.Errorf("a slipped answer with records: %v", r)
					}
					truncated++
				} else {
					answered++
				}
			}
			dropped := 60 - answered - truncated
			if answered > 15 || truncated < 15 || dropped < 15 {
				t.Errorf("60 queries in a burst: %d answered, %d truncated, %d dropped", answered, truncated, dropped)
			}
			for range 30 {
				if r := ask(t, addr, "tcp", "www.acme.dev", dns.TypeA, dns.ClassINET); len(r.Answer) != 1 {
					t.Fatalf("TCP under RRL: %v", r)
				}
			}
		})
	}
}

// Packed answers follow the zone: at once when this process changes it
// (Invalidate), and within cacheTTL (2 s) when another replica does.
func TestPackedAnswersFollowTheZone(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	put := func(serial int64, ip string) {
		recs := dnsserver.BuildZone("acme.dev", dnsserver.ZoneConfig{EdgeIPv4: net.ParseIP(ip)})
		if err := st.Domains().PutZone(ctx, store.Zone{Domain: "acme.dev", OrgID: "org_1", Serial: serial, Records: dnsserver.EncodeRecords(recs), UpdatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	put(1, "192.0.2.1")
	s := dnsserver.NewWithLimits(st.Domains(), slog.New(slog.DiscardHandler), noRRL, nil)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	addr, err := s.Listen(sctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := func(net string) string {
		r := ask(t, addr, net, "WWW.acme.dev", dns.TypeA, dns.ClassINET)
		if len(r.Answer) != 1 || r.Question[0].Name != "WWW.acme.dev." || r.Answer[0].Header().Name != "WWW.acme.dev." {
			t.Fatalf("%s: %v", net, r)
		}
		return r.Answer[0].(*dns.A).A.String()
	}
	for range 4 { // made, made and kept, then packed
		for _, n := range []string{"udp", "tcp"} {
			if got := a(n); got != "192.0.2.1" {
				t.Fatalf("%s: %s", n, got)
			}
		}
	}
	put(2, "192.0.2.2")
	s.Invalidate("acme.dev")
	for _, n := range []string{"udp", "tcp", "udp"} {
		if got := a(n); got != "192.0.2.2" {
			t.Fatalf("after Invalidate, %s: %s", n, got)
		}
	}
	for range 4 {
		a("udp")
	}
	put(3, "192.0.2.3") // as another replica would: no Invalidate here
	deadline := time.Now().Add(2500 * time.Millisecond)
	for a("udp") != "192.0.2.3" {
		if time.Now().After(deadline) {
			t.Fatal("a packed answer outlived the zone by more than 2 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// 100,000 queries for random names, under the served zone and under
// zones that do not exist, grow the heap by less than 20 MiB: the zone
// cache is bounded.
func TestRandomNamesCostNothingThatLasts(t *testing.T) {
	s, addr := serve(t, noRRL)
	conn, err := dns.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	before := memtest.Heap()
	rssBefore := memtest.RSS(t)
	for i := range 100_000 {
		m := new(dns.Msg)
		if i%2 == 0 {
			m.SetQuestion(fmt.Sprintf("r%d-%s.acme.dev.", i, strings.Repeat("x", 40)), dns.TypeA)
		} else {
			m.SetQuestion(fmt.Sprintf("a%d.b%d.c%d.d%d.zone%d.example.", i, i, i, i, i), dns.TypeA)
		}
		conn.SetDeadline(time.Now().Add(2 * time.Second))
		if err := conn.WriteMsg(m); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ReadMsg(); err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
	}
	after := memtest.Heap()
	grew := int64(after) - int64(before)
	t.Logf("heap %+.1f MiB after 100,000 random names; %d zones cached", float64(grew)/(1<<20), s.ZonesCached())
	if grew > 20<<20 {
		t.Fatalf("100,000 random names grew the heap by %d MiB", grew>>20)
	}
	if rssGrew := memtest.RSS(t) - rssBefore; rssGrew > 20<<20 {
		t.Fatalf("100,000 random names grew the resident set by %d MiB, want under 20", rssGrew>>20)
	} else {
		t.Logf("resident set %+.1f MiB", float64(rssGrew)/(1<<20))
	}
	if n := s.ZonesCached(); n > dnsserver.DefaultLimits.Zones {
		t.Fatalf("%d zones cached, over the bound", n)
	}
}

// FuzzServeDNS feeds arbitrary bytes as a query: the server never panics
// and answers with a message that parses, or not at all.
func FuzzServeDNS(f *testing.F) {
	for _, q := range []struct {
		name  string
		t, cl uint16
	}{{"acme.dev.", dns.TypeA, dns.ClassINET}, {"acme.dev.", dns.TypeANY, dns.ClassINET}, {"acme.dev.", dns.TypeAXFR, dns.ClassINET},
		{"version.bind.", dns.TypeTXT, dns.ClassCHAOS}, {"x.y.z.acme.dev.", dns.TypeMX, dns.ClassINET}} {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.t)
		m.Question[0].Qclass = q.cl
		m.SetEdns0(4096, true)
		b, _ := m.Pack()
		f.Add(b)
	}
	_, addr := serve(f, noRRL)
	f.Fuzz(func(t *testing.T, query []byte) {
		c, err := dns.Dial("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(300 * time.Millisecond))
		c.Write(query)
		buf := make([]byte, 65535)
		n, err := c.Read(buf)
		if err != nil {
			return // no answer is an answer
		}
		var m dns.Msg
		if err := m.Unpack(buf[:n]); err != nil {
			t.Fatalf("an answer that does not parse: %v", err)
		}
	})
}

// Answers have NSD's shape: the aa flag, compressed names, the EDNS OPT
// echoed (at most 1232 bytes offered), BADVERS for an unknown EDNS version,
// and the name servers' in-zone addresses as glue.
func TestAnswersAreShapedLikeNSD(t *testing.T) {
	_, addr := serve(t, dnsserver.Limits{})
	m := new(dns.Msg)
	m.SetQuestion("acme.dev.", dns.TypeNS)
	m.SetEdns0(4096, false)
	r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, addr)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Authoritative || len(r.Answer) == 0 {
		t.Fatalf("NS answer: %v", r)
	}
	opt := r.IsEdns0()
	if opt == nil || opt.UDPSize() != 1232 {
		t.Fatalf("EDNS not echoed: %v", r)
	}
	glue := 0
	for _, rr := range r.Extra {
		if rr.Header().Rrtype == dns.TypeA || rr.Header().Rrtype == dns.TypeAAAA {
			glue++
		}
	}
	if glue == 0 {
		t.Fatalf("no glue for the name servers: %v", r)
	}
	// Compressed: the bytes on the wire are fewer than the same message
	// packed without compression.
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	q, _ := m.Pack()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	conn.Write(q)
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	r.Compress = false
	plain, _ := r.Pack()
	if n >= len(plain) {
		t.Fatalf("not compressed: %d bytes, %d uncompressed", n, len(plain))
	}

	m = new(dns.Msg)
	m.SetQuestion("acme.dev.", dns.TypeA)
	m.SetEdns0(4096, false)
	m.IsEdns0().SetVersion(1)
	r, _, err = (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, addr)
	if err != nil {
		t.Fatal(err)
	}
	if r.IsEdns0() == nil || r.Rcode != dns.RcodeBadVers {
		t.Fatalf("EDNS version 1: rcode %d ext %v", r.Rcode, r.IsEdns0())
	}
}

// On an address such as 0.0.0.0 every answer, made or packed, goes from the
// address its query was sent to: a client of 127.0.0.2 (connected, so it
// takes datagrams from that address only) gets them all.
func TestWildcardAnswersFromTheAddressAsked(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs := dnsserver.BuildZone("acme.dev", dnsserver.ZoneConfig{EdgeIPv4: net.ParseIP("192.0.2.1")})
	if err := st.Domains().PutZone(ctx, store.Zone{Domain: "acme.dev", OrgID: "org_1", Serial: 1, Records: dnsserver.EncodeRecords(recs), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	s := dnsserver.NewWithLimits(st.Domains(), slog.New(slog.DiscardHandler), noRRL, nil)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	addr, err := s.Listen(sctx, "0.0.0.0:0")
	if err != nil {
		t.Skipf("cannot listen on 0.0.0.0: %v", err)
	}
	_, port, _ := net.SplitHostPort(addr)
	for _, host := range []string{"127.0.0.1", "127.0.0.2"} {
		for i, name := range []string{"www.acme.dev.", "www.acme.dev.", "www.acme.dev.", "other.example."} {
			r := ask(t, net.JoinHostPort(host, port), "udp", name, dns.TypeA, dns.ClassINET)
			if (i < 3 && len(r.Answer) != 1) || (i == 3 && r.Rcode != dns.RcodeRefused) {
				t.Errorf("%s %s: %v", host, name, r)
			}
		}
	}
}
