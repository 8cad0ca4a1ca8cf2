package dnsserver_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pierhq/pier/server/internal/dnsserver"
	"github.com/pierhq/pier/server/internal/nameindex"
	"github.com/pierhq/pier/server/internal/store"
)

// zoneIndex is an index holding acme.dev alone, loaded.
func zoneIndex(tb testing.TB, _ *dnsserver.Server) *nameindex.Index {
	x := nameindex.New("zones", func(context.Context, int64) ([]nameindex.Name, error) {
		return []nameindex.Name{{Name: nsdDomain, Added: 1}}, nil
	}, slog.New(slog.DiscardHandler))
	if err := x.Load(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return x
}

// zoneLookups counts the store's zone reads.
type zoneLookups struct {
	dnsserver.Zones
	n atomic.Int64
}

func (z *zoneLookups) Zone(ctx context.Context, domain string) (store.Zone, error) {
	z.n.Add(1)
	return z.Zones.Zone(ctx, domain)
}

// TestRandomNamesCostNoStoreWork: with the zone index, random labels
// under a zone Pier serves, and under one it does not, are answered
// (NXDOMAIN, REFUSED) with at most the one read of the zone itself.
func TestRandomNamesCostNoStoreWork(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := store.Open(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs := dnsserver.BuildZone(nsdDomain, dnsserver.ZoneConfig{EdgeIPv4: []byte{127, 0, 0, 1}})
	if err := st.Domains().PutZone(ctx, store.Zone{Domain: nsdDomain, OrgID: "org_1", Serial: 7, Records: dnsserver.EncodeRecords(recs), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	z := &zoneLookups{Zones: st.Domains()}
	s := dnsserver.NewWithLimits(z, slog.New(slog.DiscardHandler), noRRL, nil)
	s.UseNames(zoneIndex(t, s))
	addr, err := s.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if r := ask(t, addr, "udp", fmt.Sprintf("r%d.x%d.acme.dev", i, i), dns.TypeA, dns.ClassINET); r.Rcode != dns.RcodeNameError {
			t.Fatalf("random name under the zone: %s", dns.RcodeToString[r.Rcode])
		}
		if r := ask(t, addr, "udp", fmt.Sprintf("r%d.elsewhere.example", i), dns.TypeA, dns.ClassINET); r.Rcode != dns.RcodeRefused {
			t.Fatalf("random name under no zone: %s", dns.RcodeToString[r.Rcode])
		}
	}
	if n := z.n.Load(); n > 1 {
		t.Fatalf("400 random names cost %d zone reads; want the zone's own one", n)
	}
	// A zone made after the index loaded is served once its change is
	// announced, as a launch does.
	if err := st.Domains().PutZone(ctx, store.Zone{Domain: "later.dev", OrgID: "org_1", Serial: 1, Records: dnsserver.EncodeRecords(dnsserver.BuildZone("later.dev", dnsserver.ZoneConfig{EdgeIPv4: []byte{127, 0, 0, 1}})), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	s.Invalidate("later.dev")
	if r := ask(t, addr, "udp", "later.dev", dns.TypeSOA, dns.ClassINET); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("zone made after the index loaded: %s, %d answers", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
}
