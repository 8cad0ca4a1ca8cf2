package verifier

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"time"
)

// Options configure a verification run.
type Options struct {
	// BaseURL is the public host that serves the manifest and the release.
	BaseURL string
	// APIURL serves GET /v1/sandbox/proofs/{proofId}; empty means BaseURL.
	APIURL string
	// TamperCheck also alters the artifact in memory and requires that the
	// signature checks reject it.
	TamperCheck bool
	// HTTPClient defaults to http.DefaultClient.
	HTTPClient *http.Client
}

// Files is a release that has already been fetched, for verifying offline.
// A nil field stands for a download that failed.
type Files struct {
	Manifest    []byte // /.well-known/sandbox-reference.json
	Proof       []byte // /reference/sandbox/proof.json
	ProofJWKS   []byte // /reference/sandbox/proof-jwks.json
	IssuerJWKS  []byte // /reference/sandbox/issuer-jwks.json
	Provenance  []byte // /reference/sandbox/provenance.json
	VerifierMJS []byte // /verify-sandbox-proof.mjs
	HolderMJS   []byte // /sandbox-holder.mjs
	// APIResponse is the whole body of GET /v1/sandbox/proofs/{proofId}.
	APIResponse []byte
}

// The release paths (docs/sandbox-proof.md §5).
const (
	pathManifest    = "/.well-known/sandbox-reference.json"
	pathProof       = "/reference/sandbox/proof.json"
	pathProofJWKS   = "/reference/sandbox/proof-jwks.json"
	pathIssuerJWKS  = "/reference/sandbox/issuer-jwks.json"
	pathProvenance  = "/reference/sandbox/provenance.json"
	pathVerifierMJS = "/verify-sandbox-proof.mjs"
	pathHolderMJS   = "/sandbox-holder.mjs"
)

// maxDownload bounds every download; a release is a few kilobytes.
const maxDownload = 4 << 20

// source is where a run gets its bytes: the network, or Files.
type source interface {
	file(ctx context.Context, path string) ([]byte, error)
	apiProof(ctx context.Context, proofID string) ([]byte, error)
}

// Verify downloads the release from opts.BaseURL and verifies it. The error
// is only for unusable options; everything about the proof, network failures
// included, is in the report.
func Verify(ctx context.Context, opts Options) (*Report, error) {
	base, err := checkURL("base URL", opts.BaseURL)
	if err != nil {
		return nil, err
	}
	api := base
	if opts.APIURL != "" {
		if api, err = checkURL("API URL", opts.APIURL); err != nil {
			return nil, err
		}
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	return run(ctx, &httpSource{client: hc, base: base, api: api}, opts.TamperCheck), nil
}

// VerifyFiles verifies a release that is already in memory, running the
// same checks in the same order as Verify.
func VerifyFiles(f Files, tamperCheck bool) *Report {
	return run(context.Background(), filesSource(f), tamperCheck)
}

func checkURL(what, raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("verifier: %s %q must be an absolute http(s) URL", what, raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

type httpSource struct {
	client    *http.Client
	base, api string
}

func (s *httpSource) file(ctx context.Context, path string) ([]byte, error) {
	return s.get(ctx, s.base+path)
}

func (s *httpSource) apiProof(ctx context.Context, proofID string) ([]byte, error) {
	return s.get(ctx, s.api+"/v1/sandbox/proofs/"+url.PathEscape(proofID))
}

func (s *httpSource) get(ctx context.Context, target string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %v", target, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s answered %d", target, resp.StatusCode)
	}
	b, err := readBody(resp)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %v", target, err)
	}
	if len(b) > maxDownload {
		return nil, fmt.Errorf("GET %s: larger than %d bytes", target, maxDownload)
	}
	return b, nil
}

// readBody reads at most maxDownload+1 bytes of a response, as io.ReadAll
// would, but starts with room for the length the response declares, so
// that the release's scripts are read without the copies of a growing
// buffer. The body is read to its end whatever it declared.
func readBody(resp *http.Response) ([]byte, error) {
	r := io.LimitReader(resp.Body, maxDownload+1)
	size := 512
	if n := resp.ContentLength; n >= 0 && n <= maxDownload {
		size = int(n) + 1 // one more, to read the end without growing
	}
	b := make([]byte, 0, size)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

type filesSource Files

func (f filesSource) file(_ context.Context, path string) ([]byte, error) {
	b := map[string][]byte{
		pathManifest: f.Manifest, pathProof: f.Proof, pathProofJWKS: f.ProofJWKS,
		pathIssuerJWKS: f.IssuerJWKS, pathProvenance: f.Provenance,
		pathVerifierMJS: f.VerifierMJS, pathHolderMJS: f.HolderMJS,
	}[path]
	if b == nil {
		return nil, fmt.Errorf("%s was not provided", path)
	}
	return b, nil
}

func (f filesSource) apiProof(context.Context, string) ([]byte, error) {
	if f.APIResponse == nil {
		return nil, errors.New("the API proof response was not provided")
	}
	return f.APIResponse, nil
}

// release holds what the rule-3 stage established, for the signature stage.
type release struct {
	// minted: a proof of one's own session, not the reference release:
	// no provenance, no coverage of both scenarios.
	minted     bool
	proofID    string
	proof      []byte
	proofJWKS  []byte
	issuerJWKS []byte
	provenance []byte
}

func run(ctx context.Context, src source, tamperCheck bool) *Report {
	start := time.Now()
	r := &Report{}
	defer func() { r.Timing.Total = time.Since(start) }()
	rel, ok := checkRelease(ctx, r, timedSource{src, &r.Timing})
	if !ok {
		return r.finish()
	}
	if !checkSignatures(r, rel) {
		return r.finish()
	}
	if tamperCheck {
		detail, err := tamper(r, rel)
		r.record(CheckTamperRejected, err, detail)
	}
	return r.finish()
}

// timedSource adds the time spent getting bytes to Timing.Fetch.
type timedSource struct {
	src source
	t   *Timing
}

func (s timedSource) file(ctx context.Context, path string) ([]byte, error) {
	start := time.Now()
	defer func() { s.t.Fetch += time.Since(start) }()
	return s.src.file(ctx, path)
}

func (s timedSource) apiProof(ctx context.Context, proofID string) ([]byte, error) {
	start := time.Now()
	defer func() { s.t.Fetch += time.Since(start) }()
	return s.src.apiProof(ctx, proofID)
}

// checkRelease is SPEC.md §4 rule 3: checks 1 to 10.
func checkRelease(ctx context.Context, r *Report, src source) (*release, bool) {
	raw, err := src.file(ctx, pathManifest)
	var manifest object
	if err == nil {
		manifest, err = parseObject(raw)
	}
	if !r.record(CheckManifest, err, "downloaded "+pathManifest) {
		return nil, false
	}
	err = nil
	if manifest["state"] != "available" {
		err = fmt.Errorf("state is %s, not \"available\"", jsonText(manifest["state"]))
	}
	if !r.record(CheckManifestState, err, "available") {
		return nil, false
	}
	proofID, err := getMatch(manifest, "proofId", proofIDPattern)
	if !r.record(CheckManifestProofID, err, proofID) {
		return nil, false
	}
	r.ProofID = proofID

	files := []struct {
		id          CheckID
		field, path string
	}{
		{CheckHashProof, "artifactSha256", pathProof},
		{CheckHashProofJWKS, "proofJwksSha256", pathProofJWKS},
		{CheckHashIssuerJWKS, "issuerJwksSha256", pathIssuerJWKS},
		{CheckHashProvenance, "provenanceSha256", pathProvenance},
		{CheckHashVerifier, "verifierSha256", pathVerifierMJS},
		{CheckHashHolderCLI, "holderCliSha256", pathHolderMJS},
	}
	got := map[string][]byte{}
	for _, f := range files {
		b, digest, err := checkHash(ctx, src, manifest, f.field, f.path)
		if !r.record(f.id, err, f.path+" sha256 "+digest) {
			return nil, false
		}
		got[f.path] = b
	}

	err = checkAPIProof(ctx, src, proofID, got[pathProof])
	if !r.record(CheckAPIProof, err, "the API proof equals "+pathProof) {
		return nil, false
	}
	return &release{
		proofID: proofID, proof: got[pathProof], proofJWKS: got[pathProofJWKS],
		issuerJWKS: got[pathIssuerJWKS], provenance: got[pathProvenance],
	}, true
}

// manifestHash reads a digest field. SPEC.md §2.10 puts holderCliSha256 at
// the top level once the release is available and under "verification"
// before; reading both keeps one code path for either manifest.
func manifestHash(m object, field string) (string, error) {
	v, ok := m[field]
	if !ok && field == "holderCliSha256" {
		if verification, isObject := m["verification"].(object); isObject {
			v, ok = verification[field]
		}
	}
	s, isString := v.(string)
	if !ok || !isString || !hexPattern().MatchString(s) {
		return "", fmt.Errorf("manifest %s must be 64 lowercase hex characters", field)
	}
	return s, nil
}

func checkHash(ctx context.Context, src source, manifest object, field, path string) ([]byte, string, error) {
	want, err := manifestHash(manifest, field)
	if err != nil {
		return nil, "", err
	}
	b, err := src.file(ctx, path)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(b)
	got := hex.EncodeToString(sum[:])
	if got != want {
		return nil, "", fmt.Errorf("%s has sha256 %s but the manifest says %s", path, got, want)
	}
	return b, got, nil
}

// checkAPIProof compares the API's data with the static artifact as JSON
// values: the API may format its response differently, but it must say the
// same thing.
func checkAPIProof(ctx context.Context, src source, proofID string, static []byte) error {
	body, err := src.apiProof(ctx, proofID)
	if err != nil {
		return err
	}
	env, err := parseObject(body)
	if err != nil {
		return fmt.Errorf("API response: %v", err)
	}
	data, ok := env["data"].(object)
	if !ok {
		return errors.New(`API response has no "data" object`)
	}
	artifact, err := parseObject(static)
	if err != nil {
		return fmt.Errorf("%s: %v", pathProof, err)
	}
	if !reflect.DeepEqual(data, artifact) {
		return fmt.Errorf("the API proof differs from %s", pathProof)
	}
	return nil
}
