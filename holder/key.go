package holder

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	jose "github.com/go-jose/go-jose/v4"
)

// Key is the holder's P-256 key. Whoever holds it can spend the mandate, so
// it lives only in a file of mode 0600.
type Key struct {
	private *ecdsa.PrivateKey
}

// ErrKeyExposed is returned by LoadKey for a key file that group or others
// may read: such a key may already be in someone else's hands.
var ErrKeyExposed = errors.New("holder: key file is readable by group or others; chmod 600 it")

// GenerateKey makes a fresh holder key.
func GenerateKey() (*Key, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return &Key{private: priv}, nil
}

// PublicJWK is the key as it travels in the jwk header of holder signatures.
func (k *Key) PublicJWK() jose.JSONWebKey {
	return jose.JSONWebKey{Key: &k.private.PublicKey, Algorithm: string(jose.ES256), Use: "sig"}
}

// Thumbprint is the RFC 7638 SHA-256 thumbprint in base64url. The sandbox and
// the verifiers identify the holder by it.
func (k *Key) Thumbprint() string {
	jwk := k.PublicJWK()
	sum, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		// A P-256 public key always has a thumbprint; reaching this is a bug.
		panic(fmt.Sprintf("holder: thumbprint: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(sum)
}

type keyFile struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
	D   string `json:"d"`
	KID string `json:"kid,omitempty"`
	Alg string `json:"alg,omitempty"`
	Use string `json:"use,omitempty"`
}

// MarshalJWK renders the private key as the JWK file that both holders (Go
// and sandbox-holder.mjs) read and write.
func (k *Key) MarshalJWK() ([]byte, error) {
	pub, err := k.private.PublicKey.Bytes()
	if err != nil {
		return nil, err
	}
	d, err := k.private.Bytes()
	if err != nil {
		return nil, err
	}
	enc := base64.RawURLEncoding.EncodeToString
	b, err := json.MarshalIndent(keyFile{
		Kty: "EC", Crv: "P-256", X: enc(pub[1:33]), Y: enc(pub[33:65]), D: enc(d),
		KID: k.Thumbprint(), Alg: "ES256", Use: "sig",
	}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ParseKey reads a private JWK written by MarshalJWK or by sandbox-holder.mjs.
func ParseKey(data []byte) (*Key, error) {
	var f keyFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("holder: key: %w", err)
	}
	if f.Kty != "EC" || f.Crv != "P-256" || f.D == "" {
		return nil, errors.New("holder: key is not a private P-256 JWK")
	}
	d, err := base64.RawURLEncoding.DecodeString(f.D)
	if err != nil {
		return nil, fmt.Errorf("holder: key: d: %w", err)
	}
	priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d)
	if err != nil {
		return nil, fmt.Errorf("holder: key: %w", err)
	}
	k := &Key{private: priv}
	// Public members that disagree with d mean the file was edited or mixed
	// up; signing with it would bind the mandate to a key nobody expects.
	pub, _ := priv.PublicKey.Bytes()
	enc := base64.RawURLEncoding.EncodeToString
	if (f.X != "" && f.X != enc(pub[1:33])) || (f.Y != "" && f.Y != enc(pub[33:65])) || (f.KID != "" && f.KID != k.Thumbprint()) {
		return nil, errors.New("holder: key: public members do not match the private key")
	}
	return k, nil
}

// SaveKey writes the key to a new file of mode 0600. It refuses to replace an
// existing file: overwriting a holder key loses control of its mandates.
func SaveKey(path string, k *Key) error {
	data, err := k.MarshalJWK()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("holder: save key: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("holder: save key: %w", err)
	}
	return f.Close()
}

// LoadKey reads a key file, refusing one that group or others can read.
func LoadKey(path string) (*Key, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("holder: load key: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("holder: load key: %s is not a regular file", path)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w (%s has mode %04o)", ErrKeyExposed, path, info.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("holder: load key: %w", err)
	}
	return ParseKey(data)
}
