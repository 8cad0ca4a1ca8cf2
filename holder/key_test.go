package holder_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pierhq/pier/holder"
)

func TestSaveKeyWritesOwnerOnlyAndRoundTrips(t *testing.T) {
	k, err := holder.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "holder.jwk.json")
	if err := holder.SaveKey(path, k); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode != 0o600 {
		t.Fatalf("key file mode %04o, want 0600", mode)
	}
	loaded, err := holder.LoadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Thumbprint() != k.Thumbprint() {
		t.Fatal("loaded key differs from the saved one")
	}
	if err := holder.SaveKey(path, k); err == nil {
		t.Fatal("SaveKey replaced an existing key file")
	}
}

func TestLoadKeyRefusesExposedFiles(t *testing.T) {
	k, err := holder.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	data, err := k.MarshalJWK()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660} {
		path := filepath.Join(t.TempDir(), "key.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := holder.LoadKey(path); !errors.Is(err, holder.ErrKeyExposed) {
			t.Errorf("mode %04o: got %v, want ErrKeyExposed", mode, err)
		}
	}
}

func TestParseKeyRejectsMismatchedFiles(t *testing.T) {
	a, _ := holder.GenerateKey()
	b, _ := holder.GenerateKey()
	good, _ := a.MarshalJWK()
	other, _ := b.MarshalJWK()
	cases := map[string]string{
		"public part of another key": replaceMember(t, good, other, "x"),
		"not EC":                     `{"kty":"RSA","crv":"P-256","x":"","y":"","d":"AAAA"}`,
		"public key only":            replaceMember(t, good, []byte(`{"d":""}`), "d"),
		"not JSON":                   `{`,
	}
	for name, data := range cases {
		if _, err := holder.ParseKey([]byte(data)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := holder.ParseKey(good); err != nil {
		t.Errorf("a well-formed key was refused: %v", err)
	}
}
