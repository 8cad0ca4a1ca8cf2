// Package dnsserver is Pier's authoritative DNS: one zone per registered
// domain, kept in the store, answered with miekg/dns over UDP and TCP. The
// records themselves are the domain's (package zone); this adapter turns
// them into resource records.
package dnsserver

import (
	"fmt"
	"strings"

	"github.com/miekg/dns"

	"github.com/pierhq/pier/server/internal/zone"
)

// Record and ZoneConfig are the zone package's, for this adapter's callers.
type (
	Record     = zone.Record
	ZoneConfig = zone.ZoneConfig
)

// BuildZone, EncodeRecords, DecodeRecords and MasterFile are the zone
// package's.
var (
	BuildZone     = zone.BuildZone
	EncodeRecords = zone.EncodeRecords
	DecodeRecords = zone.DecodeRecords
	MasterFile    = zone.MasterFile
)

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
