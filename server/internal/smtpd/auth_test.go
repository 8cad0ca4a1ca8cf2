package smtpd

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"
)

// victimDNS publishes SPF and DMARC for victim.test that allow loopback,
// the tenant network 10.209.0.0/16 and 192.0.2.0/24: as if the domain's
// SPF named the host where tenants' code runs.
type victimDNS struct{ noDNS }

func (victimDNS) LookupTXT(_ context.Context, name string) ([]string, error) {
	switch name {
	case "victim.test", "victim.test.":
		return []string{"v=spf1 ip4:127.0.0.0/8 ip4:10.209.0.0/16 ip4:192.0.2.0/24 -all"}, nil
	case "_dmarc.victim.test", "_dmarc.victim.test.":
		return []string{"v=DMARC1; p=reject; adkim=s; aspf=s"}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}

// Mail from inside Pier (a tenant network, loopback, the host's own
// addresses) claiming another organisation's domain never passes SPF,
// hence never DMARC by SPF, whatever that domain's SPF allows; the same
// message from outside passes.
func TestSMTPInsiderNeverPassesSPF(t *testing.T) {
	s := New(Config{Resolver: victimDNS{}, TenantNetworks: []netip.Prefix{netip.MustParsePrefix("10.209.0.0/16")}})
	raw := []byte("From: ceo@victim.test\r\nTo: a@known.test\r\nSubject: wire the money\r\n\r\nNow.\r\n")
	for _, tc := range []struct {
		peer      string
		spf, dmrc string
	}{
		{"10.209.3.7", "policy", "fail"},
		{"127.0.0.1", "policy", "fail"},
		{"::ffff:127.0.0.1", "policy", "fail"},
		{"192.0.2.1", "pass", "pass"},
	} {
		res := s.authenticate("ceo@victim.test", "victim.test", netip.MustParseAddr(tc.peer), "ceo@victim.test", raw)
		if res.SPF != tc.spf || res.DMARC != tc.dmrc {
			t.Errorf("from %s: spf=%s dmarc=%s, want spf=%s dmarc=%s", tc.peer, res.SPF, res.DMARC, tc.spf, tc.dmrc)
		}
	}
	for _, a := range s.host {
		if res := s.authenticate("ceo@victim.test", "victim.test", a, "ceo@victim.test", raw); res.SPF == "pass" || res.DMARC == "pass" {
			t.Errorf("from the host's own %s: spf=%s dmarc=%s", a, res.SPF, res.DMARC)
		}
	}
}

// Over the real listener: a message sent from a loopback source claiming
// victim.test is stored, but not as passing SPF or DMARC.
func TestSMTPSpoofFromLoopbackNotPassing(t *testing.T) {
	b := newBoxes(1 << 30)
	_, addr, _ := serve(t, Config{Mail: b, Resolver: victimDNS{}})
	c, err := dialFrom("127.0.0.1", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := []byte("From: ceo@victim.test\r\nTo: a@known.test\r\nSubject: wire the money\r\nDate: " + time.Now().Format(time.RFC1123Z) + "\r\n\r\nNow.\r\n")
	if err := send(c, "ceo@victim.test", "a@known.test", msg); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.auth) != 1 || b.auth[0] != "policy/fail" {
		t.Fatalf("stored as spf/dmarc %v, want policy/fail", b.auth)
	}
}
