package httpapi

import (
	"context"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/store"
)

func (o bundleRoutes) ListBundles(ctx context.Context, req api.ListBundlesRequestObject) (api.ListBundlesResponseObject, error) {
	l, next, err := o.svc.Bundles.List(ctx, auth.FromContext(ctx).OrgID, store.Filter{Limit: limitOf(req.Params.Limit)})
	if err != nil {
		return nil, err
	}
	return api.ListBundles200JSONResponse{Data: *l, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o bundleRoutes) GetBundle(ctx context.Context, req api.GetBundleRequestObject) (api.GetBundleResponseObject, error) {
	v, next, err := o.svc.Bundles.Get(ctx, auth.FromContext(ctx).OrgID, req.Id)
	if err != nil {
		return nil, err
	}
	return api.GetBundle200JSONResponse{Data: *v, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o bundleRoutes) UploadAssets(ctx context.Context, req api.UploadAssetsRequestObject) (api.UploadAssetsResponseObject, error) {
	b, next, err := o.svc.Bundles.Upload(ctx, auth.FromContext(ctx), models.UploadAssetsRequest(*req.Body))
	if err != nil {
		return nil, err
	}
	return api.UploadAssets201JSONResponse{Data: *b, Actions: next, FormatVersion: FormatVersion}, nil
}
