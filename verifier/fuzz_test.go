package verifier_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/pierhq/pier/verifier"
)

// FuzzVerifyProof feeds altered proof artifacts through the whole offline
// run, with the manifest and API response adjusted to match, so that the
// fuzzer reaches the signature checks. Whatever the input, the verifier must
// not panic, and it may only accept a proof whose signed parts are the
// original's.
func FuzzVerifyProof(f *testing.F) {
	dir := filepath.Join(vectorsDir, "valid")
	base := filesOf(&testing.T{}, dir)
	f.Add(base.Proof)
	for _, name := range []string{"tampered-mandate", "alg-none", "replayed-decision", "short-signature"} {
		f.Add(filesOf(&testing.T{}, filepath.Join(vectorsDir, name)).Proof)
	}
	var original struct{ Protected, Payload string }
	if err := json.Unmarshal(base.Proof, &original); err != nil {
		f.Fatal(err)
	}
	var manifest map[string]any
	if err := json.Unmarshal(base.Manifest, &manifest); err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, proof []byte) {
		files := base
		files.Proof = proof
		sum := sha256.Sum256(proof)
		m := map[string]any{}
		for k, v := range manifest {
			m[k] = v
		}
		m["artifactSha256"] = hex.EncodeToString(sum[:])
		files.Manifest, _ = json.Marshal(m)
		files.APIResponse = append(append([]byte(`{"data":`), proof...), '}')

		report := verifier.VerifyFiles(files, false)
		if report.Verdict != verifier.Accept {
			return
		}
		var got struct{ Protected, Payload string }
		if err := json.Unmarshal(proof, &got); err != nil || got != original {
			t.Fatalf("accepted a proof with different signed parts: %q", proof)
		}
	})
}
