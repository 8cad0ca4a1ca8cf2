package service

import (
	"strings"
	"testing"
)

// How an operator's name for a relay becomes an SPF mechanism, and the
// record that never names the MX.
func TestSPFMechanism(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"203.0.113.7", "ip4:203.0.113.7"},
		{"203.0.113.7/24", "ip4:203.0.113.0/24"},
		{"2001:db8::25", "ip6:2001:db8::25"},
		{"2001:db8::/48", "ip6:2001:db8::/48"},
		{"include:_spf.relay.example", "include:_spf.relay.example"},
		{"relay.example.net", "a:relay.example.net"},
		{"mx", ""},
		{"+all", ""},
		{"ip4:1.2.3.4 +all", ""},
	} {
		got, err := SPFMechanism(c.in)
		if got != c.want || (c.want == "") != (err != nil) {
			t.Errorf("SPFMechanism(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if r := SPFRecord(nil); r != "v=spf1 -all" {
		t.Errorf("no relays: %q", r)
	}
	if r := SPFRecord([]string{"ip4:203.0.113.7"}); r != "v=spf1 ip4:203.0.113.7 -all" || strings.Contains(r, "mx") {
		t.Errorf("one relay: %q", r)
	}
}
