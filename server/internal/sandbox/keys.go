package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pierhq/pier/internal/lib/sandboxproof"
	"github.com/pierhq/pier/server/internal/store"
)

// Keys are the sandbox's own signing keys. The issuer key signs receipts and
// is the audience of mandates; the proof key signs proofs. The live sandbox
// and the reference release use the same keys, so a holder can read the
// issuer key from the published release.
type Keys struct {
	Issuer *sandboxproof.SigningKey
	Proof  *sandboxproof.SigningKey
}

// Key names, which are also the file names in the data directory.
const (
	issuerKeyName = "issuer"
	proofKeyName  = "proof"
)

// LoadKeys returns the sandbox's keys, creating them on first use.
//
// With SQLite (the embedded mode) they are files of mode 0600 in
// dataDir/sandbox, beside the database. With PostgreSQL they live in the
// database, so that every replica signs with the same keys and the
// published issuer key is the one each replica checks mandates against.
func LoadKeys(ctx context.Context, st Records, dataDir string, now time.Time) (*Keys, error) {
	load := func(name string) (*sandboxproof.SigningKey, error) {
		if st.Engine() == store.Postgres {
			return dbKey(ctx, st, name, now)
		}
		return fileKey(filepath.Join(dataDir, "sandbox", name+"-key.jwk"))
	}
	issuer, err := load(issuerKeyName)
	if err != nil {
		return nil, fmt.Errorf("sandbox: issuer key: %w", err)
	}
	proof, err := load(proofKeyName)
	if err != nil {
		return nil, fmt.Errorf("sandbox: proof key: %w", err)
	}
	return &Keys{Issuer: issuer, Proof: proof}, nil
}

func dbKey(ctx context.Context, st Records, name string, now time.Time) (*sandboxproof.SigningKey, error) {
	jwk, err := st.SandboxReleases().Key(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		k, gerr := sandboxproof.GenerateSigningKey()
		if gerr != nil {
			return nil, gerr
		}
		b, gerr := k.MarshalPrivateJWK()
		if gerr != nil {
			return nil, gerr
		}
		if err := st.SandboxReleases().PutKeyIfAbsent(ctx, name, string(b), now); err != nil {
			return nil, err
		}
		// Read back: a replica that raced us may have won.
		jwk, err = st.SandboxReleases().Key(ctx, name)
	}
	if err != nil {
		return nil, err
	}
	return sandboxproof.ParseSigningKey([]byte(jwk))
}

// fileKey reads a key file, or creates it when absent. Creation writes a
// temporary file and links it into place, so that two processes starting
// together agree on one key: the second link fails and that process reads
// the first one's key.
func fileKey(path string) (*sandboxproof.SigningKey, error) {
	if b, err := readPrivate(path); err == nil {
		return sandboxproof.ParseSigningKey(b)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	k, err := sandboxproof.GenerateSigningKey()
	if err != nil {
		return nil, err
	}
	b, err := k.MarshalPrivateJWK()
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".key-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	b, err = readPrivate(path)
	if err != nil {
		return nil, err
	}
	return sandboxproof.ParseSigningKey(b)
}

// readPrivate refuses a key file that group or others can read: such a key
// may already be in someone else's hands.
func readPrivate(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by group or others (mode %o); chmod 600 it", path, fi.Mode().Perm())
	}
	return os.ReadFile(path)
}
