// Package zone is the DNS zone of a launched domain as the domain model
// knows it: the records Pier publishes (SOA, NS with glue, A and AAAA at the
// apex and www, CAA), stored as JSON and rendered as an RFC 1035 master file
// for the leave package. It knows nothing of the DNS wire format; the
// dnsserver adapter turns these records into answers.
package zone

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
)

// Record is one resource record as stored.
type Record struct {
	Name  string `json:"name"` // relative to the zone: "@" or "www"
	Type  string `json:"type"`
	TTL   uint32 `json:"ttl"`
	Value string `json:"value"`
}

// ZoneConfig says where a zone's names point.
type ZoneConfig struct {
	EdgeIPv4    net.IP
	EdgeIPv6    net.IP
	CAAIssuers  []string
	Nameservers []string // fully qualified; default ns1. and ns2. under the zone
	Hostmaster  string
	// MailSenders are the SPF mechanisms (ip4:, ip6:, a:, include:) that
	// name the relays sending the domains' outbound mail; none publishes
	// "v=spf1 -all".
	MailSenders []string
}

// BuildZone returns the records of a launched domain: SOA, NS with glue, A
// and AAAA at the apex and www pointing at the edge, and CAA.
func BuildZone(domain string, c ZoneConfig) []Record {
	domain = strings.TrimSuffix(strings.ToLower(domain), ".")
	ns := c.Nameservers
	if len(ns) == 0 {
		ns = []string{"ns1." + domain, "ns2." + domain}
	}
	hostmaster := c.Hostmaster
	if hostmaster == "" {
		hostmaster = "hostmaster." + domain
	}
	recs := []Record{{Name: "@", Type: "SOA", TTL: 3600, Value: fmt.Sprintf("%s. %s. 1 3600 600 1209600 300", ns[0], hostmaster)}}
	for _, n := range ns {
		recs = append(recs, Record{Name: "@", Type: "NS", TTL: 3600, Value: n + "."})
	}
	for _, name := range []string{"@", "www"} {
		if c.EdgeIPv4 != nil {
			recs = append(recs, Record{Name: name, Type: "A", TTL: 300, Value: c.EdgeIPv4.String()})
		}
		if c.EdgeIPv6 != nil {
			recs = append(recs, Record{Name: name, Type: "AAAA", TTL: 300, Value: c.EdgeIPv6.String()})
		}
	}
	for _, n := range ns {
		if rel, ok := strings.CutSuffix(n, "."+domain); ok {
			if c.EdgeIPv4 != nil {
				recs = append(recs, Record{Name: rel, Type: "A", TTL: 3600, Value: c.EdgeIPv4.String()})
			}
			if c.EdgeIPv6 != nil {
				recs = append(recs, Record{Name: rel, Type: "AAAA", TTL: 3600, Value: c.EdgeIPv6.String()})
			}
		}
	}
	for _, iss := range c.CAAIssuers {
		recs = append(recs, Record{Name: "@", Type: "CAA", TTL: 3600, Value: fmt.Sprintf(`0 issue "%s"`, iss)})
	}
	return recs
}

// MasterFile renders a zone as an RFC 1035 master file: one record a
// line, owner TTL class type value, with the zone's serial in the SOA.
func MasterFile(domain string, serial int64, records []Record) (string, error) {
	origin := strings.TrimSuffix(strings.ToLower(domain), ".") + "."
	var b strings.Builder
	fmt.Fprintf(&b, "$ORIGIN %s\n$TTL 300\n", origin)
	for _, r := range records {
		owner := origin
		if r.Name != "@" && r.Name != "" {
			owner = r.Name + "." + origin
		}
		value := r.Value
		if r.Type == "SOA" {
			f := strings.Fields(value)
			if len(f) != 7 {
				return "", fmt.Errorf("record @ SOA: want 7 fields, have %d", len(f))
			}
			f[2] = fmt.Sprint(serial)
			value = strings.Join(f, " ")
		}
		if strings.ContainsAny(owner+r.Type+value, "\n\r") {
			return "", fmt.Errorf("record %s %s: a line break", r.Name, r.Type)
		}
		fmt.Fprintf(&b, "%s\t%d\tIN\t%s\t%s\n", owner, r.TTL, r.Type, value)
	}
	return b.String(), nil
}

// EncodeRecords stores records as JSON.
func EncodeRecords(r []Record) string {
	b, _ := json.Marshal(r)
	return string(b)
}

// DecodeRecords reads stored records.
func DecodeRecords(s string) ([]Record, error) {
	var r []Record
	return r, json.Unmarshal([]byte(s), &r)
}
