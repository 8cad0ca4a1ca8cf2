// Package dnsserver is Pier's authoritative DNS: one zone per registered
// domain, kept in the store, answered with miekg/dns over UDP and TCP, and
// exported as RFC 1035 master files. It knows nothing of HTTP.
package dnsserver

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"

	"github.com/miekg/dns"
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

// RRs parses stored records into resource records with the given serial.
func RRs(domain string, serial int64, records []Record) ([]dns.RR, error) {
	origin := dns.Fqdn(domain)
	var out []dns.RR
	for _, r := range records {
		owner := origin
		if r.Name != "@" && r.Name != "" {
			owner = r.Name + "." + origin
		}
		value := r.Value
		if r.Type == "SOA" {
			// The serial lives in the zone row, so the records stay stable.
			f := strings.Fields(value)
			if len(f) == 7 {
				f[2] = fmt.Sprint(serial)
				value = strings.Join(f, " ")
			}
		}
		rr, err := dns.NewRR(fmt.Sprintf("%s %d IN %s %s", owner, r.TTL, r.Type, value))
		if err != nil {
			return nil, fmt.Errorf("record %s %s: %w", r.Name, r.Type, err)
		}
		out = append(out, rr)
	}
	return out, nil
}

// MasterFile renders a zone as an RFC 1035 master file.
func MasterFile(domain string, serial int64, records []Record) (string, error) {
	rrs, err := RRs(domain, serial, records)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "$ORIGIN %s\n$TTL 300\n", dns.Fqdn(domain))
	for _, rr := range rrs {
		b.WriteString(rr.String())
		b.WriteByte('\n')
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
