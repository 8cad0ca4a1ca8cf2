package httpapi

import (
	"context"

	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/store"
)

func deref[T ~string](p *T) string {
	if p == nil {
		return ""
	}
	return string(*p)
}

func limitOf(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func (o *operations) ListServices(ctx context.Context, req api.ListServicesRequestObject) (api.ListServicesResponseObject, error) {
	l, next, err := o.svc.ListServices(ctx, auth.FromContext(ctx).OrgID, store.Filter{
		ProjectID: deref(req.Params.ProjectId), State: deref(req.Params.State), Limit: limitOf(req.Params.Limit)})
	if err != nil {
		return nil, err
	}
	return api.ListServices200JSONResponse{Data: *l, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o *operations) GetService(ctx context.Context, req api.GetServiceRequestObject) (api.GetServiceResponseObject, error) {
	v, next, err := o.svc.GetService(ctx, auth.FromContext(ctx).OrgID, req.Id)
	if err != nil {
		return nil, err
	}
	return api.GetService200JSONResponse{Data: *v, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o *operations) ListTasks(ctx context.Context, req api.ListTasksRequestObject) (api.ListTasksResponseObject, error) {
	l, next, err := o.svc.ListTasks(ctx, auth.FromContext(ctx).OrgID, store.Filter{State: deref(req.Params.State), Limit: limitOf(req.Params.Limit)})
	if err != nil {
		return nil, err
	}
	return api.ListTasks200JSONResponse{Data: *l, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o *operations) ListBundles(ctx context.Context, req api.ListBundlesRequestObject) (api.ListBundlesResponseObject, error) {
	l, next, err := o.svc.ListBundles(ctx, auth.FromContext(ctx).OrgID, store.Filter{Limit: limitOf(req.Params.Limit)})
	if err != nil {
		return nil, err
	}
	return api.ListBundles200JSONResponse{Data: *l, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o *operations) GetBundle(ctx context.Context, req api.GetBundleRequestObject) (api.GetBundleResponseObject, error) {
	v, next, err := o.svc.GetBundle(ctx, auth.FromContext(ctx).OrgID, req.Id)
	if err != nil {
		return nil, err
	}
	return api.GetBundle200JSONResponse{Data: *v, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o *operations) ListDomains(ctx context.Context, req api.ListDomainsRequestObject) (api.ListDomainsResponseObject, error) {
	l, next, err := o.svc.ListDomains(ctx, auth.FromContext(ctx).OrgID, store.Filter{Limit: limitOf(req.Params.Limit)})
	if err != nil {
		return nil, err
	}
	return api.ListDomains200JSONResponse{Data: *l, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o *operations) GetDomain(ctx context.Context, req api.GetDomainRequestObject) (api.GetDomainResponseObject, error) {
	v, next, err := o.svc.GetDomain(ctx, auth.FromContext(ctx).OrgID, string(req.Domain))
	if err != nil {
		return nil, err
	}
	return api.GetDomain200JSONResponse{Data: *v, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o *operations) ListQuotes(ctx context.Context, req api.ListQuotesRequestObject) (api.ListQuotesResponseObject, error) {
	l, next, err := o.svc.ListQuotes(ctx, auth.FromContext(ctx).OrgID, store.Filter{
		ProjectID: deref(req.Params.ProjectId), State: deref(req.Params.State), Limit: limitOf(req.Params.Limit)})
	if err != nil {
		return nil, err
	}
	return api.ListQuotes200JSONResponse{Data: *l, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o *operations) GetQuote(ctx context.Context, req api.GetQuoteRequestObject) (api.GetQuoteResponseObject, error) {
	v, next, err := o.svc.GetQuote(ctx, auth.FromContext(ctx).OrgID, req.Id)
	if err != nil {
		return nil, err
	}
	return api.GetQuote200JSONResponse{Data: *v, Actions: next, FormatVersion: FormatVersion}, nil
}
