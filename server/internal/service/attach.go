package service

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

// A domain serves at most one service at a time: the one holding the
// domain and www. under it in the host table, which the edge routes by.
// attach_domain and detach_domain move it; DNS follows (the web records
// come and go with the attachment, the mail records stay) and the edge
// gets certificates for the hosts it now serves.

// ownedDomain is the organisation's purchase of domain. A domain it does
// not own is not found, whoever owns it: another organisation's domains
// are invisible, with the same answer as a name nobody bought.
func (s *Domains) ownedDomain(ctx context.Context, orgID, domain string) (store.Purchase, error) {
	pu, err := s.store.Domains().PurchaseByDomain(ctx, domain)
	if errors.Is(err, store.ErrNotFound) || err == nil && pu.OrgID != orgID {
		return pu, apierr.Newf("not_found:resource", "your organisation owns no domain %s", domain).
			WithActions(actions.Tool("list_domains", "agent", nil), actions.Tool("search_domains", "agent", map[string]any{"q": domain}))
	}
	if err != nil {
		return pu, apierr.Internal(err)
	}
	return pu, nil
}

// domainHeldBy is the refusal for a domain another of the organisation's
// services holds: it names that service, and its actions detach the
// domain and then do what was asked (the tool then, with args).
func (s edge) domainHeldBy(ctx context.Context, tx *store.Tx, orgID, domain, then string, args map[string]any) error {
	id, _, err := tx.Services().HostOwner(ctx, domain)
	if err != nil {
		return err
	}
	name := id
	if holder, err := tx.Services().Get(ctx, orgID, id); err == nil {
		name = fmt.Sprintf("%s (%s, %s)", id, holder.Name, holder.State)
	}
	return apierr.Newf("conflict:domain_attached", "%s is attached to service %s; detach it there (detach_domain), then attach it here", domain, name).
		WithActions(actions.Tool("detach_domain", "agent", map[string]any{"domain": domain}), actions.Tool(then, "agent", args))
}

// DomainAttachment is where a domain serves after attach_domain or
// detach_domain. The doors add the mutation's receipt and its undo (detach
// after an attach, attach to the previous service after a detach).
type DomainAttachment struct {
	Domain string
	// ServiceID is the service the domain serves now; empty once detached.
	ServiceID string
	// PreviousServiceID is the service a detach took the domain from.
	PreviousServiceID string
	// URL is where the service answers on the domain, while attached.
	URL string
	// BudgetRemaining is what is left of the service's project's budget.
	BudgetRemaining money.MicroUSD
}

// attachment is the answer of attach_domain and detach_domain.
func (s *Domains) attachment(ctx context.Context, p *auth.Principal, domain, now, before string) *DomainAttachment {
	a := &DomainAttachment{Domain: domain, ServiceID: now, PreviousServiceID: before}
	if now != "" {
		a.URL = s.hostURL("https", domain)
	}
	if svc, err := s.store.Services().Get(ctx, p.OrgID, firstOf(now, before)); err == nil {
		if st, err := s.projects.State(ctx, p, svc.ProjectID); err == nil {
			a.BudgetRemaining = st.RemainingMicro
		}
	}
	return a
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Attach puts an owned domain on a live service of the organisation.
// Attaching it where it is already is a no-op that answers the same.
func (s *Domains) Attach(ctx context.Context, p *auth.Principal, domain, serviceID string) (*DomainAttachment, error) {
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	if _, err := s.ownedDomain(ctx, p.OrgID, domain); err != nil {
		return nil, err
	}
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		svc, err := attachableService(ctx, tx, p.OrgID, serviceID, domain)
		if err != nil || svc.Domain == domain {
			return err
		}
		err = tx.Services().AttachDomain(ctx, svc.ID, p.OrgID, domain, s.Now())
		if errors.Is(err, store.ErrConflict) {
			return s.domainHeldBy(ctx, tx, p.OrgID, domain, "attach_domain", map[string]any{"domain": domain, "serviceId": svc.ID})
		}
		if err != nil {
			return err
		}
		_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: "attach_domain", ObjectType: "domain", ObjectID: domain,
			Details: map[string]any{"serviceId": svc.ID}}, s.Now())
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := s.serveDomain(ctx, p.OrgID, domain); err != nil {
		return nil, apierr.Internal(err)
	}
	return s.attachment(ctx, p, domain, serviceID, ""), nil
}

// attachableService is the service a domain may be attached to: the
// organisation's, live (or crashed), serving no other domain.
func attachableService(ctx context.Context, tx *store.Tx, orgID, serviceID, domain string) (store.Service, error) {
	svc, err := tx.Services().Lock(ctx, orgID, serviceID)
	if errors.Is(err, store.ErrNotFound) {
		return svc, apierr.Newf("not_found:resource", "no service %s in your organisation", serviceID).
			WithActions(actions.Tool("list_services", "agent", nil))
	}
	if err != nil {
		return svc, err
	}
	switch ServiceState(svc.State) {
	case ServiceLive, ServiceCrashed:
	case ServiceLaunching, ServiceTearingDown:
		return svc, apierr.Newf("conflict:state", "service %s is %s; wait for its task, then attach %s", svc.ID, svc.State, domain).
			WithActions(actions.Retry("get_task", "agent", map[string]any{"id": svc.TaskID}, 2))
	default:
		return svc, apierr.Newf("conflict:state", "service %s is %s and serves nothing; attach %s to a live service", svc.ID, svc.State, domain).
			WithActions(actions.Tool("list_services", "agent", nil))
	}
	if svc.Domain != "" && svc.Domain != domain {
		return svc, apierr.Newf("conflict:state", "service %s serves %s; a service serves one domain, so detach that first", svc.ID, svc.Domain).
			WithActions(actions.Tool("detach_domain", "agent", map[string]any{"domain": svc.Domain}))
	}
	return svc, nil
}

// serveDomain has DNS answer the domain's web names with the edge and the
// edge hold certificates for them.
func (s *Domains) serveDomain(ctx context.Context, orgID, domain string) error {
	if _, _, err := s.syncZone(ctx, orgID, domain, true); err != nil {
		return err
	}
	s.invalidate(domain)
	for _, h := range []string{domain, "www." + domain} {
		if err := s.platform.Certificate(h); err != nil {
			return fmt.Errorf("certificate for %s: %w", h, err)
		}
	}
	return nil
}

// Detach takes an owned domain off the service it serves. The service
// keeps its preview host; the domain stays registered and its mail
// records stay.
func (s *Domains) Detach(ctx context.Context, p *auth.Principal, domain string) (*DomainAttachment, error) {
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	if _, err := s.ownedDomain(ctx, p.OrgID, domain); err != nil {
		return nil, err
	}
	var before string
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		id, _, err := tx.Services().HostOwner(ctx, domain)
		if errors.Is(err, store.ErrNotFound) {
			return apierr.Newf("conflict:state", "%s is attached to no service", domain).
				WithActions(actions.Tool("list_services", "agent", nil), actions.Stop("done"))
		}
		if err != nil {
			return err
		}
		svc, err := tx.Services().Lock(ctx, p.OrgID, id)
		if err != nil {
			return err
		}
		if ServiceState(svc.State) == ServiceLaunching {
			return apierr.Newf("conflict:state", "service %s is launching with %s; wait for its task, then detach it", svc.ID, domain).
				WithActions(actions.Retry("get_task", "agent", map[string]any{"id": svc.TaskID}, 2))
		}
		before = svc.ID
		if err := tx.Services().DetachDomain(ctx, svc.ID, domain, s.Now()); err != nil {
			return err
		}
		_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: "detach_domain", ObjectType: "domain", ObjectID: domain,
			Details: map[string]any{"serviceId": svc.ID}}, s.Now())
		return err
	})
	if err != nil {
		return nil, err
	}
	if _, _, err := s.syncZone(ctx, p.OrgID, domain, false); err != nil {
		return nil, apierr.Internal(err)
	}
	s.invalidate(domain)
	return s.attachment(ctx, p, domain, "", before), nil
}
