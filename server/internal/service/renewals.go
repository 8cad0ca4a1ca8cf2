package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

// DomainRenewals is the service's renewals.
func (s *Service) DomainRenewals() *Renewals { return s.renewals }

// RenewalNoticeDays are how many days ahead of an expiry no renewal covers
// the human hears, once each per term.
var RenewalNoticeDays = []int{30, 7, 1}

// renewalWindow is how long before expiry a renewal is made.
const renewalWindow = 30 * 24 * time.Hour

// domainTerm is where a registration stands: its current expiry, the term
// that renews it, and whether it lapsed.
type domainTerm struct {
	expires time.Time
	next    int
	lapsed  bool
}

func termOf(pu store.Purchase, renewals []store.DomainRenewal) domainTerm {
	t := domainTerm{expires: domainExpiry(pu), next: 1}
	for _, r := range renewals {
		if RenewalState(r.State) == RenewalLapsed {
			t.lapsed = true
			return t
		}
		t.expires, t.next = t.expires.AddDate(1, 0, 0), t.next+1
	}
	return t
}

// payerOf is the project a domain's renewals are charged to (the project
// whose launch bought it) and whether that purchase waited for a human
// (the key lacked buy_domain): a renewal follows the purchase's rule.
func (s *Renewals) payerOf(ctx context.Context, pu store.Purchase) (projectID string, gated bool, err error) {
	t, err := s.store.Tasks().GetAnyOrg(ctx, pu.Ref)
	if err == nil && t.ProjectID != "" {
		var pl launchPayload
		if json.Unmarshal([]byte(t.Payload), &pl) == nil {
			return t.ProjectID, pl.Gated, nil
		}
		return t.ProjectID, true, nil
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", true, err
	}
	ps, err := s.store.Projects().List(ctx, pu.OrgID)
	if err != nil || len(ps) == 0 {
		return "", true, err
	}
	return ps[0].ID, true, nil
}

// renewalPrice is a year's renewal of the domain, nil when unpublished.
func (s *Renewals) renewalPrice(domain string) *money.MicroUSD {
	_, tldName, _ := strings.Cut(domain, ".")
	tld, ok := s.prices.Lookup(tldName)
	if !ok {
		return nil
	}
	p := tld.AnnualizedRenewal()
	if p == nil {
		return nil
	}
	v := money.MicroUSD(*p)
	return &v
}

// renewalRefusal says why a renewal cannot be charged now to the
// project, under its policy, nil when it can.
func renewalRefusal(proj store.Project, price *money.MicroUSD, baseURL string) *apierr.Error {
	pol, err := decodePolicy(proj.Policy)
	switch {
	case err != nil:
		return apierr.Internal(err)
	case price == nil:
		return apierr.New("price:unavailable", "the registrar publishes no renewal price for this domain")
	case pol.MaxRenewalPrice != nil && *price > *pol.MaxRenewalPrice:
		return apierr.Newf("policy:price_ceiling", "the renewal costs %s USD, above the project's renewal ceiling", price.Decimal())
	case exhausted(proj):
		return budgetExhausted(proj, pol, baseURL)
	case *price > remaining(proj):
		return apierr.Newf("budget:insufficient", "the renewal costs %.2f USD and the project has %.2f USD left", usd(*price), usd(remaining(proj)))
	}
	return nil
}

// renew charges a year's renewal to a locked project, with its ledger
// entry and receipt.
func (s *Renewals) renew(ctx context.Context, tx *store.Tx, proj store.Project, domain string, term int, price money.MicroUSD, by string, now time.Time) error {
	if err := tx.DomainRenewals().AddRenewal(ctx, store.DomainRenewal{Domain: domain, Term: term, OrgID: proj.OrgID, ProjectID: proj.ID, State: "renewed",
		AmountMicro: price, DecidedBy: by, CreatedAt: now}); err != nil {
		return err
	}
	if err := tx.Projects().MoveMoney(ctx, proj.ID, 0, price); err != nil {
		return err
	}
	receipt := Receipt{ID: auth.ID("rcp"), Action: "renew_domain", Costs: []Cost{{Item: "domain_renewal:" + domain, Amount: price}}, Total: price, At: now}
	_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: proj.OrgID, Actor: by, Action: "domain_renewed", ObjectType: "domain", ObjectID: domain,
		Details: map[string]any{"projectId": proj.ID, "term": term, "amountMicroUsd": price, "receipt": receipt}}, now)
	return err
}

// renewDomains renews each registration entering its last 30 days when
// its purchase's rule allows it without a human (the key held buy_domain)
// and the renewal fits the paying project's budget and policy; otherwise
// the human hears 30, 7 and 1 days ahead and may renew on the domains
// page, and at expiry the registration lapses: its zone is removed.
func (s *Renewals) renewDomains(ctx context.Context) error {
	purchases, err := s.store.DomainRenewals().AllPurchases(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, pu := range purchases {
		errs = append(errs, s.renewOne(ctx, pu))
	}
	return errors.Join(errs...)
}

func (s *Renewals) renewOne(ctx context.Context, pu store.Purchase) error {
	now := s.Now().UTC()
	projectID, gated, err := s.payerOf(ctx, pu)
	if err != nil || projectID == "" {
		return err
	}
	var notices []store.DomainNotice
	lapsed := false
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		notices, lapsed = nil, false
		proj, err := tx.Projects().Lock(ctx, pu.OrgID, projectID)
		if err != nil {
			return err
		}
		renewals, err := tx.DomainRenewals().Renewals(ctx, pu.Domain)
		if err != nil {
			return err
		}
		term := termOf(pu, renewals)
		if term.lapsed || now.Before(term.expires.Add(-renewalWindow)) {
			return nil
		}
		if !now.Before(term.expires) {
			lapsed = true
			if err := tx.DomainRenewals().AddRenewal(ctx, store.DomainRenewal{Domain: pu.Domain, Term: term.next, OrgID: pu.OrgID, ProjectID: proj.ID, State: "lapsed",
				DecidedBy: "system", CreatedAt: now}); err != nil {
				return err
			}
			if err := tx.Domains().DeleteZone(ctx, pu.Domain); err != nil {
				return err
			}
			_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: pu.OrgID, Actor: "system", Action: "domain_lapsed", ObjectType: "domain", ObjectID: pu.Domain,
				Details: map[string]any{"projectId": proj.ID, "expiredAt": term.expires.Format(time.RFC3339)}}, now)
			return err
		}
		price := s.renewalPrice(pu.Domain)
		if !gated && renewalRefusal(proj, price, s.baseURL()) == nil {
			return s.renew(ctx, tx, proj, pu.Domain, term.next, *price, "system:buy_domain", now)
		}
		for _, d := range RenewalNoticeDays {
			if term.expires.Sub(now) > time.Duration(d)*24*time.Hour {
				continue
			}
			n := store.DomainNotice{Domain: pu.Domain, Term: term.next, Days: d, OrgID: pu.OrgID, ExpiresAt: term.expires, CreatedAt: now}
			added, err := tx.DomainRenewals().AddDomainNotice(ctx, n)
			if err != nil {
				return err
			}
			if !added {
				continue
			}
			notices = append(notices, n)
			if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: pu.OrgID, Actor: "system", Action: "domain_expiry_notice", ObjectType: "domain", ObjectID: pu.Domain,
				Details: map[string]any{"projectId": proj.ID, "daysAhead": d, "expiresAt": term.expires.Format(time.RFC3339)}}, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if lapsed {
		s.platform.InvalidateZone(pu.Domain)
	}
	// The insert that recorded a notice is its claim: this replica alone
	// mails it. A failed mail is logged; the dashboard still shows it.
	for _, n := range notices {
		if err := s.mailDomainNotice(ctx, n); err != nil {
			s.log.Warn("mailing a domain expiry notice", "domain", n.Domain, "days", n.Days, "err", err)
		}
	}
	return nil
}

func (s *Renewals) mailDomainNotice(ctx context.Context, n store.DomainNotice) error {
	emails, err := s.store.Meters().HumanEmails(ctx, n.OrgID)
	if err != nil || len(emails) == 0 {
		return err
	}
	from := "registrar@" + hostOnly(s.baseURL())
	subject := fmt.Sprintf("%s expires in %d day(s) unless you renew it", n.Domain, n.Days)
	body := fmt.Sprintf("The registration of %s runs out on %s, and it will not renew by itself: renewals wait for you (or the renewal does not fit the project's budget).\n\nRenew it here: %s/domains\n\nIf it is not renewed it lapses, and Pier stops serving its zone.\n",
		n.Domain, n.ExpiresAt.Format("2006-01-02"), s.baseURL())
	var errs []error
	for _, to := range emails {
		msg, err := s.systemMessage(ctx, from, to, subject, body)
		if err == nil {
			err = s.deliverAnywhere(ctx, from, to, msg)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// RenewDomain is a signed-in human's renewal of a domain of the
// organisation for a year: the human's decision is the gate. It is charged
// to the project that bought the domain when it fits that project's budget
// and policy.
func (s *Renewals) RenewDomain(ctx context.Context, h Human, domain string) error {
	pu, err := s.store.Domains().PurchaseByDomain(ctx, strings.ToLower(domain))
	if errors.Is(err, store.ErrNotFound) || err == nil && pu.OrgID != h.OrgID {
		return apierr.Newf("not_found:resource", "no domain %s in your organisation", domain)
	} else if err != nil {
		return err
	}
	projectID, _, err := s.payerOf(ctx, pu)
	if err != nil {
		return err
	}
	if projectID == "" {
		return apierr.New("conflict:state", "your organisation has no project to charge the renewal to")
	}
	now := s.Now().UTC()
	return s.store.InTx(ctx, func(tx *store.Tx) error {
		proj, err := tx.Projects().Lock(ctx, h.OrgID, projectID)
		if err != nil {
			return err
		}
		renewals, err := tx.DomainRenewals().Renewals(ctx, pu.Domain)
		if err != nil {
			return err
		}
		term := termOf(pu, renewals)
		if term.lapsed || !now.Before(term.expires) {
			return apierr.Newf("conflict:state", "%s has lapsed; it cannot be renewed here", pu.Domain)
		}
		if now.Before(term.expires.Add(-renewalWindow)) {
			return apierr.Newf("conflict:state", "%s runs until %s; renew it in its last 30 days", pu.Domain, term.expires.Format("2006-01-02"))
		}
		price := s.renewalPrice(pu.Domain)
		if e := renewalRefusal(proj, price, s.baseURL()); e != nil {
			return e
		}
		return s.renew(ctx, tx, proj, pu.Domain, term.next, *price, "human:"+h.UserID, now)
	})
}

// currentExpiry is when a registration runs out, its renewals counted.
func currentExpiry(ctx context.Context, st domainRenewalsStore, pu store.Purchase) (time.Time, error) {
	renewals, err := st.DomainRenewals().Renewals(ctx, pu.Domain)
	return termOf(pu, renewals).expires, err
}
