// Package workflowplan is the signed form of a workflow plan, shared by the
// server that signs it and the CLI that checks it offline: the canonical
// (RFC 8785) plan bytes, their digest, and a compact JWS over them with
// ES256 only, its key picked by kid from a published JWKS.
package workflowplan

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/gowebpki/jcs"
)

// Kind names the plan document's format.
const Kind = "pier.workflow.plan.v1"

// Type is the JWS typ header of a signed plan.
const Type = "pier-workflow-plan+jws"

// Plan is what prepare signs: everything apply will run and recheck.
type Plan struct {
	Kind        string    `json:"kind"`
	WorkflowID  string    `json:"workflowId"`
	OrgID       string    `json:"orgId"`
	ProjectID   string    `json:"projectId"`
	PreparedBy  string    `json:"preparedBy"`
	PreparedAt  string    `json:"preparedAt"`
	Steps       []Step    `json:"steps"`
	Versions    []Version `json:"versions"`
	TotalMicro  int64     `json:"totalMicroUsd"`
	SignedByKID string    `json:"keyId"`
}

// Step is one step of a plan, in the order it runs.
type Step struct {
	ID        string         `json:"id"`
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
	// After lists every step this one waits for, those named in its
	// arguments' references included, sorted.
	After         []string `json:"after"`
	PriceMicro    int64    `json:"priceMicroUsd"`
	Irreversible  bool     `json:"irreversible"`
	NeedsApproval bool     `json:"needsApproval"`
	Approval      string   `json:"approvalReason,omitempty"`
}

// Version is one thing the plan read, compared again on apply.
type Version struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Version string `json:"version"`
}

// Canonical is the plan's RFC 8785 form and its hex SHA-256.
func Canonical(p Plan) ([]byte, string, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, "", err
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(canon)
	return canon, hex.EncodeToString(sum[:]), nil
}

// Sign makes a compact JWS over the canonical bytes.
func Sign(priv *ecdsa.PrivateKey, kid string, canonical []byte) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: priv, KeyID: kid}},
		(&jose.SignerOptions{}).WithType(Type))
	if err != nil {
		return "", err
	}
	obj, err := signer.Sign(canonical)
	if err != nil {
		return "", err
	}
	return obj.CompactSerialize()
}

// ErrSignature is a signed plan that does not verify.
var ErrSignature = errors.New("the signed plan does not verify")

// Verify checks a compact JWS against a JWKS: ES256 only, the key chosen
// by the header's kid, typ as Sign writes it. It returns the verified
// payload (the canonical plan), its digest and the kid.
func Verify(compact string, jwks []byte) (payload []byte, digest, kid string, err error) {
	obj, err := jose.ParseSignedCompact(compact, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return nil, "", "", fmt.Errorf("%w: %v", ErrSignature, err)
	}
	if len(obj.Signatures) != 1 {
		return nil, "", "", fmt.Errorf("%w: want one signature", ErrSignature)
	}
	h := obj.Signatures[0].Protected
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); typ != Type {
		return nil, "", "", fmt.Errorf("%w: typ %q, want %q", ErrSignature, typ, Type)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(jwks, &set); err != nil {
		return nil, "", "", fmt.Errorf("the JWKS is not a key set: %v", err)
	}
	keys := set.Key(h.KeyID)
	if h.KeyID == "" || len(keys) != 1 {
		return nil, "", "", fmt.Errorf("%w: no key %q in the JWKS", ErrSignature, h.KeyID)
	}
	pub, ok := keys[0].Key.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, "", "", fmt.Errorf("%w: key %q is not a P-256 public key", ErrSignature, h.KeyID)
	}
	payload, err = obj.Verify(pub)
	if err != nil {
		return nil, "", "", fmt.Errorf("%w: %v", ErrSignature, err)
	}
	// The payload must already be canonical: the digest names those bytes.
	canon, err := jcs.Transform(payload)
	if err != nil || string(canon) != string(payload) {
		return nil, "", "", fmt.Errorf("%w: the payload is not the canonical plan", ErrSignature)
	}
	sum := sha256.Sum256(payload)
	return payload, hex.EncodeToString(sum[:]), h.KeyID, nil
}
