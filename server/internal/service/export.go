package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sort"

	"github.com/pierhq/pier/ledger"
	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/site"
	"github.com/pierhq/pier/server/internal/store"
	"github.com/pierhq/pier/server/internal/zone"
)

// LeaveManifestPath names the package's manifest; its SHA-256 is the
// package's manifestSha256.
const LeaveManifestPath = "manifest.json"

// leaveManifest lists every other file of the package with its hash.
type leaveManifest struct {
	Format    string            `json:"format"`
	ProjectID string            `json:"projectId"`
	CreatedAt string            `json:"createdAt"`
	Files     []sdk.PackageFile `json:"files"`
	Domains   []string          `json:"domains"`
}

// ExportProject builds the leave package: each service's site files, the
// zone of every domain the organisation owns as an RFC 1035 master file, the
// organisation's audit ledger, and a manifest of SHA-256 hashes. Auth codes
// for transfer-out are not in it: only a signed-in human sees those.
func (s *Service) ExportProject(ctx context.Context, p *auth.Principal, projectID string) (*sdk.LeavePackage, []sdk.Action, error) {
	proj, err := s.Store.Projects().Get(ctx, p.OrgID, projectID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, projectNotFound(projectID)
	}
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	services, err := s.Store.Services().InProject(ctx, p.OrgID, projectID)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	contents := map[string][]byte{}
	var domains []string
	for _, svc := range services {
		if svc.State == "live" && svc.BundleID != "" {
			b, err := s.Store.Bundles().Get(ctx, p.OrgID, svc.BundleID)
			if err != nil {
				return nil, nil, apierr.Internal(err)
			}
			var files []site.File
			if err := json.Unmarshal([]byte(b.Manifest), &files); err != nil {
				return nil, nil, apierr.Internal(err)
			}
			for _, f := range files {
				data, err := s.Store.Bundles().Blob(ctx, f.SHA256)
				if err != nil {
					return nil, nil, apierr.Internal(err)
				}
				contents["sites/"+svc.Name+"/"+f.Path] = data
			}
		}
	}
	// Every domain the organisation owns goes in, with its zone, whatever
	// happened to the services that used it: the zone Pier serves, or, for
	// a domain no live service serves any more, the zone it would serve.
	purchases, err := s.Store.Domains().OrgPurchases(ctx, p.OrgID)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	for _, pu := range purchases {
		serial, recs := s.Now().Unix(), zone.BuildZone(pu.Domain, s.P.Zone)
		z, err := s.Store.Domains().Zone(ctx, pu.Domain)
		switch {
		case err == nil:
			if recs, err = zone.DecodeRecords(z.Records); err != nil {
				return nil, nil, apierr.Internal(err)
			}
			serial = z.Serial
		case !errors.Is(err, store.ErrNotFound):
			return nil, nil, apierr.Internal(err)
		}
		master, err := zone.MasterFile(pu.Domain, serial, recs)
		if err != nil {
			return nil, nil, apierr.Internal(err)
		}
		contents["zones/"+pu.Domain+".zone"] = []byte(master)
		domains = append(domains, pu.Domain)
	}
	entries, err := s.Store.Ledger().Entries(ctx, p.OrgID, 0, 1<<30)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	var lb bytes.Buffer
	if err := ledger.WriteJSONL(&lb, entries); err != nil {
		return nil, nil, apierr.Internal(err)
	}
	contents["ledger.jsonl"] = lb.Bytes()

	paths := make([]string, 0, len(contents))
	for p := range contents {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	man := leaveManifest{Format: "pier.leave.v1", ProjectID: projectID, CreatedAt: s.Now().UTC().Format("2006-01-02T15:04:05Z"), Domains: domains}
	if man.Domains == nil {
		man.Domains = []string{}
	}
	var files []sdk.PackageFile
	for _, path := range paths {
		sum := sha256.Sum256(contents[path])
		entry := sdk.PackageFile{Path: path, Sha256: hex.EncodeToString(sum[:]), Size: len(contents[path])}
		man.Files = append(man.Files, entry)
		entry.ContentBase64 = ptr(base64.StdEncoding.EncodeToString(contents[path]))
		files = append(files, entry)
	}
	mj, _ := json.MarshalIndent(man, "", "  ")
	msum := sha256.Sum256(mj)
	files = append([]sdk.PackageFile{{Path: LeaveManifestPath, Sha256: hex.EncodeToString(msum[:]), Size: len(mj),
		ContentBase64: ptr(base64.StdEncoding.EncodeToString(mj))}}, files...)

	m := s.Mutation("export_project", nil, []sdk.ResourceRef{{Type: "leave_package", Id: hex.EncodeToString(msum[:8])}}, nil, remaining(proj))
	out := &sdk.LeavePackage{ProjectId: projectID, ManifestSha256: hex.EncodeToString(msum[:]), Files: files,
		Receipt: m.Receipt, Undo: m.Undo, BudgetRemainingUsd: m.BudgetRemainingUsd}
	next := []sdk.Action{actions.Stop("done")}
	if len(domains) > 0 {
		next = append([]sdk.Action{actions.URL(s.baseURL()+"/domains", "transfer_out", "human")}, next...)
	}
	return out, next, nil
}
