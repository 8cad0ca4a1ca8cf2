package dnsserver_test

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pierhq/pier/server/internal/dnsserver"
	"github.com/pierhq/pier/server/internal/store"
)

// benchQueries are what a resolver asks of a launched domain's zone, packed
// once, with EDNS as resolvers send it.
func benchQueries(b *testing.B) [][]byte {
	var out [][]byte
	for i, q := range []struct {
		name  string
		qtype uint16
	}{
		{"www.acme.dev.", dns.TypeA}, {"acme.dev.", dns.TypeA}, {"www.acme.dev.", dns.TypeAAAA},
		{"acme.dev.", dns.TypeMX}, {"acme.dev.", dns.TypeNS}, {"acme.dev.", dns.TypeCAA},
		{"nope.acme.dev.", dns.TypeA}, {"acme.dev.", dns.TypeTXT},
	} {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.qtype)
		m.Id = uint16(i + 1)
		m.SetEdns0(1232, false)
		wire, err := m.Pack()
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, wire)
	}
	return out
}

func benchServer(b *testing.B) (*dnsserver.Server, string) {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	st, err := store.Open(ctx, b.TempDir(), "")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if err := st.Domains().PutZone(ctx, store.Zone{Domain: nsdDomain, OrgID: "org_1", Serial: nsdSerial, Records: dnsserver.EncodeRecords(nsdZone()), UpdatedAt: time.Now()}); err != nil {
		b.Fatal(err)
	}
	s := dnsserver.NewWithLimits(st.Domains(), slog.New(slog.DiscardHandler), noRRL, nil)
	addr, err := s.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	return s, addr
}

// BenchmarkServeDNS times the query path of a launched domain's zone:
//
//   - handler: Server.ServeDNS called in-process with a parsed query and a
//     response writer that keeps the bytes, as for a UDP query;
//   - udp: real queries over loopback UDP, 16 in flight from one client
//     socket, so the server's reads, writes and scheduling are in it.
func BenchmarkServeDNS(b *testing.B) {
	queries := benchQueries(b)
	b.Run("handler", func(b *testing.B) {
		s, _ := benchServer(b)
		msgs := make([]*dns.Msg, len(queries))
		for i, q := range queries {
			msgs[i] = new(dns.Msg)
			if err := msgs[i].Unpack(q); err != nil {
				b.Fatal(err)
			}
		}
		w := &discardWriter{remote: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5353}}
		for _, m := range msgs { // zones loaded, answers made
			s.ServeDNS(w, m)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			s.ServeDNS(w, msgs[i%len(msgs)])
		}
		b.StopTimer()
		if w.n == 0 {
			b.Fatal("no answer written")
		}
	})
	b.Run("udp", func(b *testing.B) {
		_, addr := benchServer(b)
		c, err := net.Dial("udp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		buf := make([]byte, 4096)
		const window = 16
		b.ReportAllocs()
		b.ResetTimer()
		for sent := 0; sent < b.N; {
			n := min(window, b.N-sent)
			for i := range n {
				if _, err := c.Write(queries[(sent+i)%len(queries)]); err != nil {
					b.Fatal(err)
				}
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			for range n {
				if _, err := c.Read(buf); err != nil {
					b.Fatal(err)
				}
			}
			sent += n
		}
	})
}

// discardWriter is a dns.ResponseWriter that counts what is written.
type discardWriter struct {
	remote net.Addr
	n      int
}

func (w *discardWriter) LocalAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}
}
func (w *discardWriter) RemoteAddr() net.Addr { return w.remote }
func (w *discardWriter) WriteMsg(m *dns.Msg) error {
	b, err := m.Pack()
	w.n += len(b)
	return err
}
func (w *discardWriter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }
func (w *discardWriter) Close() error                { return nil }
func (w *discardWriter) TsigStatus() error           { return nil }
func (w *discardWriter) TsigTimersOnly(bool)         {}
func (w *discardWriter) Hijack()                     {}
func (w *discardWriter) Network() string             { return "udp" }

// BenchmarkRandomNames times queries for names that were never asked
// before, a "water torture" attack's random labels, against a cached
// answer's, in-process (ns/op is the handler's CPU per query):
//
//   - cached: the zone's usual questions, answered from packed answers;
//   - under-zone: random labels under the launched domain (NXDOMAIN);
//   - no-zone: random labels under a domain Pier has no zone for
//     (REFUSED);
//
// each with the in-memory zone index (index) and without it, as before
// the index (store), looking candidate apexes up in the store.
func BenchmarkRandomNames(b *testing.B) {
	for _, withIndex := range []bool{true, false} {
		mode := "store"
		if withIndex {
			mode = "index"
		}
		for _, c := range []struct{ name, suffix string }{{"under-zone", ".acme.dev."}, {"no-zone", ".elsewhere.example."}} {
			b.Run(c.name+"/"+mode, func(b *testing.B) { benchRandom(b, c.suffix, withIndex) })
		}
	}
	b.Run("cached", func(b *testing.B) {
		s, _ := benchServer(b)
		var msgs []*dns.Msg
		for _, q := range benchQueries(b) {
			m := new(dns.Msg)
			if err := m.Unpack(q); err != nil {
				b.Fatal(err)
			}
			msgs = append(msgs, m)
		}
		w := &discardWriter{remote: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5353}}
		for _, m := range msgs {
			s.ServeDNS(w, m)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			s.ServeDNS(w, msgs[i%len(msgs)])
		}
	})
}

func benchRandom(b *testing.B, suffix string, withIndex bool) {
	s, _ := benchServer(b)
	if withIndex {
		s.UseNames(zoneIndex(b, s))
	}
	w := &discardWriter{remote: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5353}}
	m := new(dns.Msg)
	m.SetQuestion("warm"+suffix, dns.TypeA)
	m.SetEdns0(1232, false)
	s.ServeDNS(w, m)
	label := make([]byte, 0, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		label = strconv.AppendUint(append(label[:0], 'r'), uint64(i)*2654435761, 36)
		m.Question[0].Name = string(label) + suffix
		s.ServeDNS(w, m)
	}
}
