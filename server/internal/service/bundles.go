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
	"time"
	"unicode"

	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/safetext"
	"github.com/pierhq/pier/server/internal/site"
	"github.com/pierhq/pier/server/internal/store"
)

// BundleView is a bundle without its files.
type BundleView struct {
	ID, SHA256 string
	FileCount  int
	TotalBytes int64
	CreatedAt  time.Time
}

func bundleView(b store.Bundle) BundleView {
	return BundleView{ID: b.ID, SHA256: b.SHA256, FileCount: b.FileCount, TotalBytes: b.TotalBytes, CreatedAt: b.CreatedAt}
}

// BundleDetail is a bundle with its files in path order, and the target
// its launch would take (edge, or process for a bundle with a Procfile).
type BundleDetail struct {
	BundleView
	Files  []site.File
	Target string
}

// ManifestEntry is one file of a manifest as a request sends it: its
// path, its content's SHA-256 and size, and a content type ("" for the
// one the path's extension gives).
type ManifestEntry struct {
	Path, SHA256, ContentType string
	Size                      int
}

// InlineFile is one file of a bundle sent with its content, in base64.
type InlineFile struct {
	Path, ContentBase64, ContentType string
}

// Blob is a content the organisation uploaded: its SHA-256, its size and
// whether it was uploaded before.
type Blob struct {
	SHA256          string
	Size            int
	AlreadyUploaded bool
}

// MissingBlobs is what a manifest's check answers: the hashes still to
// upload, in manifest order, what they weigh, and the manifest's size.
type MissingBlobs struct {
	ProjectID    string
	Missing      []string
	MissingBytes int64
	FileCount    int
	TotalBytes   int64
}

// UploadRequest records a bundle in one of three forms: Manifest (content
// uploaded by digest), Files (content inline) or BaseBundleID with
// Changes and Removed. A nil slice, or an empty BaseBundleID, was not sent.
type UploadRequest struct {
	ProjectID    string
	Manifest     *ManifestIntake
	Files        []InlineFile
	BaseBundleID string
	Changes      []ManifestEntry
	Removed      []string
}

// UploadedBundle is a bundle just recorded, or the organisation's bundle
// of the same files (Deduplicated). NewBlobs counts the contents an inline
// upload stored anew (nil for the other forms). ProjectID and Target are
// what its launch would take.
type UploadedBundle struct {
	BundleView
	Deduplicated bool
	NewBlobs     *int
	ProjectID    string
	Target       string
	Mutated      Mutated
}

// Bundle limits. The request body limit (x-body-limit) bounds the encoded
// upload; these bound what it decodes to. A bundle made by digest (a
// manifest of content uploaded one file at a time) may hold more files and
// bytes than one whose content travels inline in one body.
const (
	MaxBundleFiles   = 5000
	MaxManifestFiles = 200000
	MaxFileBytes     = 25 << 20
	MaxBundleBytes   = 48 << 20
	MaxManifestBytes = 512 << 20
)

// maxMissingDetails bounds the hashes a blobs_missing refusal lists;
// find_missing_blobs lists them all.
const maxMissingDetails = 100

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

// List lists the organisation's bundles.
func (s *Bundles) List(ctx context.Context, orgID string, f store.Filter) (*Page[BundleView], error) {
	bs, err := s.store.Bundles().List(ctx, orgID, f)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	out := &Page[BundleView]{Items: make([]BundleView, 0, len(bs)), Args: f.Args()}
	for _, b := range bs {
		out.Items = append(out.Items, bundleView(b))
	}
	if len(bs) > 0 {
		last := bs[len(bs)-1]
		out.NextCursor = nextCursor(f, len(bs), last.CreatedAt, last.ID)
	}
	return out, nil
}

// Get reads one bundle with its manifest.
func (s *Bundles) Get(ctx context.Context, orgID, id string) (*BundleDetail, error) {
	b, err := s.store.Bundles().Get(ctx, orgID, id)
	if err != nil {
		return nil, bundleNotRead(id, err)
	}
	var manifest []site.File
	if err := json.Unmarshal([]byte(b.Manifest), &manifest); err != nil {
		return nil, apierr.Internal(err)
	}
	target, err := s.launchTarget(ctx, store.Bundle{Manifest: b.Manifest})
	if err != nil {
		return nil, apierr.Internal(err)
	}
	if manifest == nil {
		manifest = []site.File{}
	}
	return &BundleDetail{BundleView: bundleView(b), Files: manifest, Target: target}, nil
}

// bundleNotRead is the refusal of a bundle the store did not read: not
// found (another organisation's too), or not read at all.
func bundleNotRead(id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return notInOrg("bundle", id, "list_bundles")
	}
	return apierr.Internal(err)
}

func tooManyFiles(field string, n int) *apierr.Error {
	return apierr.Newf("input:invalid", "a bundle holds at most %d files; this one would hold %d", MaxManifestFiles, n).
		WithField(field, fmt.Sprintf("more than %d files", MaxManifestFiles))
}

func tooManyBytes(field string, total int64) *apierr.Error {
	return apierr.Newf("input:body_too_large", "the manifest adds up to %d bytes; a bundle holds at most %d", total, MaxManifestBytes).
		WithField(field, fmt.Sprintf("more than %d bytes", MaxManifestBytes))
}

// manifestEntries checks manifest entries (safe and distinct paths,
// hashes, sizes) and returns them as files in the order given, their
// total size and their distinct hashes in that order.
func manifestEntries(field string, manifest []ManifestEntry) ([]site.File, int64, []string, error) {
	files := make([]site.File, 0, len(manifest))
	var shas []string
	seenPath := make(map[string]bool, len(manifest))
	seenSHA := make(map[string]bool, len(manifest))
	var total int64
	var problems []Problem
	for i, e := range manifest {
		f, problem := entryFile(fmt.Sprintf("%s.%d", field, i), e, func(p string) bool {
			dup := seenPath[p]
			seenPath[p] = true
			return dup
		})
		if problem != nil {
			problems = append(problems, *problem)
			continue
		}
		total += f.Size
		files = append(files, f)
		if !seenSHA[f.SHA256] {
			seenSHA[f.SHA256] = true
			shas = append(shas, f.SHA256)
		}
	}
	if len(problems) > 0 {
		return nil, 0, nil, fieldsRefused(problems)
	}
	return files, total, shas, nil
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// missingFor answers which of a manifest's hashes the organisation has not
// uploaded (or are no longer stored), in manifest order, with what they
// weigh, from one query. A hash whose stored content has another size than
// the manifest says is refused, naming field: the sizes are what quotas
// count.
func (s *Bundles) missingFor(ctx context.Context, orgID, field string, files []site.File, shas []string) ([]string, int64, error) {
	sizes, err := s.store.Bundles().OrgBlobSizes(ctx, orgID, shas)
	if err != nil {
		return nil, 0, apierr.Internal(err)
	}
	want := make(map[string]int64, len(shas))
	for _, f := range files {
		if size, ok := sizes[f.SHA256]; ok && size != f.Size {
			return nil, 0, sizeMismatch(field, f, size)
		}
		want[f.SHA256] = f.Size
	}
	var missing []string
	var bytes int64
	for _, sha := range shas {
		if _, ok := sizes[sha]; !ok {
			missing = append(missing, sha)
			bytes += want[sha]
		}
	}
	return missing, bytes, nil
}

func (s *Bundles) project(ctx context.Context, orgID, id string) (store.Project, error) {
	proj, err := s.store.Projects().Get(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && proj.DeletedAt != nil {
		return proj, projectNotFound(id)
	}
	if err != nil {
		return proj, apierr.Internal(err)
	}
	return proj, nil
}

// FindMissing checks a manifest whole and answers which of its hashes
// the organisation has still to upload. It stores nothing.
func (s *Bundles) FindMissing(ctx context.Context, p *auth.Principal, projectID string, m *ManifestIntake) (*MissingBlobs, error) {
	if _, err := s.project(ctx, p.OrgID, projectID); err != nil {
		return nil, err
	}
	if err := s.manifestSound(ctx, p, m); err != nil {
		return nil, err
	}
	missing := m.missing
	if missing == nil {
		missing = []string{}
	}
	return &MissingBlobs{ProjectID: projectID, Missing: missing, MissingBytes: m.missingBytes, FileCount: m.n, TotalBytes: m.total}, nil
}

// manifestSound ends a manifest's intake and refuses it, in the order a
// manifest checked whole is refused in: on its own (ManifestIntake.checked),
// over the organisation's quotas, a content of another size than said.
func (s *Bundles) manifestSound(ctx context.Context, p *auth.Principal, m *ManifestIntake) error {
	if err := m.checked(); err != nil {
		return err
	}
	if err := s.projects.checkBundleQuota(ctx, p.OrgID, m.total); err != nil {
		return err
	}
	return m.mismatch
}

// UploadBlob stores one file's content under its SHA-256, once, and
// records that the organisation uploaded it. Uploading it again is a
// success that changes nothing.
func (s *Bundles) UploadBlob(ctx context.Context, p *auth.Principal, sha string, data []byte) (*Blob, error) {
	if !isSHA256(sha) {
		return nil, apierr.New("input:invalid", "the path must name a SHA-256 in 64 lowercase hex digits").
			WithField("path.sha256", "not 64 lowercase hex digits")
	}
	if len(data) > MaxFileBytes {
		return nil, apierr.Newf("input:body_too_large", "the content is %d bytes; a file holds at most %d", len(data), MaxFileBytes).
			WithField("body", fmt.Sprintf("larger than %d bytes", MaxFileBytes))
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != sha {
		return nil, apierr.Newf("input:invalid", "the content's SHA-256 is %s, not %s as the path says; nothing was stored", got, sha).
			WithField("body", fmt.Sprintf("SHA-256 %s (%d bytes) does not match the path", got, len(data)))
	}
	had, err := s.store.Bundles().PutOrgBlob(ctx, p.OrgID, sha, data, s.Now())
	if err != nil {
		return nil, apierr.Internal(err)
	}
	return &Blob{SHA256: sha, Size: len(data), AlreadyUploaded: had}, nil
}

// MaxBatchBlobs bounds the contents of one upload_blobs.
const MaxBatchBlobs = 1000

// CheckBlob refuses content that does not match its SHA-256, or is over
// the file limit; field names it in the refusal.
func CheckBlob(field, sha string, data []byte) *apierr.Error {
	if !isSHA256(sha) {
		return apierr.New("input:invalid", "a content must be named by its SHA-256 in 64 lowercase hex digits").
			WithField(field, "not 64 lowercase hex digits")
	}
	if len(data) > MaxFileBytes {
		return apierr.Newf("input:body_too_large", "the content is %d bytes; a file holds at most %d", len(data), MaxFileBytes).
			WithField(field, fmt.Sprintf("larger than %d bytes", MaxFileBytes))
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != sha {
		return apierr.Newf("input:invalid", "the content's SHA-256 is %s, not %s as sent; nothing of it was stored", got, sha).
			WithField(field, fmt.Sprintf("SHA-256 %s (%d bytes) does not match %s", got, len(data), sha))
	}
	return nil
}

// PutBlobs stores contents already checked (CheckBlob) and records them
// as the organisation's, in one go; storing again what is there changes
// nothing. It returns each content's answer.
func (s *Bundles) PutBlobs(ctx context.Context, p *auth.Principal, contents []store.BlobContent) ([]Blob, error) {
	// The loss count before the write: what it stores is known as of it.
	losses, err := s.store.Bundles().Losses(ctx)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	had, err := s.store.Bundles().PutOrgBlobs(ctx, p.OrgID, contents, s.Now())
	if err != nil {
		return nil, apierr.Internal(err)
	}
	out := make([]Blob, len(contents))
	stored := make(map[string]int64, len(contents))
	for i, c := range contents {
		out[i] = Blob{SHA256: c.SHA256, Size: len(c.Data), AlreadyUploaded: had[i]}
		stored[c.SHA256] = int64(len(c.Data))
	}
	s.known.add(p.OrgID, losses, stored)
	return out, nil
}

// UploadAssets records a bundle. With a manifest, its content must have
// been uploaded by the organisation (find_missing_blobs, upload_blob); with
// files, the content comes inline and is stored content-addressed. It
// launches nothing.
func (s *Bundles) Upload(ctx context.Context, p *auth.Principal, req UploadRequest) (*UploadedBundle, error) {
	proj, err := s.project(ctx, p.OrgID, req.ProjectID)
	if err != nil {
		return nil, err
	}
	var refs []store.PageRef
	var newBlobs *int
	if err := oneForm(req); err != nil {
		return nil, err
	}
	// Every content is checked stored below, or was when the base was:
	// the bundle is recorded as checked at the loss count read first.
	losses, err := s.store.Bundles().Losses(ctx)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	switch {
	case req.BaseBundleID != "":
		if refs, err = s.derive(ctx, p, req, losses); err != nil {
			return nil, err
		}
	case req.Manifest != nil:
		if refs, err = s.fromManifest(ctx, p, req); err != nil {
			return nil, err
		}
		// Its contents were looked up as they came, after the losses were
		// read.
		losses = req.Manifest.losses
	case req.Files != nil:
		files, _, n, err := s.storeInline(ctx, p, req.Files)
		if err != nil {
			return nil, err
		}
		if refs, err = writePages(ctx, s.store.Bundles(), s.Now(), files); err != nil {
			return nil, apierr.Internal(err)
		}
		newBlobs = &n
	}
	b, created, err := s.putBundle(ctx, p, refs, losses, req.BaseBundleID)
	if err != nil {
		return nil, err
	}
	target, err := s.launchTarget(ctx, b)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	m := s.mutated("upload_assets", nil, []Resource{{Type: "bundle", ID: b.ID}}, nil, remaining(proj))
	return &UploadedBundle{BundleView: bundleView(b), Deduplicated: !created, NewBlobs: newBlobs, ProjectID: proj.ID, Target: target, Mutated: m}, nil
}

// fromManifest checks a whole manifest, whose every content the
// organisation must have uploaded, and stores it as pages.
func (s *Bundles) fromManifest(ctx context.Context, p *auth.Principal, req UploadRequest) ([]store.PageRef, error) {
	m := req.Manifest
	if m.w == nil {
		return nil, apierr.Internal(errors.New("a manifest taken for find_missing_blobs was sent to upload_assets"))
	}
	if err := s.manifestSound(ctx, p, m); err != nil {
		return nil, err
	}
	if len(m.missing) > 0 {
		return nil, blobsMissing(req.ProjectID, "body.manifest", m.missing,
			fmt.Sprintf("%d of the manifest's %d distinct contents are not uploaded by your organisation; upload them with upload_blob, then send this again", len(m.missing), m.distinct))
	}
	refs, err := m.pages()
	if err != nil {
		return nil, apierr.Internal(err)
	}
	return refs, nil
}

// putBundle records a bundle of pages, or finds the organisation's bundle
// of the same files, and writes the ledger record of a new one.
func (s *Bundles) putBundle(ctx context.Context, p *auth.Principal, refs []store.PageRef, losses int64, baseID string) (store.Bundle, bool, error) {
	now := s.Now()
	nb := store.Bundle{ID: auth.ID("bnd"), OrgID: p.OrgID, SHA256: rootDigest(refs), Pages: refs, CreatedAt: now.UTC(), Checked: true, CheckedLosses: losses, BaseID: baseID}
	for _, r := range refs {
		nb.FileCount += r.Files
		nb.TotalBytes += r.Bytes
	}
	b, created, err := s.store.Bundles().Put(ctx, nb)
	if err != nil {
		return b, false, apierr.Internal(err)
	}
	if !created {
		return b, false, nil
	}
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		details := map[string]any{"sha256": b.SHA256, "files": b.FileCount, "bytes": b.TotalBytes}
		if baseID != "" {
			details["baseBundleId"] = baseID
		}
		_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: "upload_assets", ObjectType: "bundle", ObjectID: b.ID,
			Details: details}, now)
		return err
	})
	if err != nil {
		return b, true, apierr.Internal(err)
	}
	return b, true, nil
}

// oneForm refuses a request that sends more than one of the forms, none,
// or changes without a base.
func oneForm(req UploadRequest) error {
	var sent []string
	if req.Manifest != nil {
		sent = append(sent, "manifest")
	}
	if req.Files != nil {
		sent = append(sent, "files")
	}
	if req.BaseBundleID != "" {
		sent = append(sent, "baseBundleId")
	}
	switch {
	case len(sent) > 1:
		return apierr.Newf("input:invalid", "send one of manifest (content uploaded by digest), files (content inline) and baseBundleId (a previous bundle with changes), not %s", strings.Join(sent, " and ")).
			WithField("body."+sent[1], "not allowed with "+sent[0])
	case req.BaseBundleID == "" && (req.Changes != nil || req.Removed != nil):
		field := "body.changes"
		if req.Changes == nil {
			field = "body.removed"
		}
		return apierr.New("input:invalid", "changes and removed apply to a base bundle: send baseBundleId with them, or the whole manifest",
			actions.Tool("list_bundles", "agent", nil)).
			WithField(field, "needs baseBundleId")
	case len(sent) == 0:
		return apierr.New("input:invalid", "send manifest (content uploaded by digest: find_missing_blobs, upload_blob), files (content inline) or baseBundleId with changes",
			actions.Tool("find_missing_blobs", "agent", map[string]any{"projectId": req.ProjectID})).
			WithField("body.manifest", "missing")
	}
	return nil
}

// derive makes the manifest of a bundle from a base bundle of the
// organisation, its changes and its removed paths. The result is held to
// the manifest's limits before any content is looked up; then the changed
// files' content must be uploaded by the organisation. The base's
// content was checked stored when the base was made or launched: if no
// content was lost since (losses is the count the base was checked at),
// only the changes are looked up; otherwise every content of the result
// is, as for a whole manifest.
func (s *Bundles) derive(ctx context.Context, p *auth.Principal, req UploadRequest, losses int64) ([]store.PageRef, error) {
	cs, err := readChanges(req)
	if err != nil {
		return nil, err
	}
	// Another organisation's bundle is not found, as an unknown one.
	base, err := s.store.Bundles().Root(ctx, p.OrgID, req.BaseBundleID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierr.Newf("not_found:resource", "no bundle %s in your organisation", req.BaseBundleID).
			WithActions(actions.Tool("list_bundles", "agent", nil)).
			WithField("body.baseBundleId", "no such bundle")
	}
	if err != nil {
		return nil, apierr.Internal(err)
	}
	var refs []store.PageRef
	if base.Pages != nil {
		refs, err = s.derivePages(ctx, base, cs)
	} else {
		refs, err = s.deriveWhole(ctx, base, cs)
	}
	if err != nil {
		return nil, err
	}
	var files int
	var total int64
	for _, r := range refs {
		files += r.Files
		total += r.Bytes
	}
	switch {
	case files > MaxManifestFiles:
		return nil, tooManyFiles("body.changes", files)
	case files == 0:
		return nil, apierr.New("input:invalid", "the bundle would hold no file").
			WithField("body.removed", "removes every file")
	case total > MaxManifestBytes:
		return nil, tooManyBytes("body.changes", total)
	}
	if err := s.projects.checkBundleQuota(ctx, p.OrgID, total); err != nil {
		return nil, err
	}
	if err := s.derivedContentStored(ctx, p.OrgID, req.ProjectID, base, losses, cs, refs); err != nil {
		return nil, err
	}
	return refs, nil
}

// deriveWhole derives from a base stored before pages, whose manifest is
// one JSON document: it is decoded whole, once, and the result is paged.
func (s *Bundles) deriveWhole(ctx context.Context, base store.Bundle, cs changeSet) ([]store.PageRef, error) {
	var baseFiles []site.File
	if err := json.Unmarshal([]byte(base.Manifest), &baseFiles); err != nil {
		return nil, apierr.Internal(err)
	}
	files, _, err := cs.apply(base.ID, baseFiles)
	if err != nil {
		return nil, err
	}
	refs, err := writePages(ctx, s.store.Bundles(), s.Now(), files)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	return refs, nil
}

// changeSet is what a derived bundle changes in its base: the changed or
// added files, by path, and the removed paths.
type changeSet struct {
	changed     []site.File
	changedSHAs []string
	byPath      map[string]int // path to its place in changed
	removed     []string
	drop        map[string]int // path to its place in removed
}

// readChanges checks a derived bundle's changes and removed paths on
// their own: a removed path named once, and not also changed.
func readChanges(req UploadRequest) (changeSet, error) {
	changes := req.Changes
	cs := changeSet{removed: req.Removed}
	if len(changes) > MaxManifestFiles {
		return cs, tooManyFiles("body.changes", len(changes))
	}
	var err error
	if cs.changed, _, cs.changedSHAs, err = manifestEntries("body.changes", changes); err != nil {
		return cs, err
	}
	cs.byPath = make(map[string]int, len(cs.changed))
	for i, f := range cs.changed {
		cs.byPath[f.Path] = i
	}
	cs.drop = make(map[string]int, len(cs.removed))
	var problems []Problem
	for i, r := range cs.removed {
		field := fmt.Sprintf("body.removed.%d", i)
		if _, ok := cs.drop[r]; ok {
			problems = append(problems, Problem{Field: field, Problem: "duplicate path " + r})
		} else if _, ok := cs.byPath[r]; ok {
			problems = append(problems, Problem{Field: field, Problem: "path " + r + " is also in changes"})
		}
		cs.drop[r] = i
	}
	if len(problems) > 0 {
		return cs, fieldsRefused(problems)
	}
	return cs, nil
}

// apply makes the derived bundle's files: the base's, in path order, with
// changes in place and removed paths left out; then the added files. Every
// removed path must be in the base. It returns the files and their size.
func (cs changeSet) apply(baseID string, baseFiles []site.File) ([]site.File, int64, error) {
	files := make([]site.File, 0, len(baseFiles)+len(cs.changed))
	used := make([]bool, len(cs.changed))
	found := 0
	var total int64
	for _, f := range baseFiles {
		if _, ok := cs.drop[f.Path]; ok {
			found++
			continue
		}
		if i, ok := cs.byPath[f.Path]; ok {
			f, used[i] = cs.changed[i], true
		}
		files = append(files, f)
		total += f.Size
	}
	if found < len(cs.drop) {
		inBase := make(map[string]bool, len(baseFiles))
		for _, f := range baseFiles {
			inBase[f.Path] = true
		}
		var problems []Problem
		for i, r := range cs.removed {
			if !inBase[r] {
				problems = append(problems, Problem{Field: fmt.Sprintf("body.removed.%d", i), Problem: "bundle " + baseID + " holds no " + r})
			}
		}
		return nil, 0, fieldsRefused(problems)
	}
	added := false
	for i, f := range cs.changed {
		if !used[i] {
			files = append(files, f)
			total += f.Size
			added = true
		}
	}
	if added {
		sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	}
	return files, total, nil
}

// derivedContentStored checks the organisation uploaded the content a
// derived bundle needs: the changes' only, when the base was checked and
// no content was lost since; else every content of the result, a group of
// pages at a time.
func (s *Bundles) derivedContentStored(ctx context.Context, orgID, projectID string, base store.Bundle, losses int64, cs changeSet, refs []store.PageRef) error {
	var missing []string
	var err error
	field := "body.changes"
	if base.Checked && base.CheckedLosses == losses {
		if len(cs.changedSHAs) > 0 {
			missing, _, err = s.missingFor(ctx, orgID, field, cs.changed, cs.changedSHAs)
		}
	} else {
		field = "body.baseBundleId"
		missing, err = s.pagesMissing(ctx, orgID, field, refs)
	}
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return blobsMissing(projectID, field, missing,
			fmt.Sprintf("%d of the bundle's contents are not uploaded by your organisation; upload them with upload_blob, then send this again", len(missing)))
	}
	return nil
}

// notInBase refuses removed paths the base does not hold.
func notInBase(baseID string, cs changeSet, paths []string) error {
	sort.Slice(paths, func(i, j int) bool { return cs.drop[paths[i]] < cs.drop[paths[j]] })
	var problems []Problem
	for _, r := range paths {
		problems = append(problems, Problem{Field: fmt.Sprintf("body.removed.%d", cs.drop[r]), Problem: "bundle " + baseID + " holds no " + r})
	}
	return fieldsRefused(problems)
}

// blobsMissing is the refusal of a bundle whose content is not all there,
// listing (up to a bound) the hashes to upload.
func blobsMissing(projectID, field string, missing []string, msg string) *apierr.Error {
	e := apierr.New("conflict:blobs_missing", msg)
	for i, sha := range missing {
		if i == maxMissingDetails {
			e = e.WithField(field, fmt.Sprintf("and %d more; find_missing_blobs lists them all", len(missing)-i))
			break
		}
		e = e.WithField(field, "missing "+sha)
	}
	check := actions.ToolAction("find_missing_blobs", "agent", map[string]any{"projectId": projectID})
	upload := actions.ToolAction("upload_blob", "agent", map[string]any{"sha256": missing[0]})
	return e.WithActions(actions.Wrap(check), actions.Wrap(upload))
}

// storeInline decodes inline files, stores their content and records it
// as the organisation's. It returns the manifest sorted by path, the total
// size and how many contents the organisation had not uploaded before.
func (s *Bundles) storeInline(ctx context.Context, p *auth.Principal, in []InlineFile) ([]site.File, int64, int, error) {
	if len(in) > MaxBundleFiles {
		return nil, 0, 0, apierr.Newf("input:invalid", "a bundle sent inline holds at most %d files; send a manifest (find_missing_blobs, upload_blob) for up to %d", MaxBundleFiles, MaxManifestFiles).
			WithActions(actions.ToolNeeding("find_missing_blobs", "agent", nil))
	}
	type decoded struct {
		file site.File
		data []byte
	}
	var files []decoded
	var total int64
	seen := map[string]bool{}
	var problems []Problem
	for i, f := range in {
		field := fmt.Sprintf("body.files.%d", i)
		if err := safePath(f.Path); err != nil {
			problems = append(problems, Problem{Field: field + ".path", Problem: err.Error()})
			continue
		}
		if seen[f.Path] {
			problems = append(problems, Problem{Field: field + ".path", Problem: "duplicate path " + f.Path})
			continue
		}
		seen[f.Path] = true
		data, err := base64.StdEncoding.DecodeString(f.ContentBase64)
		if err != nil {
			problems = append(problems, Problem{Field: field + ".contentBase64", Problem: "not standard base64"})
			continue
		}
		if len(data) > MaxFileBytes {
			problems = append(problems, Problem{Field: field, Problem: fmt.Sprintf("larger than %d bytes", MaxFileBytes)})
			continue
		}
		total += int64(len(data))
		sum := sha256.Sum256(data)
		ctype := site.ContentType(f.Path)
		if f.ContentType != "" {
			ctype = f.ContentType
		}
		files = append(files, decoded{site.File{Path: f.Path, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data)), ContentType: ctype}, data})
	}
	if len(problems) > 0 {
		return nil, 0, 0, fieldsRefused(problems)
	}
	if total > MaxBundleBytes {
		return nil, 0, 0, apierr.Newf("input:body_too_large", "the bundle decodes to %d bytes; the limit is %d", total, MaxBundleBytes)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].file.Path < files[j].file.Path })
	if err := s.projects.checkBundleQuota(ctx, p.OrgID, total); err != nil {
		return nil, 0, 0, err
	}
	now := s.Now()
	manifest := make([]site.File, 0, len(files))
	newBlobs := 0
	for _, f := range files {
		had, err := s.store.Bundles().PutOrgBlob(ctx, p.OrgID, f.file.SHA256, f.data, now)
		if err != nil {
			return nil, 0, 0, apierr.Internal(err)
		}
		if !had {
			newBlobs++
		}
		manifest = append(manifest, f.file)
	}
	return manifest, total, newBlobs, nil
}

// launchTarget is the target a bundle's launch action suggests: a bundle
// with a Procfile at its root is an app to run (process), anything else a
// static site (edge), which would publish an app's source as files. It
// reads only the page that would hold the Procfile.
func (s *Bundles) launchTarget(ctx context.Context, b store.Bundle) (string, error) {
	if b.Pages == nil {
		// Stored before pages: the entry is looked for in the JSON.
		if strings.Contains(b.Manifest, `"path":"Procfile"`) {
			return "process", nil
		}
		return "edge", nil
	}
	_, ok, err := bundleFile(ctx, s.store.Bundles(), b, "Procfile")
	if ok {
		return "process", err
	}
	return "edge", err
}

// fieldsRefused is the refusal of a request's fields: the first problem
// in the message, every one in the details.
func fieldsRefused(problems []Problem) *apierr.Error {
	e := apierr.Newf("input:invalid", "%s: %s", problems[0].Field, problems[0].Problem)
	for _, p := range problems {
		e = e.WithField(p.Field, p.Problem)
	}
	return e
}
