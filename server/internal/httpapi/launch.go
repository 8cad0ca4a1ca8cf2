package httpapi

import (
	"context"

	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/auth"
)

func (o *operations) UploadAssets(ctx context.Context, req api.UploadAssetsRequestObject) (api.UploadAssetsResponseObject, error) {
	b, next, err := o.svc.UploadAssets(ctx, auth.FromContext(ctx), sdk.UploadAssetsRequest(*req.Body))
	if err != nil {
		return nil, err
	}
	return api.UploadAssets201JSONResponse{Data: *b, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o *operations) LaunchService(ctx context.Context, req api.LaunchServiceRequestObject) (api.LaunchServiceResponseObject, error) {
	t, next, err := o.svc.LaunchService(ctx, auth.FromContext(ctx), req.Id, sdk.LaunchRequest(*req.Body))
	if err != nil {
		return nil, err
	}
	return api.LaunchService202JSONResponse{Data: *t, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o *operations) TeardownService(ctx context.Context, req api.TeardownServiceRequestObject) (api.TeardownServiceResponseObject, error) {
	t, next, err := o.svc.TeardownService(ctx, auth.FromContext(ctx), req.Id)
	if err != nil {
		return nil, err
	}
	return api.TeardownService202JSONResponse{Data: *t, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o *operations) ExportProject(ctx context.Context, req api.ExportProjectRequestObject) (api.ExportProjectResponseObject, error) {
	pkg, next, err := o.svc.ExportProject(ctx, auth.FromContext(ctx), req.Id)
	if err != nil {
		return nil, err
	}
	return api.ExportProject200JSONResponse{Data: *pkg, Actions: next, FormatVersion: FormatVersion}, nil
}
