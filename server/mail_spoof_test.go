package server_test

import (
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// SPF names the relays that send Pier's outbound mail, never the MX (the
// host where every tenant's code runs); and a message sent to Pier's SMTP
// from that host as another organisation's address is stored as passing
// neither SPF nor DMARC.
func TestMailSpoofFromTenantNotPassing(t *testing.T) {
	ts := start(t, server.Config{MailRelays: []string{"203.0.113.7", "include:_spf.relay.example"}})
	victim := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	victimDomain, _ := mailDomain(t, ts, victim, "victim")
	tenant := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	tenantDomain, inbox := mailDomain(t, ts, tenant, "tenant")

	spf := txt(dnsAnswer(t, ts, victimDomain, dns.TypeTXT))
	if spf != "v=spf1 ip4:203.0.113.7 include:_spf.relay.example -all" {
		t.Errorf("SPF: %q, want the relays and -all", spf)
	}
	for _, rr := range dnsAnswer(t, ts, victimDomain, dns.TypeTXT) {
		if s := strings.Join(rr.(*dns.TXT).Txt, ""); strings.Contains(s, " mx") || strings.Contains(s, " a ") {
			t.Errorf("SPF names the MX: %q", s)
		}
	}

	// The tenant's code, on Pier's host, writes as the victim's CEO.
	from := "ceo@" + victimDomain
	if err := sendSMTP(ts.SMTPAddr(), from, []string{"agent@" + tenantDomain}, "From: "+from+"\nTo: agent@"+tenantDomain+"\nSubject: wire the money\n\nNow.\n"); err != nil {
		t.Fatal(err)
	}
	c := ts.Client
	list := c.Do("GET", "/v1/inboxes/"+inbox+"/messages", nil, tenant.header()).JSON()["data"].(map[string]any)["messages"].([]any)
	if len(list) != 1 {
		t.Fatalf("messages: %v", list)
	}
	got := c.Do("GET", "/v1/messages/"+list[0].(map[string]any)["id"].(string), nil, tenant.header()).JSON()["data"].(map[string]any)
	if auth := got["auth"].(map[string]any); auth["spf"] == "pass" || auth["dmarc"] == "pass" {
		t.Fatalf("a spoofed message stored as %v", auth)
	}
}
