package httpapi

import (
	"context"

	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/auth"
)

func (o domainRoutes) ListDomains(ctx context.Context, req api.ListDomainsRequestObject) (api.ListDomainsResponseObject, error) {
	f, err := page(req.Params.Cursor, req.Params.Limit)
	if err != nil {
		return nil, err
	}
	l, next, err := o.svc.Domains.List(ctx, auth.FromContext(ctx).OrgID, f)
	if err != nil {
		return nil, err
	}
	return api.ListDomains200JSONResponse{Data: *l, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o domainRoutes) GetDomain(ctx context.Context, req api.GetDomainRequestObject) (api.GetDomainResponseObject, error) {
	v, next, err := o.svc.Domains.Get(ctx, auth.FromContext(ctx).OrgID, string(req.Domain))
	if err != nil {
		return nil, err
	}
	return api.GetDomain200JSONResponse{Data: *v, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o domainRoutes) SearchDomains(ctx context.Context, req api.SearchDomainsRequestObject) (api.SearchDomainsResponseObject, error) {
	res, next, err := o.svc.Domains.Search(ctx, req.Params)
	if err != nil {
		return nil, err
	}
	return api.SearchDomains200JSONResponse{Data: *res, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o domainRoutes) AttachDomain(ctx context.Context, req api.AttachDomainRequestObject) (api.AttachDomainResponseObject, error) {
	a, next, err := o.svc.Domains.Attach(ctx, auth.FromContext(ctx), string(req.Domain), req.Body.ServiceId)
	if err != nil {
		return nil, err
	}
	return api.AttachDomain200JSONResponse{Data: *a, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o domainRoutes) DetachDomain(ctx context.Context, req api.DetachDomainRequestObject) (api.DetachDomainResponseObject, error) {
	a, next, err := o.svc.Domains.Detach(ctx, auth.FromContext(ctx), string(req.Domain))
	if err != nil {
		return nil, err
	}
	return api.DetachDomain200JSONResponse{Data: *a, Actions: next, FormatVersion: FormatVersion}, nil
}
