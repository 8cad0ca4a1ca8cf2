package verifier

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// CheckMintedProof is the first check of a minted proof's run: the proof
// was read (from the API by id, or from a file) and names its id.
const CheckMintedProof CheckID = "minted.proof"

// ProofOptions configure the check of one proof a session minted, rather
// than the published reference release.
type ProofOptions struct {
	// BaseURL serves the JWKS the proof's signatures are checked with.
	BaseURL string
	// APIURL serves GET /v1/sandbox/proofs/{proofId}; empty means BaseURL.
	APIURL string
	// ProofID names the proof to fetch, when Proof is nil.
	ProofID string
	// Proof is the artifact itself, or the API's whole answer {data: …}.
	Proof []byte
	// TamperCheck also alters the artifact in memory and requires that the
	// signature checks reject it.
	TamperCheck bool
	HTTPClient  *http.Client
}

// VerifyProof checks a minted proof's signatures (checks 11 to 26 but the
// provenance and the coverage of both scenarios, which only the reference
// release promises) with the keys the server publishes. The error is only
// for unusable options.
func VerifyProof(ctx context.Context, opts ProofOptions) (*Report, error) {
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
	if opts.Proof == nil && !proofIDPattern().MatchString(opts.ProofID) {
		return nil, fmt.Errorf("%q is not a proof id (sbp_…) or a file", opts.ProofID)
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	src := &httpSource{client: hc, base: base, api: api}
	start := time.Now()
	r := &Report{}
	defer func() { r.Timing.Total = time.Since(start) }()

	raw := opts.Proof
	if raw == nil {
		raw, err = src.apiProof(ctx, opts.ProofID)
	}
	var artifact []byte
	var proofID string
	if err == nil {
		artifact, proofID, err = mintedArtifact(raw)
	}
	if err == nil && opts.ProofID != "" && proofID != opts.ProofID {
		err = fmt.Errorf("the proof names %s, not %s", proofID, opts.ProofID)
	}
	if !r.record(CheckMintedProof, err, proofID) {
		return r.finish(), nil
	}
	r.ProofID = proofID
	rel := &release{minted: true, proofID: proofID, proof: artifact}
	rel.proofJWKS, err = src.file(ctx, pathProofJWKS)
	if err != nil {
		r.record(CheckJWKSProof, err, "")
		return r.finish(), nil
	}
	rel.issuerJWKS, err = src.file(ctx, pathIssuerJWKS)
	if err != nil {
		r.record(CheckJWKSIssuer, err, "")
		return r.finish(), nil
	}
	if !checkSignatures(r, rel) {
		return r.finish(), nil
	}
	if opts.TamperCheck {
		detail, err := tamper(r, rel)
		r.record(CheckTamperRejected, err, detail)
	}
	return r.finish(), nil
}

// mintedArtifact takes the API's answer {data: artifact} or the artifact
// itself, and reads the proof id from its payload.
func mintedArtifact(raw []byte) ([]byte, string, error) {
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(raw, &env) == nil && len(env.Data) > 0 {
		raw = env.Data
	}
	var jws struct {
		Payload string `json:"payload"`
	}
	if err := json.Unmarshal(raw, &jws); err != nil || jws.Payload == "" {
		return nil, "", errors.New("not a proof: no flattened JWS with a payload")
	}
	payload, err := base64.RawURLEncoding.DecodeString(jws.Payload)
	if err != nil {
		return nil, "", fmt.Errorf("the proof's payload: %v", err)
	}
	var p struct {
		ProofID string `json:"proofId"`
	}
	if err := json.Unmarshal(payload, &p); err != nil || !proofIDPattern().MatchString(p.ProofID) {
		return nil, "", errors.New("the proof's payload names no proof id")
	}
	return raw, p.ProofID, nil
}
