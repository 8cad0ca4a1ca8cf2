package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/pierhq/pier/holder"
	holderjs "github.com/pierhq/pier/holder/js"
	"github.com/pierhq/pier/internal/lib/sandboxproof"
	"github.com/pierhq/pier/internal/lib/version"
	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/store"
	"github.com/pierhq/pier/verifier"
	verifierjs "github.com/pierhq/pier/verifier/js"
)

// File is one file of the reference release, as the public hosts serve it.
type File struct {
	Body        []byte
	ContentType string
	// SHA256 is the lowercase hex digest of Body, which the manifest names
	// and which serves as the strong ETag.
	SHA256 string
	// Published is true for a file of a published release, which never
	// changes; the scripts served while the release is pending come from
	// the running build and may.
	Published bool
}

// Content types of the release's files.
const (
	contentJSON       = "application/json"
	contentJavaScript = "text/javascript; charset=utf-8"
)

func contentTypeFor(path string) string {
	if strings.HasSuffix(path, ".mjs") {
		return contentJavaScript
	}
	return contentJSON
}

func newFile(path string, body []byte) File {
	return File{Body: body, ContentType: contentTypeFor(path), SHA256: sandboxproof.SHA256Hex(body)}
}

// release is a published release, indexed by path.
type release struct {
	id      string
	proofID string
	files   map[string]File // every path, the manifest included
}

func pendingManifest() ([]byte, error) {
	return sandboxproof.PendingManifest(verifierjs.VerifierMJS, holderjs.HolderMJS)
}

// ReferenceFile returns the bytes the public hosts serve at one of the
// release's paths. Every file comes from the one published release. Until a
// release is published the manifest is pending and names the scripts, which
// are served from this build; the other files do not exist yet.
func (s *Service) ReferenceFile(ctx context.Context, path string) (File, error) {
	rel, err := s.current(ctx)
	if err != nil {
		return File{}, apierr.Internal(err)
	}
	if rel != nil {
		if f, ok := rel.files[path]; ok {
			f.Published = path != sandboxproof.PathManifest
			return f, nil
		}
		return File{}, apierr.Newf("not_found:route", "no reference file %s", path)
	}
	switch path {
	case sandboxproof.PathManifest:
		return newFile(path, s.pending), nil
	case sandboxproof.PathVerifierMJS:
		return newFile(path, verifierjs.VerifierMJS), nil
	case sandboxproof.PathHolderMJS:
		return newFile(path, holderjs.HolderMJS), nil
	}
	return File{}, apierr.Newf("not_found:resource", "%s is not published yet: the reference release is pending (see %s)", path, sandboxproof.PathManifest)
}

// current reads the published release. The pointer is read on every call,
// so a release published by another process or replica is served at once;
// the release itself is cached, since a release never changes.
func (s *Service) current(ctx context.Context) (*release, error) {
	id, err := s.st.SandboxReleases().Current(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	cached := s.release
	s.mu.Unlock()
	if cached != nil && cached.id == id {
		return cached, nil
	}
	r, err := s.st.SandboxReleases().Get(ctx, id)
	if err != nil {
		return nil, err
	}
	rel := &release{id: r.ID, proofID: r.ProofID, files: map[string]File{sandboxproof.PathManifest: newFile(sandboxproof.PathManifest, r.Manifest)}}
	for _, f := range r.Files {
		if sandboxproof.SHA256Hex(f.Body) != f.SHA256 {
			return nil, fmt.Errorf("sandbox: release %s: %s does not match its recorded hash", r.ID, f.Path)
		}
		rel.files[f.Path] = File{Body: f.Body, ContentType: f.ContentType, SHA256: f.SHA256}
	}
	s.mu.Lock()
	s.release = rel
	s.mu.Unlock()
	return rel, nil
}

// ProofEnvelope renders GET /v1/sandbox/proofs/{proofId}: the proof as
// minted (compacted, so JSON-equal to proof.json member for member) as
// data, with the typed actions and the format version beside it.
func ProofEnvelope(proof []byte, actions []models.Action) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"data":`)
	if err := json.Compact(&b, proof); err != nil {
		return nil, fmt.Errorf("sandbox: stored proof is not JSON: %w", err)
	}
	acts, err := json.Marshal(actions)
	if err != nil {
		return nil, err
	}
	b.WriteString(`,"actions":`)
	b.Write(acts)
	b.WriteString(`,"formatVersion":"1"}`)
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// Published describes the release the public hosts serve.
type Published struct {
	ReleaseID string
	ProofID   string
	Manifest  []byte
	// Created is false when an existing release was kept.
	Created bool
}

// PublishOptions adjust PublishReference.
type PublishOptions struct {
	// Replace publishes a new release even when one is published. Caches
	// keep the old files under the same paths for as long as they were told
	// (they are served as immutable), so replace only when the keys change.
	Replace bool
}

// PublishReference mints the reference release: it runs a whole session in
// the sandbox with a simulated holder (a fresh in-process holder key), mints
// its proof, and writes proof.json, both JWKS snapshots, the provenance and
// the two scripts as one release. It verifies the release as an auditor
// would before publishing it, and points the manifest at it only once every
// file is stored. Without Replace an already published release is kept.
func (s *Service) PublishReference(ctx context.Context, opts PublishOptions) (*Published, error) {
	if !opts.Replace {
		rel, err := s.current(ctx)
		if err != nil {
			return nil, err
		}
		if rel != nil {
			return &Published{ReleaseID: rel.id, ProofID: rel.proofID, Manifest: rel.files[sandboxproof.PathManifest].Body}, nil
		}
	}
	proofID, proof, err := s.runReferenceSession(ctx)
	if err != nil {
		return nil, fmt.Errorf("sandbox: reference session: %w", err)
	}
	now := s.now().UTC()
	proofJWKS, err := sandboxproof.PublicJWKS(s.keys.Proof)
	if err != nil {
		return nil, err
	}
	issuerJWKS, err := sandboxproof.PublicJWKS(s.keys.Issuer)
	if err != nil {
		return nil, err
	}
	provenance, err := sandboxproof.BuildProvenance(sandboxproof.Provenance{ProofID: proofID, ObservedAt: now, Build: s.buildDescription()})
	if err != nil {
		return nil, err
	}
	rel := sandboxproof.Release{
		ProofID: proofID, Proof: proof, ProofJWKS: proofJWKS, IssuerJWKS: issuerJWKS,
		Provenance: provenance, VerifierMJS: verifierjs.VerifierMJS, HolderMJS: holderjs.HolderMJS,
	}
	manifest, err := rel.Manifest()
	if err != nil {
		return nil, err
	}
	apiBody, err := ProofEnvelope(proof, s.proofActions())
	if err != nil {
		return nil, err
	}
	report := verifier.VerifyFiles(verifier.Files{
		Manifest: manifest, Proof: proof, ProofJWKS: proofJWKS, IssuerJWKS: issuerJWKS, Provenance: provenance,
		VerifierMJS: rel.VerifierMJS, HolderMJS: rel.HolderMJS, APIResponse: apiBody,
	}, true)
	if failed := report.Failed(); failed != nil {
		return nil, fmt.Errorf("sandbox: the minted release does not verify: %s: %s", failed.ID, failed.Detail)
	}

	id := sandboxproof.SHA256Hex(manifest)
	want := map[string]string{}
	var files []store.SandboxReleaseFile
	for path, body := range rel.Files() {
		f := newFile(path, body)
		want[path] = f.SHA256
		files = append(files, store.SandboxReleaseFile{Path: path, ContentType: f.ContentType, SHA256: f.SHA256, Body: body})
	}
	if err := s.st.SandboxReleases().Write(ctx, store.SandboxRelease{ID: id, ProofID: proofID, Manifest: manifest, CreatedAt: now, Files: files}); err != nil {
		return nil, err
	}
	current, err := s.st.SandboxReleases().Publish(ctx, id, want, opts.Replace, now)
	if err != nil {
		return nil, err
	}
	if current != id {
		// Another process published first; theirs stands, ours goes.
		if err := s.st.SandboxReleases().Delete(ctx, id); err != nil {
			s.log.Warn("dropping an unpublished reference release", "release", id, "err", err)
		}
		return s.PublishReference(ctx, PublishOptions{})
	}
	s.log.Info("published the sandbox reference release", "release", id, "proof", proofID)
	return &Published{ReleaseID: id, ProofID: proofID, Manifest: manifest, Created: true}, nil
}

// EnsureReference publishes the reference release when none is published,
// as the server does on its first start. A published release whose key
// snapshots are not this sandbox's keys (the keys were replaced) is
// republished, since holders read the live issuer key from it.
func (s *Service) EnsureReference(ctx context.Context) error {
	rel, err := s.current(ctx)
	if err != nil {
		return err
	}
	if rel != nil {
		issuer, err := sandboxproof.PublicJWKS(s.keys.Issuer)
		if err != nil {
			return err
		}
		proof, err := sandboxproof.PublicJWKS(s.keys.Proof)
		if err != nil {
			return err
		}
		if bytes.Equal(rel.files[sandboxproof.PathIssuerJWKS].Body, issuer) && bytes.Equal(rel.files[sandboxproof.PathProofJWKS].Body, proof) {
			return nil
		}
		s.log.Warn("the published sandbox release names other keys than this sandbox's; publishing a new one", "release", rel.id)
	}
	_, err = s.PublishReference(ctx, PublishOptions{Replace: rel != nil})
	return err
}

// runReferenceSession plays the SPEC §4 holder flow end to end against this
// sandbox: a session, a simulated holder's mandate, an allowed attempt, an
// approval attempt and the holder's approval. It returns the minted proof.
func (s *Service) runReferenceSession(ctx context.Context) (string, []byte, error) {
	created, err := s.createSession(ctx, true)
	if err != nil {
		return "", nil, err
	}
	id := created.Session.Id
	key, err := holder.GenerateKey()
	if err != nil {
		return "", nil, err
	}
	m, err := holder.NewMandate(id, s.keys.Issuer.KID, s.now())
	if err != nil {
		return "", nil, err
	}
	mandate, err := holder.SignMandate(key, m)
	if err != nil {
		return "", nil, err
	}
	if _, err := s.RegisterMandate(ctx, id, mandate, created.RegistrationSecret); err != nil {
		return "", nil, err
	}
	if _, err := s.Attempt(ctx, id, created.AuthorizationHeader(), sandboxproof.ScenarioAllowed); err != nil {
		return "", nil, err
	}
	approval, err := s.Attempt(ctx, id, created.AuthorizationHeader(), sandboxproof.ScenarioApproval)
	if err != nil {
		return "", nil, err
	}
	g := approval.Gate
	decision, err := holder.SignDecision(key, id, holder.Gate{
		ID: g.Id, RequestDigest: g.RequestDigest, Nonce: g.Nonce, Outcome: string(g.Outcome), ExpiresAt: g.ExpiresAt,
	}, holder.Approve)
	if err != nil {
		return "", nil, err
	}
	decided, err := s.Decide(ctx, id, g.Id, decision)
	if err != nil {
		return "", nil, err
	}
	if decided.ProofID == "" {
		return "", nil, errors.New("the session was not proven")
	}
	proof, err := s.st.Sandbox().Proof(ctx, decided.ProofID)
	return decided.ProofID, proof, err
}

// buildDescription is the provenance's free-form build: what this process
// believes it is, which nobody signs.
func (s *Service) buildDescription() map[string]any {
	b := map[string]any{
		"program":   "pier",
		"version":   version.Version,
		"goVersion": runtime.Version(),
		"os":        runtime.GOOS,
		"arch":      runtime.GOARCH,
		"engine":    string(s.st.Engine()),
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		b["module"] = bi.Main.Path
		if bi.Main.Version != "" {
			b["moduleVersion"] = bi.Main.Version
		}
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision", "vcs.time", "vcs.modified":
				b[strings.TrimPrefix(kv.Key, "vcs.")] = kv.Value
			}
		}
	}
	return b
}
