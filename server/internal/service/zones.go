package service

import (
	"context"
	"errors"
	"slices"

	"github.com/pierhq/pier/server/internal/store"
	"github.com/pierhq/pier/server/internal/zone"
)

// A domain's zone has two owners. The web records (A and AAAA at the apex
// and www) belong to the service the domain is attached to; the mail
// records (MX, SPF, DMARC, DKIM and the mail host) belong to the domain's
// email setup. A launch, an attach, a detach or a teardown rewrites the
// web records and keeps the mail records; only remove_email takes those
// out.

// isWebRecord reports whether a record points the domain's web names at
// the edge.
func isWebRecord(r zone.Record) bool {
	return (r.Name == "@" || r.Name == "www") && (r.Type == "A" || r.Type == "AAAA")
}

// zoneRecords is the zone a domain should have: SOA, NS with glue and
// CAA; the web records when a service serves it (web); and the mail
// records when the organisation set mail up on it and has not removed it.
func (s *Zones) zoneRecords(ctx context.Context, orgID, domain string, web bool) ([]zone.Record, error) {
	recs := zone.BuildZone(domain, s.zone)
	if !web {
		recs = slices.DeleteFunc(recs, isWebRecord)
	}
	d, err := s.store.Mail().Domain(ctx, domain)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, err
	case d.OrgID == orgID && MailState(d.State) != MailRemoved && d.PublicKey != "":
		recs = append(recs, mailRecords(domain, s.zone, d.PublicKey)...)
	}
	return recs, nil
}

// syncZone publishes a domain's zone as zoneRecords says, with a serial
// above the one before, and has DNS answer it. A zone left with neither
// web nor mail records is removed. It reports whether mail records stayed
// and how many records the zone has.
func (s *Zones) syncZone(ctx context.Context, orgID, domain string, web bool) (mailKept bool, n int, err error) {
	recs, err := s.zoneRecords(ctx, orgID, domain, web)
	if err != nil {
		return false, 0, err
	}
	mailKept = slices.ContainsFunc(recs, isMailRecord)
	defer s.platform.InvalidateZone(domain)
	if !web && !mailKept {
		return false, 0, s.store.Domains().DeleteZone(ctx, domain)
	}
	serial := s.Now().Unix()
	if z, err := s.store.Domains().Zone(ctx, domain); err == nil {
		serial = max(serial, z.Serial+1)
	} else if !errors.Is(err, store.ErrNotFound) {
		return false, 0, err
	}
	err = s.store.Domains().PutZone(ctx, store.Zone{Domain: domain, OrgID: orgID, Serial: serial, Records: zone.EncodeRecords(recs), UpdatedAt: s.Now()})
	return mailKept, len(recs), err
}

// mailSetUp reports whether the organisation's email setup owns mail
// records in domain's zone.
func (s *Zones) mailSetUp(ctx context.Context, orgID, domain string) (bool, error) {
	if domain == "" {
		return false, nil
	}
	d, err := s.store.Mail().Domain(ctx, domain)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil && d.OrgID == orgID && MailState(d.State) != MailRemoved, err
}
