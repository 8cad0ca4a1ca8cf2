package service

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/site"
	"github.com/pierhq/pier/server/internal/store"
)

// Every noun an agent makes can be listed and read, within its own
// organisation only: another organisation's id reads as not found.

func (s *Service) serviceView(v store.Service) sdk.ServiceInfo {
	out := sdk.ServiceInfo{
		Id: v.ID, ProjectId: v.ProjectID, Name: v.Name, Target: v.Target, State: sdk.ServiceInfoState(v.State),
		PreviewUrl: s.hostURL("https", v.PreviewHost), TaskId: v.TaskID, CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt,
	}
	if v.Domain != "" {
		d, u := v.Domain, s.hostURL("https", v.Domain)
		out.Domain, out.DomainUrl = &d, &u
	}
	if v.BundleID != "" {
		b := v.BundleID
		out.BundleId = &b
	}
	return out
}

func serviceActions(v store.Service) []sdk.Action {
	next := []sdk.Action{actions.Tool("get_task", "agent", map[string]any{"id": v.TaskID})}
	if v.State == "live" || v.State == "failed" {
		next = append(next, actions.Tool("teardown_service", "agent", map[string]any{"id": v.ID}))
	}
	return next
}

// ListServices lists the organisation's services.
func (s *Service) ListServices(ctx context.Context, orgID string, f store.Filter) (*sdk.ServiceList, []sdk.Action, error) {
	vs, err := s.Store.Services().List(ctx, orgID, f)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	out := &sdk.ServiceList{Services: []sdk.ServiceInfo{}}
	for _, v := range vs {
		out.Services = append(out.Services, s.serviceView(v))
	}
	next := []sdk.Action{}
	if len(vs) > 0 {
		next = append(next, actions.Tool("get_service", "agent", map[string]any{"id": vs[0].ID}))
	}
	return out, append(next, actions.Stop("done")), nil
}

// GetService reads one service.
func (s *Service) GetService(ctx context.Context, orgID, id string) (*sdk.ServiceInfo, []sdk.Action, error) {
	v, err := s.Store.Services().Get(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, apierr.Newf("not_found:resource", "no service %s in your organisation", id).
			WithActions(actions.Tool("list_services", "agent", nil))
	}
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	out := s.serviceView(v)
	return &out, serviceActions(v), nil
}

// ListTasks lists the organisation's tasks, newest first.
func (s *Service) ListTasks(ctx context.Context, orgID string, f store.Filter) (*sdk.TaskList, []sdk.Action, error) {
	ts, err := s.Store.Tasks().ListFiltered(ctx, orgID, f)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	out := &sdk.TaskList{Tasks: []sdk.TaskHandle{}}
	for _, t := range ts {
		v, err := s.taskView(t)
		if err != nil {
			return nil, nil, apierr.Internal(err)
		}
		out.Tasks = append(out.Tasks, *v)
	}
	next := []sdk.Action{}
	if len(ts) > 0 {
		next = append(next, actions.Tool("get_task", "agent", map[string]any{"id": ts[0].ID}))
	}
	return out, append(next, actions.Stop("done")), nil
}

func bundleSummary(b store.Bundle) sdk.BundleSummary {
	return sdk.BundleSummary{BundleId: b.ID, Sha256: b.SHA256, FileCount: b.FileCount, TotalBytes: int(b.TotalBytes), CreatedAt: b.CreatedAt}
}

// ListBundles lists the organisation's bundles.
func (s *Service) ListBundles(ctx context.Context, orgID string, f store.Filter) (*sdk.BundleList, []sdk.Action, error) {
	bs, err := s.Store.Bundles().List(ctx, orgID, f)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	out := &sdk.BundleList{Bundles: []sdk.BundleSummary{}}
	for _, b := range bs {
		out.Bundles = append(out.Bundles, bundleSummary(b))
	}
	return out, []sdk.Action{actions.Stop("done")}, nil
}

// GetBundle reads one bundle with its manifest.
func (s *Service) GetBundle(ctx context.Context, orgID, id string) (*sdk.BundleInfo, []sdk.Action, error) {
	b, err := s.Store.Bundles().Get(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, apierr.Newf("not_found:resource", "no bundle %s in your organisation", id).
			WithActions(actions.Tool("list_bundles", "agent", nil))
	}
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	var manifest []site.File
	if err := json.Unmarshal([]byte(b.Manifest), &manifest); err != nil {
		return nil, nil, apierr.Internal(err)
	}
	sum := bundleSummary(b)
	out := &sdk.BundleInfo{BundleId: sum.BundleId, Sha256: sum.Sha256, FileCount: sum.FileCount, TotalBytes: sum.TotalBytes, CreatedAt: sum.CreatedAt, Files: []sdk.BundleFile{}}
	for _, f := range manifest {
		out.Files = append(out.Files, sdk.BundleFile{ContentType: f.ContentType, Path: f.Path, Sha256: f.SHA256, Size: int(f.Size)})
	}
	return out, []sdk.Action{actions.Tool("launch_service", "agent", map[string]any{"bundleId": b.ID, "target": "edge"})}, nil
}

func (s *Service) domainView(ctx context.Context, orgID string, p store.Purchase) (sdk.DomainInfo, error) {
	paid := money.MicroUSD(p.AmountMicro).USD()
	out := sdk.DomainInfo{Domain: p.Domain, RegisteredAt: p.CreatedAt, Years: p.Years, PaidUsd: &paid}
	if v, err := s.Store.Services().LiveForDomain(ctx, orgID, p.Domain); err == nil {
		id := v.ID
		out.ServiceId = &id
	} else if !errors.Is(err, store.ErrNotFound) {
		return out, err
	}
	if _, err := s.Store.Domains().Zone(ctx, p.Domain); err == nil {
		out.Zone = true
	} else if !errors.Is(err, store.ErrNotFound) {
		return out, err
	}
	return out, nil
}

// ListDomains lists the domains the organisation owns.
func (s *Service) ListDomains(ctx context.Context, orgID string, f store.Filter) (*sdk.DomainList, []sdk.Action, error) {
	ps, err := s.Store.Domains().ListPurchases(ctx, orgID, f)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	out := &sdk.DomainList{Domains: []sdk.DomainInfo{}}
	for _, p := range ps {
		v, err := s.domainView(ctx, orgID, p)
		if err != nil {
			return nil, nil, apierr.Internal(err)
		}
		out.Domains = append(out.Domains, v)
	}
	return out, []sdk.Action{actions.Tool("search_domains", "agent", nil), actions.Stop("done")}, nil
}

// GetDomain reads one domain the organisation owns.
func (s *Service) GetDomain(ctx context.Context, orgID, domain string) (*sdk.DomainInfo, []sdk.Action, error) {
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	p, err := s.Store.Domains().PurchaseByDomain(ctx, domain)
	if errors.Is(err, store.ErrNotFound) || err == nil && p.OrgID != orgID {
		return nil, nil, apierr.Newf("not_found:resource", "your organisation owns no domain %s", domain).
			WithActions(actions.Tool("list_domains", "agent", nil), actions.Tool("search_domains", "agent", map[string]any{"q": domain}))
	}
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	v, err := s.domainView(ctx, orgID, p)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	return &v, []sdk.Action{actions.Stop("done")}, nil
}

func quoteView(q store.Quote) (sdk.QuoteInfo, error) {
	var items []pricedItem
	if err := json.Unmarshal([]byte(q.Items), &items); err != nil {
		return sdk.QuoteInfo{}, err
	}
	out := sdk.QuoteInfo{QuoteId: q.ID, ProjectId: q.ProjectID, Decision: sdk.QuoteDecision(q.Decision), State: sdk.QuoteState(q.State),
		AmountUsd: money.MicroUSD(q.AmountMicro).USD(), CreatedAt: q.CreatedAt, Items: []sdk.QuoteItem{}}
	if q.State == "held" {
		e := q.ExpiresAt
		out.HoldExpiresAt = &e
	}
	for _, it := range items {
		qi := sdk.QuoteItem{Kind: sdk.QuoteItemKind(it.Kind)}
		if it.Domain != "" {
			d := sdk.DomainName(it.Domain)
			qi.Domain = &d
		}
		if it.Years > 0 {
			y := it.Years
			qi.Years = &y
		}
		if it.Target != "" {
			t := sdk.TargetName(it.Target)
			qi.Target = &t
		}
		if it.Workload != "" {
			w := sdk.Workload(it.Workload)
			qi.Workload = &w
		}
		if it.Months > 0 {
			m := it.Months
			qi.Months = &m
		}
		if it.Name != "" {
			n := it.Name
			qi.Name = &n
		}
		out.Items = append(out.Items, qi)
	}
	return out, nil
}

// ListQuotes lists the organisation's quotes.
func (s *Service) ListQuotes(ctx context.Context, orgID string, f store.Filter) (*sdk.QuoteInfoList, []sdk.Action, error) {
	qs, err := s.Store.Quotes().List(ctx, orgID, f)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	out := &sdk.QuoteInfoList{Quotes: []sdk.QuoteInfo{}}
	for _, q := range qs {
		v, err := quoteView(q)
		if err != nil {
			return nil, nil, apierr.Internal(err)
		}
		out.Quotes = append(out.Quotes, v)
	}
	return out, []sdk.Action{actions.Stop("done")}, nil
}

// GetQuote reads one quote.
func (s *Service) GetQuote(ctx context.Context, orgID, id string) (*sdk.QuoteInfo, []sdk.Action, error) {
	q, err := s.Store.Quotes().Get(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, apierr.Newf("not_found:resource", "no quote %s in your organisation", id).
			WithActions(actions.Tool("list_quotes", "agent", nil))
	}
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	v, err := quoteView(q)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	var next []sdk.Action
	if q.State == "held" {
		var items []pricedItem
		_ = json.Unmarshal([]byte(q.Items), &items)
		next = append(next, launchFromQuote(q.ProjectID, q.ID, items),
			actions.Tool("release_quote", "agent", map[string]any{"id": q.ID}))
	}
	return &v, append(next, actions.Stop("done")), nil
}
