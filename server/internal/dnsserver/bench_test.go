package dnsserver_test

import (
	"context"
	"log/slog"
	"net"
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
