package httpapi

import (
	"context"

	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/service"
)

// operations implements the strict server interface by calling the
// service; the operations a later release serves fall through to
// Unimplemented.
type operations struct {
	Unimplemented
	svc *service.Service
	cfg *Config
}

var _ api.StrictServerInterface = (*operations)(nil)

func (o *operations) SearchDomains(ctx context.Context, req api.SearchDomainsRequestObject) (api.SearchDomainsResponseObject, error) {
	res, next, err := o.svc.SearchDomains(ctx, req.Params)
	if err != nil {
		return nil, err
	}
	return api.SearchDomains200JSONResponse{Data: *res, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o *operations) Estimate(ctx context.Context, req api.EstimateRequestObject) (api.EstimateResponseObject, error) {
	res, next, err := o.svc.Estimate(ctx, sdk.EstimateRequest(*req.Body))
	if err != nil {
		return nil, err
	}
	return api.Estimate200JSONResponse{Data: *res, Actions: next, FormatVersion: FormatVersion}, nil
}
