package sandboxproof

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	jose "github.com/go-jose/go-jose/v4"
)

// SigningKey is one of the sandbox's own P-256 keys: the issuer key, which
// signs receipts and is the audience of mandates, or the proof key, which
// signs proofs. Its KID is the RFC 7638 thumbprint of the public key.
type SigningKey struct {
	KID     string
	Private *ecdsa.PrivateKey
}

// GenerateSigningKey makes a fresh P-256 key.
func GenerateSigningKey() (*SigningKey, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return newSigningKey(priv)
}

func newSigningKey(priv *ecdsa.PrivateKey) (*SigningKey, error) {
	kid, err := Thumbprint(&priv.PublicKey)
	if err != nil {
		return nil, err
	}
	return &SigningKey{KID: kid, Private: priv}, nil
}

// jwk is the JSON Web Key layout used for both the private key files and the
// published sets; the private member is left out of the published sets.
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
	D   string `json:"d,omitempty"`
	KID string `json:"kid,omitempty"`
	Alg string `json:"alg,omitempty"`
	Use string `json:"use,omitempty"`
}

func publicCoordinates(pub *ecdsa.PublicKey) (x, y []byte, err error) {
	if pub == nil || pub.Curve != elliptic.P256() {
		return nil, nil, errors.New("sandboxproof: key is not P-256")
	}
	raw, err := pub.Bytes()
	if err != nil {
		return nil, nil, err
	}
	return raw[1:33], raw[33:65], nil
}

func (k *SigningKey) publicJWK() (jwk, error) {
	x, y, err := publicCoordinates(&k.Private.PublicKey)
	if err != nil {
		return jwk{}, err
	}
	return jwk{Kty: "EC", Crv: "P-256", X: b64(x), Y: b64(y), KID: k.KID, Alg: "ES256", Use: "sig"}, nil
}

// MarshalPrivateJWK returns the key, private part included, for the server's
// data directory. Whoever writes it to disk must use mode 0600.
func (k *SigningKey) MarshalPrivateJWK() ([]byte, error) { return MarshalPrivateJWK(k.Private) }

// ParseSigningKey reads a key written by MarshalPrivateJWK (or by either
// holder, since they share the layout).
func ParseSigningKey(data []byte) (*SigningKey, error) {
	priv, err := ParsePrivateJWK(data)
	if err != nil {
		return nil, fmt.Errorf("sandboxproof: %w", err)
	}
	return newSigningKey(priv)
}

// MarshalPrivateJWK renders a private P-256 key as the JWK file that the
// server's signing keys and both holders (Go and sandbox-holder.mjs) are
// kept in: indented, with a final newline, and its thumbprint as kid.
func MarshalPrivateJWK(priv *ecdsa.PrivateKey) ([]byte, error) {
	x, y, err := publicCoordinates(&priv.PublicKey)
	if err != nil {
		return nil, err
	}
	kid, err := Thumbprint(&priv.PublicKey)
	if err != nil {
		return nil, err
	}
	d, err := priv.Bytes()
	if err != nil {
		return nil, err
	}
	return marshalFile(jwk{Kty: "EC", Crv: "P-256", X: b64(x), Y: b64(y), D: b64(d), KID: kid, Alg: "ES256", Use: "sig"})
}

// ParsePrivateJWK reads a private P-256 JWK written by MarshalPrivateJWK or
// by sandbox-holder.mjs. A file whose public members (x, y, kid) disagree
// with its private one was edited or mixed up: signing with it would bind
// mandates, or publish a key set, that nobody can verify, so it is refused.
func ParsePrivateJWK(data []byte) (*ecdsa.PrivateKey, error) {
	var k jwk
	if err := json.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	if k.Kty != "EC" || k.Crv != "P-256" || k.D == "" {
		return nil, errors.New("key file is not a private P-256 JWK")
	}
	d, err := base64.RawURLEncoding.DecodeString(k.D)
	if err != nil {
		return nil, fmt.Errorf("key file: d: %w", err)
	}
	priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	x, y, err := publicCoordinates(&priv.PublicKey)
	if err != nil {
		return nil, err
	}
	kid, err := Thumbprint(&priv.PublicKey)
	if err != nil {
		return nil, err
	}
	if (k.X != "" && k.X != b64(x)) || (k.Y != "" && k.Y != b64(y)) || (k.KID != "" && k.KID != kid) {
		return nil, errors.New("key file: public members do not match the private key")
	}
	return priv, nil
}

// PublicJWKS renders the keys as the published JWKS file (issuer-jwks.json or
// proof-jwks.json). For the issuer set, the first key is the one new mandates
// must name as their audience.
func PublicJWKS(keys ...*SigningKey) ([]byte, error) {
	if len(keys) == 0 {
		return nil, errors.New("sandboxproof: a JWKS needs at least one key")
	}
	set := struct {
		Keys []jwk `json:"keys"`
	}{}
	for _, k := range keys {
		pub, err := k.publicJWK()
		if err != nil {
			return nil, err
		}
		set.Keys = append(set.Keys, pub)
	}
	return marshalFile(set)
}

// Thumbprint is the RFC 7638 SHA-256 thumbprint of a P-256 public key, in
// base64url. It names the holder key and is the KID of the sandbox's keys.
func Thumbprint(pub *ecdsa.PublicKey) (string, error) {
	if _, _, err := publicCoordinates(pub); err != nil {
		return "", err
	}
	sum, err := (&jose.JSONWebKey{Key: pub}).Thumbprint(crypto.SHA256)
	if err != nil {
		return "", err
	}
	return b64(sum), nil
}

// marshalFile renders a published file: indented, with a final newline, so
// that the bytes hashed by the manifest are the bytes a person reads.
func marshalFile(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
