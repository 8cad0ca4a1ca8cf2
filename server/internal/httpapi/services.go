package httpapi

import (
	"context"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/store"
)

func (o serviceRoutes) ListServices(ctx context.Context, req api.ListServicesRequestObject) (api.ListServicesResponseObject, error) {
	l, next, err := o.svc.Launches.ListServices(ctx, auth.FromContext(ctx).OrgID, store.Filter{
		ProjectID: deref(req.Params.ProjectId), State: deref(req.Params.State), Limit: limitOf(req.Params.Limit)})
	if err != nil {
		return nil, err
	}
	return api.ListServices200JSONResponse{Data: *l, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o serviceRoutes) GetService(ctx context.Context, req api.GetServiceRequestObject) (api.GetServiceResponseObject, error) {
	v, next, err := o.svc.Launches.GetService(ctx, auth.FromContext(ctx).OrgID, req.Id)
	if err != nil {
		return nil, err
	}
	return api.GetService200JSONResponse{Data: *v, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o serviceRoutes) LaunchService(ctx context.Context, req api.LaunchServiceRequestObject) (api.LaunchServiceResponseObject, error) {
	t, next, err := o.svc.Launches.Launch(ctx, auth.FromContext(ctx), req.Id, models.LaunchRequest(*req.Body))
	if err != nil {
		return nil, err
	}
	return api.LaunchService202JSONResponse{Data: *t, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o serviceRoutes) TeardownService(ctx context.Context, req api.TeardownServiceRequestObject) (api.TeardownServiceResponseObject, error) {
	t, next, err := o.svc.Launches.Teardown(ctx, auth.FromContext(ctx), req.Id)
	if err != nil {
		return nil, err
	}
	return api.TeardownService202JSONResponse{Data: *t, Actions: next, FormatVersion: FormatVersion}, nil
}
