package httpapi

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/operation"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

func (o bundleRoutes) ListBundles(ctx context.Context, req api.ListBundlesRequestObject) (api.ListBundlesResponseObject, error) {
	l, err := listed(ctx, req.Params.Cursor, req.Params.Limit, nil, o.svc.Bundles.List, bundleSummary,
		func(v service.BundleView) string { return v.ID }, "list_bundles", "")
	if err != nil {
		return nil, err
	}
	return api.ListBundles200JSONResponse{Data: models.BundleList{Bundles: l.Items, NextCursor: l.NextCursor}, Actions: l.Actions, FormatVersion: FormatVersion}, nil
}

func bundleSummary(b service.BundleView) models.BundleSummary {
	return models.BundleSummary{Id: &b.ID, BundleId: b.ID, Sha256: b.SHA256, FileCount: b.FileCount, TotalBytes: int(b.TotalBytes), CreatedAt: b.CreatedAt}
}

func (o bundleRoutes) GetBundle(ctx context.Context, req api.GetBundleRequestObject) (api.GetBundleResponseObject, error) {
	b, err := o.svc.Bundles.Get(ctx, auth.FromContext(ctx).OrgID, req.Id)
	if err != nil {
		return nil, err
	}
	out := models.BundleInfo{BundleId: b.ID, Sha256: b.SHA256, FileCount: b.FileCount, TotalBytes: int(b.TotalBytes), CreatedAt: b.CreatedAt,
		Files: make([]models.BundleFile, 0, len(b.Files))}
	for _, f := range b.Files {
		out.Files = append(out.Files, models.BundleFile{ContentType: f.ContentType, Path: f.Path, Sha256: f.SHA256, Size: int(f.Size)})
	}
	next := []models.Action{actions.Tool("launch_service", "agent", map[string]any{"bundleId": b.ID, "target": b.Target})}
	return api.GetBundle200JSONResponse{Data: out, Actions: next, FormatVersion: FormatVersion}, nil
}

func (o bundleRoutes) UploadAssets(ctx context.Context, req api.UploadAssetsRequestObject) (api.UploadAssetsResponseObject, error) {
	b, err := o.svc.Bundles.Upload(ctx, auth.FromContext(ctx), uploadRequest(ctx, o.svc, models.UploadAssetsRequest(*req.Body)))
	if err != nil {
		return nil, err
	}
	return api.UploadAssets201JSONResponse{Data: bundleWire(b), Actions: bundleNext(b), FormatVersion: FormatVersion}, nil
}

// uploadRequest maps upload_assets' body; a member not sent stays nil.
func uploadRequest(ctx context.Context, svc *service.Service, body models.UploadAssetsRequest) service.UploadRequest {
	out := service.UploadRequest{ProjectID: body.ProjectId, BaseBundleID: deref(body.BaseBundleId)}
	if body.Manifest != nil {
		out.Manifest = manifestIntake(ctx, svc, *body.Manifest, true)
	}
	if body.Files != nil {
		out.Files = make([]service.InlineFile, 0, len(*body.Files))
		for _, f := range *body.Files {
			out.Files = append(out.Files, service.InlineFile{Path: f.Path, ContentBase64: f.ContentBase64, ContentType: deref(f.ContentType)})
		}
	}
	if body.Changes != nil {
		out.Changes = make([]service.ManifestEntry, 0, len(*body.Changes))
		for _, f := range *body.Changes {
			out.Changes = append(out.Changes, manifestEntry(f))
		}
	}
	if body.Removed != nil {
		out.Removed = append([]string{}, *body.Removed...)
	}
	return out
}

// manifestIntake is the manifest the middleware streamed into the
// service as the body came (serveManifest), or else takes a decoded
// manifest's entries.
func manifestIntake(ctx context.Context, svc *service.Service, files []models.ManifestFile, upload bool) *service.ManifestIntake {
	if m, ok := ctx.Value(streamedKey{}).(*service.ManifestIntake); ok {
		return m
	}
	m := svc.Bundles.NewManifest(ctx, auth.FromContext(ctx), upload)
	for _, f := range files {
		m.Add(manifestEntry(f))
	}
	return m
}

func manifestEntry(f models.ManifestFile) service.ManifestEntry {
	return service.ManifestEntry{Path: f.Path, SHA256: f.Sha256, Size: f.Size, ContentType: deref(f.ContentType)}
}

// bundleWire is the contract's view of a bundle just recorded.
func bundleWire(b *service.UploadedBundle) models.Bundle {
	m := wireMutated(b.Mutated)
	return models.Bundle{BundleId: b.ID, FileCount: b.FileCount, TotalBytes: int(b.TotalBytes), Sha256: b.SHA256,
		Deduplicated: ptr(b.Deduplicated), NewBlobs: b.NewBlobs, Receipt: m.Receipt, Undo: m.Undo, BudgetRemainingUsd: m.BudgetRemainingUsd}
}

// bundleNext is the step after a bundle is recorded: launch it.
func bundleNext(b *service.UploadedBundle) []models.Action {
	return []models.Action{actions.Tool("launch_service", "agent", map[string]any{"id": b.ProjectID, "bundleId": b.ID, "target": b.Target})}
}

func (o bundleRoutes) FindMissingBlobs(ctx context.Context, req api.FindMissingBlobsRequestObject) (api.FindMissingBlobsResponseObject, error) {
	v, err := o.svc.Bundles.FindMissing(ctx, auth.FromContext(ctx), req.Body.ProjectId, manifestIntake(ctx, o.svc, req.Body.Manifest, false))
	if err != nil {
		return nil, err
	}
	return api.FindMissingBlobs200JSONResponse{Data: missingWire(v), Actions: uploadSteps(v.ProjectID, v.Missing), FormatVersion: FormatVersion}, nil
}

func missingWire(v *service.MissingBlobs) models.MissingBlobs {
	return models.MissingBlobs{Missing: v.Missing, MissingBytes: int(v.MissingBytes), FileCount: v.FileCount, TotalBytes: int(v.TotalBytes)}
}

// uploadSteps are the actions after a digest check: upload the first
// missing hash (the others the same way), then create the bundle.
func uploadSteps(projectID string, missing []string) []models.Action {
	create := actions.ToolAction("upload_assets", "agent", map[string]any{"projectId": projectID})
	create.MissingArguments = &[]string{"manifest"}
	if len(missing) == 0 {
		return []models.Action{actions.Wrap(create)}
	}
	upload := actions.ToolAction("upload_blob", "agent", map[string]any{"sha256": missing[0]})
	upload.Id = ptr("upload_blobs")
	create.After = &[]string{"upload_blobs"}
	return []models.Action{actions.Wrap(upload), actions.Wrap(create)}
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
	v, err := o.svc.Bundles.UploadBlob(ctx, auth.FromContext(ctx), req.Sha256, data)
	if err != nil {
		return nil, err
	}
	next := actions.ToolNeeding("upload_assets", "agent", nil, "manifest")
	return api.UploadBlob200JSONResponse{Data: blobWire(*v), Actions: []models.Action{next}, FormatVersion: FormatVersion}, nil
}

func blobWire(b service.Blob) models.Blob {
	return models.Blob{Sha256: b.SHA256, Size: b.Size, AlreadyUploaded: b.AlreadyUploaded}
}

// Batches are stored as they arrive, a group at a time: a body cut short
// leaves what fully arrived stored.
const (
	batchGroup      = 256
	batchGroupBytes = 1 << 20
)

// UploadBlobs takes several contents in one body: framed raw bytes
// ("SHA256 SIZE\n" then the bytes, streamed from the connection as they
// arrive) or, from clients that send only JSON, base64. Each is checked
// as it comes and stored in groups; a refusal stores what came before it.
func (o bundleRoutes) UploadBlobs(ctx context.Context, req api.UploadBlobsRequestObject) (api.UploadBlobsResponseObject, error) {
	b := &blobBatch{ctx: ctx, svc: o.svc, p: auth.FromContext(ctx), out: models.BlobBatch{Blobs: []models.Blob{}}}
	switch {
	case req.Body != nil:
		if err := b.readFramed(req.Body); err != nil {
			return nil, b.refused(err)
		}
	case req.JSONBody != nil:
		if err := b.readJSON(req.JSONBody); err != nil {
			return nil, b.refused(err)
		}
	default:
		return nil, apierr.New("input:unsupported_media_type", "send the contents framed as Content-Type: application/octet-stream, or as JSON {blobs: [{sha256, contentBase64}]}")
	}
	if err := b.flush(); err != nil {
		return nil, err
	}
	if len(b.out.Blobs) == 0 {
		return nil, apierr.New("input:invalid", "the body holds no content",
			actions.ToolNeeding("find_missing_blobs", "agent", nil, "projectId", "manifest")).
			WithDetails(models.FieldProblem{Field: "body", Problem: "empty"})
	}
	next := actions.ToolNeeding("upload_assets", "agent", nil, "manifest")
	return api.UploadBlobs200JSONResponse{Data: b.out, Actions: []models.Action{next}, FormatVersion: FormatVersion}, nil
}

// blobBatch is an upload_blobs request under way: the contents read and
// not yet stored, stored a group at a time, and what was stored.
type blobBatch struct {
	ctx        context.Context
	svc        *service.Service
	p          *auth.Principal
	out        models.BlobBatch
	group      []store.BlobContent
	groupBytes int
}

// flush stores the group read so far.
func (b *blobBatch) flush() error {
	if len(b.group) == 0 {
		return nil
	}
	// A client gone mid-body cancels the request's context, and what
	// fully arrived before is still to be kept.
	blobs, err := b.svc.Bundles.PutBlobs(context.WithoutCancel(b.ctx), b.p, b.group)
	if err != nil {
		return err
	}
	for _, bl := range blobs {
		b.out.Blobs = append(b.out.Blobs, blobWire(bl))
		b.out.Bytes += bl.Size
		if !bl.AlreadyUploaded {
			b.out.NewBlobs++
		}
	}
	b.group, b.groupBytes = b.group[:0], 0
	return nil
}

// add takes content i, named field in a refusal: body.i framed,
// body.blobs.i in JSON.
func (b *blobBatch) add(field string, i int, sha string, data []byte) error {
	if err := batchCount(i); err != nil {
		return err
	}
	if err := service.CheckBlob(field, sha, data); err != nil {
		return err
	}
	b.group = append(b.group, store.BlobContent{SHA256: sha, Data: data})
	b.groupBytes += len(data)
	if len(b.group) >= batchGroup || b.groupBytes >= batchGroupBytes {
		return b.flush()
	}
	return nil
}

// refused stores what came before a refusal and says so.
func (b *blobBatch) refused(err error) error {
	if ferr := b.flush(); ferr != nil {
		return ferr
	}
	var e *apierr.Error
	if !errors.As(err, &e) {
		return err
	}
	e.Message = fmt.Sprintf("%s; the %d contents before it are stored, none after it was read", e.Message, len(b.out.Blobs))
	if len(e.Actions) == 0 {
		e = e.WithActions(actions.ToolNeeding("find_missing_blobs", "agent", nil, "projectId", "manifest"))
	}
	return e
}

// readFramed adds the contents of a framed body.
func (b *blobBatch) readFramed(body io.Reader) error {
	br := bufio.NewReaderSize(body, 64<<10)
	// read is how much of the body the contents so far took: a content
	// announced larger than what the body limit leaves is refused before
	// any of it is read or allocated.
	var read int64
	for i := 0; ; i++ {
		sha, size, n, err := readFrameHeader(br, i)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		read += int64(n)
		if err := batchCount(i); err != nil {
			return err
		}
		if left := batchBodyLimit - read; int64(size) > left {
			return apierr.Newf("input:body_too_large", "content %d announces %d bytes, more than the %d left of the %d-byte body; send it in another batch, or alone with upload_blob", i, size, max(left, 0), batchBodyLimit).
				WithDetails(models.FieldProblem{Field: fmt.Sprintf("body.%d", i), Problem: fmt.Sprintf("past %d bytes of body", batchBodyLimit)})
		}
		read += int64(size)
		data := make([]byte, size)
		if _, err := io.ReadFull(br, data); err != nil {
			return bodyError(err, i, fmt.Sprintf("the body ended within content %d, %d bytes announced; nothing of it was stored", i, size))
		}
		if err := b.add(fmt.Sprintf("body.%d", i), i, sha, data); err != nil {
			return err
		}
	}
}

// readJSON adds the contents of a JSON body.
func (b *blobBatch) readJSON(body *models.UploadBlobsRequest) error {
	for i, bl := range body.Blobs {
		data, err := base64.StdEncoding.DecodeString(bl.ContentBase64)
		if err != nil {
			return apierr.New("input:invalid", "contentBase64 is not standard base64").
				WithDetails(models.FieldProblem{Field: fmt.Sprintf("body.blobs.%d.contentBase64", i), Problem: "not standard base64"})
		}
		if err := b.add(fmt.Sprintf("body.blobs.%d", i), i, bl.Sha256, data); err != nil {
			return err
		}
	}
	return nil
}

// batchBodyLimit is upload_blobs' body limit (x-body-limit).
var batchBodyLimit = func() int64 {
	op, _ := operation.Lookup("upload_blobs")
	return op.BodyLimit
}()

// batchCount refuses the content past the count a batch holds.
func batchCount(i int) error {
	if i < service.MaxBatchBlobs {
		return nil
	}
	return apierr.Newf("input:invalid", "a batch holds at most %d contents", service.MaxBatchBlobs).
		WithDetails(models.FieldProblem{Field: fmt.Sprintf("body.%d", i), Problem: fmt.Sprintf("more than %d contents", service.MaxBatchBlobs)})
}

// readFrameHeader reads a batch's "SHA256 SIZE\n" and says how many bytes
// it took; io.EOF at the end of the body.
func readFrameHeader(br *bufio.Reader, i int) (string, int, int, error) {
	line, err := br.ReadSlice('\n')
	if err == io.EOF && len(line) == 0 {
		return "", 0, 0, io.EOF
	}
	sha, size, err := frameHeader(line, err, i)
	return sha, size, len(line), err
}

func frameHeader(line []byte, err error, i int) (string, int, error) {
	field := fmt.Sprintf("body.%d", i)
	if err != nil || len(line) > 64+1+9+1 {
		if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
			return "", 0, bodyError(err, i, "reading the body failed")
		}
		return "", 0, apierr.Newf("input:invalid", "content %d does not start with a line \"SHA256 SIZE\"", i).
			WithDetails(models.FieldProblem{Field: field, Problem: "no frame header"})
	}
	sha, num, ok := strings.Cut(strings.TrimSuffix(string(line), "\n"), " ")
	size, perr := strconv.Atoi(num)
	if !ok || perr != nil || size < 0 || num != strconv.Itoa(size) {
		return "", 0, apierr.Newf("input:invalid", "content %d's frame header %q is not \"SHA256 SIZE\"", i, strings.TrimSpace(string(line))).
			WithDetails(models.FieldProblem{Field: field, Problem: "malformed frame header"})
	}
	if size > service.MaxFileBytes {
		return "", 0, apierr.Newf("input:body_too_large", "content %d announces %d bytes; a file holds at most %d", i, size, service.MaxFileBytes).
			WithDetails(models.FieldProblem{Field: field, Problem: fmt.Sprintf("larger than %d bytes", service.MaxFileBytes)})
	}
	return sha, size, nil
}

// bodyError is a failure reading a batch's body: over the limit, or cut
// short.
func bodyError(err error, i int, msg string) *apierr.Error {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return apierr.Newf("input:body_too_large", "the body exceeds %d bytes, the limit for upload_blobs, within content %d", mb.Limit, i).
			WithDetails(models.FieldProblem{Field: fmt.Sprintf("body.%d", i), Problem: fmt.Sprintf("past %d bytes of body", mb.Limit)})
	}
	return apierr.New("input:invalid", msg).
		WithDetails(models.FieldProblem{Field: fmt.Sprintf("body.%d", i), Problem: "body cut short"})
}
