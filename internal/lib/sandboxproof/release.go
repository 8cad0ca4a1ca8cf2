package sandboxproof

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// The paths of the reference release (docs/sandbox-proof.md §5).
const (
	PathManifest    = "/.well-known/sandbox-reference.json"
	PathProof       = "/reference/sandbox/proof.json"
	PathProofJWKS   = "/reference/sandbox/proof-jwks.json"
	PathIssuerJWKS  = "/reference/sandbox/issuer-jwks.json"
	PathProvenance  = "/reference/sandbox/provenance.json"
	PathVerifierMJS = "/verify-sandbox-proof.mjs"
	PathHolderMJS   = "/sandbox-holder.mjs"
)

// Manifest states.
const (
	StateAvailable = "available"
	StatePending   = "pending"
)

// Release is one immutable set of reference files.
type Release struct {
	ProofID     string
	Proof       []byte // from MintProof
	ProofJWKS   []byte // from PublicJWKS(proofKey)
	IssuerJWKS  []byte // from PublicJWKS(issuerKey)
	Provenance  []byte // from BuildProvenance
	VerifierMJS []byte
	HolderMJS   []byte
}

type manifest struct {
	State            string `json:"state"`
	ProofVersion     string `json:"proofVersion"`
	ProofID          string `json:"proofId"`
	ArtifactSha256   string `json:"artifactSha256"`
	ProofJwksSha256  string `json:"proofJwksSha256"`
	IssuerJwksSha256 string `json:"issuerJwksSha256"`
	ProvenanceSha256 string `json:"provenanceSha256"`
	VerifierSha256   string `json:"verifierSha256"`
	HolderCliSha256  string `json:"holderCliSha256"`
}

// Manifest renders /.well-known/sandbox-reference.json with state
// "available". Publish it only after every other file of the release is
// served, and serve every file from the same release.
func (r Release) Manifest() ([]byte, error) {
	if !ProofIDPattern().MatchString(r.ProofID) {
		return nil, fmt.Errorf("%w: proof id %q", ErrMalformed, r.ProofID)
	}
	for name, b := range map[string][]byte{
		"proof": r.Proof, "proof JWKS": r.ProofJWKS, "issuer JWKS": r.IssuerJWKS,
		"provenance": r.Provenance, "verifier": r.VerifierMJS, "holder": r.HolderMJS,
	} {
		if len(b) == 0 {
			return nil, fmt.Errorf("%w: the release has no %s file", ErrMalformed, name)
		}
	}
	return marshalFile(manifest{
		State: StateAvailable, ProofVersion: Version, ProofID: r.ProofID,
		ArtifactSha256:   SHA256Hex(r.Proof),
		ProofJwksSha256:  SHA256Hex(r.ProofJWKS),
		IssuerJwksSha256: SHA256Hex(r.IssuerJWKS),
		ProvenanceSha256: SHA256Hex(r.Provenance),
		VerifierSha256:   SHA256Hex(r.VerifierMJS),
		HolderCliSha256:  SHA256Hex(r.HolderMJS),
	})
}

// Files maps each release path except the manifest to its bytes.
func (r Release) Files() map[string][]byte {
	return map[string][]byte{
		PathProof: r.Proof, PathProofJWKS: r.ProofJWKS, PathIssuerJWKS: r.IssuerJWKS,
		PathProvenance: r.Provenance, PathVerifierMJS: r.VerifierMJS, PathHolderMJS: r.HolderMJS,
	}
}

// PendingManifest is served until a release is complete. It already names
// the scripts, so a holder can check the script it downloads before any
// proof exists.
func PendingManifest(verifierMJS, holderMJS []byte) ([]byte, error) {
	return marshalFile(struct {
		State        string `json:"state"`
		Verification struct {
			HolderCliSha256 string `json:"holderCliSha256"`
			VerifierSha256  string `json:"verifierSha256"`
		} `json:"verification"`
	}{
		State: StatePending,
		Verification: struct {
			HolderCliSha256 string `json:"holderCliSha256"`
			VerifierSha256  string `json:"verifierSha256"`
		}{SHA256Hex(holderMJS), SHA256Hex(verifierMJS)},
	})
}

// Provenance describes the build that minted a release. It is an unsigned
// observation: hashed by the manifest, signed by nothing.
type Provenance struct {
	ProofID    string
	ObservedAt time.Time
	// Build is free-form, for example version, commit and Go version.
	Build map[string]any
}

// BuildProvenance renders provenance.json.
func BuildProvenance(p Provenance) ([]byte, error) {
	build := p.Build
	if build == nil {
		build = map[string]any{}
	}
	return marshalFile(struct {
		Version    string         `json:"version"`
		Kind       string         `json:"kind"`
		ProofID    string         `json:"proofId"`
		ObservedAt string         `json:"observedAt"`
		Build      map[string]any `json:"build"`
	}{Version, "unsigned-observation", p.ProofID, FormatTime(p.ObservedAt), build})
}

// SHA256Hex is the manifest's digest form: lowercase hex SHA-256.
func SHA256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
