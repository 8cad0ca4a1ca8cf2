package conformance

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/pierhq/pier/holder"
)

// SignatureType is the typ header of a report signature.
const SignatureType = "pier-conformance-report+jws"

// Sign signs a report's digest with k as a detached JWS.
func Sign(k *holder.Key, digest string) (string, error) {
	return holder.SignDetached(k, SignatureType, []byte(digest))
}

// Signer identifies the key that signed a report.
type Signer struct {
	// KID is the key's RFC 7638 thumbprint.
	KID string `json:"kid"`
	// Trusted is true when the key came from the trusted key set rather
	// than from the signature's own jwk header.
	Trusted bool `json:"trusted"`
}

// VerifySignature checks a detached JWS over digest. Only ES256 on P-256
// is accepted. The key is picked by the header's kid: from trusted when
// given (a JWKS the auditor holds), and otherwise from the jwk header,
// whose thumbprint must equal the kid; the caller then compares Signer.KID
// with the key it expects.
func VerifySignature(sig, digest string, trusted *jose.JSONWebKeySet) (Signer, error) {
	sig = strings.TrimSpace(sig)
	if strings.Count(sig, ".") != 2 || strings.Split(sig, ".")[1] != "" {
		return Signer{}, &Error{Code: CodeSignature, Message: "the signature is not a detached compact JWS (header..signature)"}
	}
	obj, err := jose.ParseDetached(sig, []byte(digest), []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return Signer{}, &Error{Code: CodeSignature, Message: "the signature does not parse as an ES256 JWS: " + err.Error()}
	}
	if len(obj.Signatures) != 1 {
		return Signer{}, &Error{Code: CodeSignature, Message: "the signature must carry exactly one signer"}
	}
	h := obj.Signatures[0].Protected
	if h.Algorithm != string(jose.ES256) {
		return Signer{}, &Error{Code: CodeSignature, Message: fmt.Sprintf("algorithm %q is not ES256", h.Algorithm)}
	}
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); typ != SignatureType {
		return Signer{}, &Error{Code: CodeSignature, Message: fmt.Sprintf("typ %q is not %s", typ, SignatureType)}
	}
	if h.KeyID == "" {
		return Signer{}, &Error{Code: CodeSignature, Message: "the signature names no kid"}
	}
	var key *ecdsa.PublicKey
	signer := Signer{KID: h.KeyID}
	if trusted != nil {
		keys := trusted.Key(h.KeyID)
		if len(keys) != 1 {
			return Signer{}, &Error{Code: CodeSignature, Message: fmt.Sprintf("kid %s is not in the trusted key set", h.KeyID)}
		}
		key, _ = keys[0].Key.(*ecdsa.PublicKey)
		signer.Trusted = true
	} else {
		if h.JSONWebKey == nil {
			return Signer{}, &Error{Code: CodeSignature, Message: "the signature carries no jwk; pass a trusted key set"}
		}
		key, _ = h.JSONWebKey.Key.(*ecdsa.PublicKey)
		if key != nil {
			tp, err := h.JSONWebKey.Thumbprint(crypto.SHA256)
			if err != nil || base64.RawURLEncoding.EncodeToString(tp) != h.KeyID {
				return Signer{}, &Error{Code: CodeSignature, Message: "the kid is not the thumbprint of the jwk"}
			}
		}
	}
	if key == nil || key.Curve != elliptic.P256() {
		return Signer{}, &Error{Code: CodeSignature, Message: "the signing key is not a P-256 public key"}
	}
	if err := obj.DetachedVerify([]byte(digest), key); err != nil {
		return Signer{}, &Error{Code: CodeSignature, Message: "the signature does not verify over the report's digest"}
	}
	return signer, nil
}

// KeySet is a JWKS of trusted public keys.
type KeySet = jose.JSONWebKeySet

// ParseKeySet reads a JWKS of trusted public keys.
func ParseKeySet(data []byte) (*KeySet, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("conformance: key set: %w", err)
	}
	for _, k := range set.Keys {
		if !k.IsPublic() {
			return nil, fmt.Errorf("conformance: key set: %s holds a private key", k.KeyID)
		}
		if k.Algorithm != "" && k.Algorithm != string(jose.ES256) {
			return nil, fmt.Errorf("conformance: key set: %s is for %s; only ES256 keys sign reports", k.KeyID, k.Algorithm)
		}
	}
	return &set, nil
}

// maxKeySet bounds a key set read from a file or a URL.
const maxKeySet = 1 << 20

// ReadKeySet reads the auditor's trusted key set from source: a file, or
// the https URL where the signer publishes it (http only to a loopback
// address, for a local server). A URL is the auditor's own choice of where
// to look, never one a report names.
func ReadKeySet(ctx context.Context, hc *http.Client, source string) (*KeySet, error) {
	if !strings.HasPrefix(source, "https://") && !strings.HasPrefix(source, "http://") {
		f, err := os.Open(source)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxKeySet+1))
		if err != nil {
			return nil, err
		}
		if len(b) > maxKeySet {
			return nil, fmt.Errorf("conformance: key set %s is over %d bytes", source, maxKeySet)
		}
		return ParseKeySet(b)
	}
	u, err := url.Parse(source)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("conformance: key set URL %q does not parse", source)
	}
	if u.Scheme == "http" {
		ip := net.ParseIP(u.Hostname())
		if u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, fmt.Errorf("conformance: key set URL %s: use https (plain http only to a loopback address)", source)
		}
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, source, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("conformance: key set %s: %w", source, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("conformance: key set %s answered %s", source, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySet+1))
	if err != nil {
		return nil, fmt.Errorf("conformance: key set %s: %w", source, err)
	}
	if len(b) > maxKeySet {
		return nil, fmt.Errorf("conformance: key set %s is over %d bytes", source, maxKeySet)
	}
	return ParseKeySet(b)
}

// PublicKeySet is the JWKS an auditor needs to trust reports signed by k:
// its public key under its thumbprint as kid.
func PublicKeySet(k *holder.Key) *KeySet {
	pub := k.PublicJWK()
	pub.KeyID = k.Thumbprint()
	return &KeySet{Keys: []jose.JSONWebKey{pub}}
}
