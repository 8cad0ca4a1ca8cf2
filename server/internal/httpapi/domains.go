package httpapi

import (
	"context"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/service"
)

func (o domainRoutes) ListDomains(ctx context.Context, req api.ListDomainsRequestObject) (api.ListDomainsResponseObject, error) {
	l, err := listed(ctx, req.Params.Cursor, req.Params.Limit, nil, o.svc.Domains.List, domainInfo, nil, "list_domains", "")
	if err != nil {
		return nil, err
	}
	next := actions.Page("list_domains", l.NextCursor, l.Args, actions.Tool("search_domains", "agent", nil))
	return api.ListDomains200JSONResponse{Data: models.DomainList{Domains: l.Items, NextCursor: l.NextCursor}, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o domainRoutes) GetDomain(ctx context.Context, req api.GetDomainRequestObject) (api.GetDomainResponseObject, error) {
	d, err := o.svc.Domains.Get(ctx, auth.FromContext(ctx).OrgID, string(req.Domain))
	if err != nil {
		return nil, err
	}
	return api.GetDomain200JSONResponse{Data: domainInfo(*d), Actions: []models.Action{actions.Stop("done")}, FormatVersion: FormatVersion}, nil
}

// domainInfo is the contract's view of a registered domain.
func domainInfo(d service.Domain) models.DomainInfo {
	name, paid := d.Name, d.Paid.USD()
	return models.DomainInfo{Id: &name, Domain: d.Name, RegisteredAt: d.RegisteredAt, Years: d.Years, PaidUsd: &paid,
		ServiceId: optional(d.ServiceID), Zone: d.Zone}
}

func (o domainRoutes) SearchDomains(ctx context.Context, req api.SearchDomainsRequestObject) (api.SearchDomainsResponseObject, error) {
	p := req.Params
	q := service.DomainSearch{Query: p.Q, Full: p.IncludeExotic != nil && *p.IncludeExotic, MaxFirstYear: micro(p.MaxFirstYearPriceUsd),
		MaxRenewal: micro(p.MaxRenewalPriceUsd)}
	if p.Limit != nil {
		q.Limit = *p.Limit
	}
	if p.TldAllowlist != nil {
		q.Allow = *p.TldAllowlist
	}
	if p.TldDenylist != nil {
		q.Deny = *p.TldDenylist
	}
	res, err := o.svc.Domains.Search(ctx, q)
	if err != nil {
		return nil, err
	}
	return api.SearchDomains200JSONResponse{Data: domainSearchResult(res, p), Actions: searchNext(res), FormatVersion: FormatVersion}, nil
}

// domainSearchResult is the contract's view of a search, echoing the
// ceilings as they were asked.
func domainSearchResult(r *service.DomainSearchResult, p models.SearchDomainsParams) models.DomainSearchResult {
	out := models.DomainSearchResult{Candidates: make([]models.DomainCandidate, 0, len(r.Candidates))}
	for _, c := range r.Candidates {
		period := c.RenewalPeriodYears
		out.Candidates = append(out.Candidates, models.DomainCandidate{Domain: c.Domain, Tld: c.TLD, Available: c.Available, Premium: c.Premium,
			FirstYearPriceUsd: usdPtr(c.FirstYear), RenewalPriceUsd: usdPtr(c.Renewal), RenewalPeriodYears: &period,
			AnnualizedRenewalPriceUsd: usdPtr(c.AnnualRenewal)})
	}
	catalog := models.Common
	if r.Full {
		catalog = models.Full
	}
	out.AppliedFilters = models.AppliedDomainFilters{Query: r.Label, Catalog: catalog, IncludeExotic: r.Full, Tlds: r.TLDs,
		TldAllowlist: r.Allow, TldDenylist: r.Deny, MaxFirstYearPriceUsd: p.MaxFirstYearPriceUsd, MaxRenewalPriceUsd: p.MaxRenewalPriceUsd, Limit: r.Limit}
	if len(r.Ignored) > 0 {
		out.AppliedFilters.IgnoredTlds = &r.Ignored
	}
	out.Excluded.LackingPrice = r.Excluded.LackingPrice
	out.Excluded.OverFirstYearCeiling = r.Excluded.OverFirstYearCeiling
	out.Excluded.OverRenewalCeiling = r.Excluded.OverRenewalCeiling
	return out
}

// searchNext is what a search suggests: quoting the first available
// priced candidate, searching the full catalog, or stopping.
func searchNext(r *service.DomainSearchResult) []models.Action {
	next := []models.Action{}
	for _, c := range r.Candidates {
		if c.Available && c.FirstYear != nil {
			next = append(next, actions.Tool("create_quote", "agent", map[string]any{
				"items": []any{map[string]any{"kind": "domain", "domain": c.Domain, "years": 1}},
			}))
			break
		}
	}
	if !r.Full {
		next = append(next, actions.Tool("search_domains", "agent", map[string]any{"q": r.Label, "includeExotic": true}))
	}
	return append(next, actions.Stop("done"))
}

// micro is a price in USD as micro-USD; nil stays nil.
func micro(v *float64) *money.MicroUSD {
	if v == nil {
		return nil
	}
	m := money.FromUSD(*v)
	return &m
}

// usdPtr is an amount as the contract's USD; nil stays nil.
func usdPtr(m *money.MicroUSD) *float64 {
	if m == nil {
		return nil
	}
	v := m.USD()
	return &v
}

func (o domainRoutes) AttachDomain(ctx context.Context, req api.AttachDomainRequestObject) (api.AttachDomainResponseObject, error) {
	a, err := o.svc.Domains.Attach(ctx, auth.FromContext(ctx), string(req.Domain), req.Body.ServiceId)
	if err != nil {
		return nil, err
	}
	return api.AttachDomain200JSONResponse{Data: o.attachment(a), Actions: attachmentActions(a.Domain), FormatVersion: FormatVersion}, nil
}

func (o domainRoutes) DetachDomain(ctx context.Context, req api.DetachDomainRequestObject) (api.DetachDomainResponseObject, error) {
	a, err := o.svc.Domains.Detach(ctx, auth.FromContext(ctx), string(req.Domain))
	if err != nil {
		return nil, err
	}
	return api.DetachDomain200JSONResponse{Data: o.attachment(a), Actions: attachmentActions(a.Domain), FormatVersion: FormatVersion}, nil
}

// attachment is the contract's view of an attach or a detach, with its
// receipt (the hosts an attach serves) and its undo: detach after an
// attach, attach to the service it served before after a detach.
func (o domainRoutes) attachment(a *service.DomainAttachment) models.DomainAttachment {
	out := models.DomainAttachment{Domain: a.Domain, State: models.Detached, ServiceId: optional(a.ServiceID),
		PreviousServiceId: optional(a.PreviousServiceID), DomainUrl: optional(a.URL)}
	action, created := "detach_domain", []models.ResourceRef{}
	undo := undoCall("attach_domain", map[string]any{"domain": a.Domain, "serviceId": a.PreviousServiceID})
	if a.ServiceID != "" {
		out.State, action = models.Attached, "attach_domain"
		created = append(created, models.ResourceRef{Type: "host", Id: a.Domain, Url: out.DomainUrl}, models.ResourceRef{Type: "host", Id: "www." + a.Domain})
		undo = undoCall("detach_domain", map[string]any{"domain": a.Domain})
	}
	m := mutation(o.svc.Now(), action, nil, created, undo, a.BudgetRemaining)
	out.Receipt, out.Undo, out.BudgetRemainingUsd = m.Receipt, m.Undo, m.BudgetRemainingUsd
	return out
}

// attachmentActions follow an attach or a detach: read the domain.
func attachmentActions(domain string) []models.Action {
	return []models.Action{actions.Tool("get_domain", "agent", map[string]any{"domain": domain}), actions.Stop("done")}
}
