package holder

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/pierhq/pier/internal/lib/sandboxproof"
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

// MarshalJWK renders the private key as the JWK file that both holders (Go
// and sandbox-holder.mjs) read and write.
func (k *Key) MarshalJWK() ([]byte, error) { return sandboxproof.MarshalPrivateJWK(k.private) }

// ParseKey reads a private JWK written by MarshalJWK or by sandbox-holder.mjs.
func ParseKey(data []byte) (*Key, error) {
	priv, err := sandboxproof.ParsePrivateJWK(data)
	if err != nil {
		return nil, fmt.Errorf("holder: %w", err)
	}
	return &Key{private: priv}, nil
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
