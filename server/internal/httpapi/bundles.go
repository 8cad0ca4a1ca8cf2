package httpapi

import (
	"context"
	"encoding/base64"
	"io"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/apierr"
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

func (o bundleRoutes) FindMissingBlobs(ctx context.Context, req api.FindMissingBlobsRequestObject) (api.FindMissingBlobsResponseObject, error) {
	v, next, err := o.svc.Bundles.FindMissing(ctx, auth.FromContext(ctx), models.FindMissingBlobsRequest(*req.Body))
	if err != nil {
		return nil, err
	}
	return api.FindMissingBlobs200JSONResponse{Data: *v, Actions: next, FormatVersion: FormatVersion}, nil
}

// UploadBlob takes the content as raw bytes (application/octet-stream,
// read by the middleware up to the operation's limit) or, from clients
// that send only JSON, as base64.
func (o bundleRoutes) UploadBlob(ctx context.Context, req api.UploadBlobRequestObject) (api.UploadBlobResponseObject, error) {
	var data []byte
	switch {
	case req.Body != nil:
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, apierr.Newf("input:invalid", "reading the body failed: %v", err)
		}
		data = b
	case req.JSONBody != nil:
		b, err := base64.StdEncoding.DecodeString(req.JSONBody.ContentBase64)
		if err != nil {
			return nil, apierr.New("input:invalid", "contentBase64 is not standard base64").
				WithDetails(models.FieldProblem{Field: "body.contentBase64", Problem: "not standard base64"})
		}
		data = b
	default:
		return nil, apierr.New("input:unsupported_media_type", "send the content as Content-Type: application/octet-stream, or as JSON {contentBase64}")
	}
	v, next, err := o.svc.Bundles.UploadBlob(ctx, auth.FromContext(ctx), req.Sha256, data)
	if err != nil {
		return nil, err
	}
	return api.UploadBlob200JSONResponse{Data: *v, Actions: next, FormatVersion: FormatVersion}, nil
}
