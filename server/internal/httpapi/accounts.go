package httpapi

import (
	"context"

	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/auth"
)

func (o *operations) CreateQuote(ctx context.Context, req api.CreateQuoteRequestObject) (api.CreateQuoteResponseObject, error) {
	q, next, err := o.svc.CreateQuote(ctx, auth.FromContext(ctx), sdk.QuoteRequest(*req.Body))
	if err != nil {
		return nil, err
	}
	return api.CreateQuote201JSONResponse{Data: *q, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o *operations) ReleaseQuote(ctx context.Context, req api.ReleaseQuoteRequestObject) (api.ReleaseQuoteResponseObject, error) {
	q, next, err := o.svc.ReleaseQuote(ctx, auth.FromContext(ctx), req.Id)
	if err != nil {
		return nil, err
	}
	return api.ReleaseQuote200JSONResponse{Data: *q, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o *operations) GetProject(ctx context.Context, req api.GetProjectRequestObject) (api.GetProjectResponseObject, error) {
	p, next, err := o.svc.GetProject(ctx, auth.FromContext(ctx).OrgID, req.Id)
	if err != nil {
		return nil, err
	}
	return api.GetProject200JSONResponse{Data: *p, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o *operations) ListProjects(ctx context.Context, req api.ListProjectsRequestObject) (api.ListProjectsResponseObject, error) {
	l, next, err := o.svc.ListProjects(ctx, auth.FromContext(ctx).OrgID)
	if err != nil {
		return nil, err
	}
	return api.ListProjects200JSONResponse{Data: *l, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o *operations) RequestBudgetRaise(ctx context.Context, req api.RequestBudgetRaiseRequestObject) (api.RequestBudgetRaiseResponseObject, error) {
	t, next, err := o.svc.RequestBudgetRaise(ctx, auth.FromContext(ctx), req.Id, sdk.BudgetRaiseRequest(*req.Body))
	if err != nil {
		return nil, err
	}
	return api.RequestBudgetRaise202JSONResponse{Data: *t, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o *operations) GetTask(ctx context.Context, req api.GetTaskRequestObject) (api.GetTaskResponseObject, error) {
	t, next, err := o.svc.GetTask(ctx, auth.FromContext(ctx).OrgID, req.Id)
	if err != nil {
		return nil, err
	}
	return api.GetTask200JSONResponse{Data: *t, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o *operations) ListLedgerEntries(ctx context.Context, req api.ListLedgerEntriesRequestObject) (api.ListLedgerEntriesResponseObject, error) {
	after, limit := 0, 100
	if req.Params.After != nil {
		after = *req.Params.After
	}
	if req.Params.Limit != nil {
		limit = *req.Params.Limit
	}
	page, next, err := o.svc.LedgerEntries(ctx, auth.FromContext(ctx).OrgID, int64(after), limit)
	if err != nil {
		return nil, err
	}
	return api.ListLedgerEntries200JSONResponse{Data: *page, Actions: next, FormatVersion: FormatVersion}, nil
}
