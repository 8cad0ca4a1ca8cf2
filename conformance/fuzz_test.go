package conformance

import (
	"strings"
	"testing"

	"github.com/pierhq/pier/holder"
)

// FuzzVerifySignature feeds arbitrary detached JWS to the report
// signature check: it never panics, and it accepts nothing but a valid
// ES256 signature over the digest by the key its kid names.
func FuzzVerifySignature(f *testing.F) {
	// A fixed key: fuzz workers are other processes, which must know the
	// key the seeds were signed with.
	k, err := holder.ParseKey([]byte(`{"kty":"EC","crv":"P-256","x":"H4rFnxDW99KDcOYh6Kl2zA0Qc2ayu3qlCLFUKrFOIh0","y":"WE2HmNd_hKPuNKSPCQZBUE0Obh1LN7VFujtCbrbqLqQ","d":"zyvks15N5s0jxQkFvANXwc8uDrtaUCXBKbEnWgZiJ_0"}`))
	if err != nil {
		f.Fatal(err)
	}
	digest := strings.Repeat("a", 64)
	good, _ := Sign(k, digest)
	parts := strings.Split(good, ".")
	for _, s := range []string{good, parts[0] + ".." + parts[2][:10], "a..b", "..", "", parts[0] + ".eyJ4IjoxfQ." + parts[2],
		"eyJhbGciOiJub25lIn0..", "eyJhbGciOiJIUzI1NiIsImtpZCI6IngifQ..AAAA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sig string) {
		signer, err := VerifySignature(sig, digest, nil)
		if err != nil {
			return
		}
		if signer.KID != k.Thumbprint() {
			// Another valid signature would need a key the fuzzer cannot
			// make; anything else accepted is a hole.
			t.Fatalf("accepted %q, signed by %s", sig, signer.KID)
		}
	})
}
