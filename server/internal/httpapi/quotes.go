package httpapi

import (
	"context"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/auth"
)

func (o quoteRoutes) ListQuotes(ctx context.Context, req api.ListQuotesRequestObject) (api.ListQuotesResponseObject, error) {
	f, err := page(req.Params.Cursor, req.Params.Limit)
	if err != nil {
		return nil, err
	}
	f.ProjectID, f.State = deref(req.Params.ProjectId), deref(req.Params.State)
	l, next, err := o.svc.Quotes.List(ctx, auth.FromContext(ctx).OrgID, f)
	if err != nil {
		return nil, err
	}
	return api.ListQuotes200JSONResponse{Data: *l, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o quoteRoutes) GetQuote(ctx context.Context, req api.GetQuoteRequestObject) (api.GetQuoteResponseObject, error) {
	v, next, err := o.svc.Quotes.Get(ctx, auth.FromContext(ctx).OrgID, req.Id)
	if err != nil {
		return nil, err
	}
	return api.GetQuote200JSONResponse{Data: *v, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o quoteRoutes) Estimate(ctx context.Context, req api.EstimateRequestObject) (api.EstimateResponseObject, error) {
	res, next, err := o.svc.Quotes.Estimate(ctx, models.EstimateRequest(*req.Body))
	if err != nil {
		return nil, err
	}
	return api.Estimate200JSONResponse{Data: *res, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o quoteRoutes) CreateQuote(ctx context.Context, req api.CreateQuoteRequestObject) (api.CreateQuoteResponseObject, error) {
	q, next, err := o.svc.Quotes.Create(ctx, auth.FromContext(ctx), models.QuoteRequest(*req.Body))
	if err != nil {
		return nil, err
	}
	return api.CreateQuote201JSONResponse{Data: *q, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o quoteRoutes) ReleaseQuote(ctx context.Context, req api.ReleaseQuoteRequestObject) (api.ReleaseQuoteResponseObject, error) {
	q, next, err := o.svc.Quotes.Release(ctx, auth.FromContext(ctx), req.Id)
	if err != nil {
		return nil, err
	}
	return api.ReleaseQuote200JSONResponse{Data: *q, Actions: next, FormatVersion: FormatVersion}, nil
}
