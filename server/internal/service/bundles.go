package service

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"unicode"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/safetext"
	"github.com/pierhq/pier/server/internal/site"
	"github.com/pierhq/pier/server/internal/store"
)

func bundleSummary(b store.Bundle) models.BundleSummary {
	return models.BundleSummary{BundleId: b.ID, Sha256: b.SHA256, FileCount: b.FileCount, TotalBytes: int(b.TotalBytes), CreatedAt: b.CreatedAt}
}

// Bundle limits. The request body limit (x-body-limit) bounds the encoded
// upload; these bound what it decodes to.
const (
	MaxBundleFiles = 5000
	MaxFileBytes   = 25 << 20
	MaxBundleBytes = 48 << 20
)

// safePath accepts a relative slash-separated path with no empty, dot or
// dot-dot segments, no backslashes and no control characters, and returns it
// unchanged; anything else is refused rather than cleaned, so that what is
// served is exactly what was uploaded.
func safePath(p string) error {
	switch {
	case p == "":
		return errors.New("empty path")
	case len(p) > 512:
		return errors.New("longer than 512 bytes")
	case strings.HasPrefix(p, "/"):
		return errors.New("absolute path")
	case strings.ContainsRune(p, '\\'):
		return errors.New("backslash in path")
	case strings.IndexFunc(p, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) >= 0:
		return errors.New("control character in path")
	case safetext.Problem(p) != "":
		return errors.New(safetext.Problem(p))
	}
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "", ".", "..":
			return fmt.Errorf("segment %q not allowed", seg)
		}
		if len(seg) > 255 {
			return errors.New("segment longer than 255 bytes")
		}
	}
	if path.Clean(p) != p {
		return errors.New("path is not in clean form")
	}
	return nil
}

// ListBundles lists the organisation's bundles.
func (s *Bundles) List(ctx context.Context, orgID string, f store.Filter) (*models.BundleList, []models.Action, error) {
	bs, err := s.store.Bundles().List(ctx, orgID, f)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	out := &models.BundleList{Bundles: []models.BundleSummary{}}
	for _, b := range bs {
		out.Bundles = append(out.Bundles, bundleSummary(b))
	}
	return out, []models.Action{actions.Stop("done")}, nil
}

// GetBundle reads one bundle with its manifest.
func (s *Bundles) Get(ctx context.Context, orgID, id string) (*models.BundleInfo, []models.Action, error) {
	b, err := s.store.Bundles().Get(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, apierr.Newf("not_found:resource", "no bundle %s in your organisation", id).
			WithActions(actions.Tool("list_bundles", "agent", nil))
	}
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	var manifest []site.File
	if err := json.Unmarshal([]byte(b.Manifest), &manifest); err != nil {
		return nil, nil, apierr.Internal(err)
	}
	sum := bundleSummary(b)
	out := &models.BundleInfo{BundleId: sum.BundleId, Sha256: sum.Sha256, FileCount: sum.FileCount, TotalBytes: sum.TotalBytes, CreatedAt: sum.CreatedAt, Files: []models.BundleFile{}}
	for _, f := range manifest {
		out.Files = append(out.Files, models.BundleFile{ContentType: f.ContentType, Path: f.Path, Sha256: f.SHA256, Size: int(f.Size)})
	}
	return out, []models.Action{actions.Tool("launch_service", "agent", map[string]any{"bundleId": b.ID, "target": "edge"})}, nil
}

// UploadAssets stores files content-addressed and records the bundle. It
// launches nothing.
func (s *Bundles) Upload(ctx context.Context, p *auth.Principal, req models.UploadAssetsRequest) (*models.Bundle, []models.Action, error) {
	proj, err := s.store.Projects().Get(ctx, p.OrgID, req.ProjectId)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, projectNotFound(req.ProjectId)
	}
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	if len(req.Files) > MaxBundleFiles {
		return nil, nil, apierr.Newf("input:invalid", "a bundle holds at most %d files", MaxBundleFiles)
	}
	type decoded struct {
		file site.File
		data []byte
	}
	var files []decoded
	var total int64
	seen := map[string]bool{}
	var problems []models.FieldProblem
	for i, f := range req.Files {
		field := fmt.Sprintf("body.files.%d", i)
		if err := safePath(f.Path); err != nil {
			problems = append(problems, models.FieldProblem{Field: field + ".path", Problem: err.Error()})
			continue
		}
		if seen[f.Path] {
			problems = append(problems, models.FieldProblem{Field: field + ".path", Problem: "duplicate path " + f.Path})
			continue
		}
		seen[f.Path] = true
		data, err := base64.StdEncoding.DecodeString(f.ContentBase64)
		if err != nil {
			problems = append(problems, models.FieldProblem{Field: field + ".contentBase64", Problem: "not standard base64"})
			continue
		}
		if len(data) > MaxFileBytes {
			problems = append(problems, models.FieldProblem{Field: field, Problem: fmt.Sprintf("larger than %d bytes", MaxFileBytes)})
			continue
		}
		total += int64(len(data))
		sum := sha256.Sum256(data)
		ctype := site.ContentType(f.Path)
		if f.ContentType != nil && *f.ContentType != "" {
			ctype = *f.ContentType
		}
		files = append(files, decoded{site.File{Path: f.Path, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data)), ContentType: ctype}, data})
	}
	if len(problems) > 0 {
		return nil, nil, apierr.Newf("input:invalid", "%s: %s", problems[0].Field, problems[0].Problem).WithDetails(problems...)
	}
	if total > MaxBundleBytes {
		return nil, nil, apierr.Newf("input:body_too_large", "the bundle decodes to %d bytes; the limit is %d", total, MaxBundleBytes)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].file.Path < files[j].file.Path })
	if err := s.projects.checkBundleQuota(ctx, p.OrgID, total); err != nil {
		return nil, nil, err
	}

	now := s.Now()
	manifest := make([]site.File, 0, len(files))
	newBlobs := 0
	for _, f := range files {
		has, err := s.store.Bundles().HasBlob(ctx, f.file.SHA256)
		if err != nil {
			return nil, nil, apierr.Internal(err)
		}
		if !has {
			if err := s.store.Bundles().PutBlob(ctx, f.file.SHA256, f.data, now); err != nil {
				return nil, nil, apierr.Internal(err)
			}
			newBlobs++
		}
		manifest = append(manifest, f.file)
	}
	mj, _ := json.Marshal(manifest)
	sum := sha256.Sum256(mj)
	b, created, err := s.store.Bundles().Put(ctx, store.Bundle{ID: auth.ID("bnd"), OrgID: p.OrgID, SHA256: hex.EncodeToString(sum[:]),
		FileCount: len(manifest), TotalBytes: total, Manifest: string(mj), CreatedAt: now.UTC()})
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	if created {
		err = s.store.InTx(ctx, func(tx *store.Tx) error {
			_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: "upload_assets", ObjectType: "bundle", ObjectID: b.ID,
				Details: map[string]any{"sha256": b.SHA256, "files": b.FileCount, "bytes": b.TotalBytes}}, now)
			return err
		})
		if err != nil {
			return nil, nil, apierr.Internal(err)
		}
	}
	m := s.Mutation("upload_assets", nil, []models.ResourceRef{{Type: "bundle", Id: b.ID}}, nil, remaining(proj))
	out := &models.Bundle{BundleId: b.ID, FileCount: b.FileCount, TotalBytes: int(b.TotalBytes), Sha256: b.SHA256,
		Deduplicated: ptr(!created), NewBlobs: ptr(newBlobs), Receipt: m.Receipt, Undo: m.Undo, BudgetRemainingUsd: m.BudgetRemainingUsd}
	next := []models.Action{
		actions.Tool("launch_service", "agent", map[string]any{"id": proj.ID, "bundleId": b.ID, "target": "edge"}),
	}
	return out, next, nil
}
