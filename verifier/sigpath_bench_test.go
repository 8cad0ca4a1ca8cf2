package verifier

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkSignaturePath times the code that Timing.SignatureTime covers,
// alone: every JWS of the valid vector (the proof, the mandate, the
// receipts, the decision) checked in turn, beside crypto/ecdsa's
// BenchmarkVerify/P256 loop. ratio is the peer's time over the path's per
// signature; what it misses of 1.0 is the path's own work. bench/ measures
// the same inside runs against a server.
func BenchmarkSignaturePath(b *testing.B) {
	checkAll := vectorSignatureChecks(b)

	r := bufio.NewReaderSize(rand.Reader, 1<<15)
	priv, err := ecdsa.GenerateKey(elliptic.P256(), r)
	if err != nil {
		b.Fatal(err)
	}
	hashed := []byte("testing")
	sig, err := ecdsa.SignASN1(r, priv, hashed)
	if err != nil {
		b.Fatal(err)
	}

	b.Run("path", func(b *testing.B) {
		var t Timing
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			checkAll(&t)
		}
		b.ReportMetric(float64(t.Signatures)/t.SignatureTime.Seconds(), "es256/s")
		b.ReportMetric(float64(t.Signatures)/float64(b.N), "es256/op")
	})
	b.Run("interleaved", func(b *testing.B) {
		var t Timing
		var peer Timing
		for i := 0; i < b.N; i++ {
			checkAll(&t)
			n := t.Signatures - peer.Signatures
			start := time.Now()
			for range n {
				if !ecdsa.VerifyASN1(&priv.PublicKey, hashed, sig) {
					b.Fatal("verify failed")
				}
			}
			peer.SignatureTime += time.Since(start)
			peer.Signatures += n
		}
		rate := float64(t.Signatures) / t.SignatureTime.Seconds()
		peerRate := float64(peer.Signatures) / peer.SignatureTime.Seconds()
		b.ReportMetric(rate, "es256/s")
		b.ReportMetric(peerRate, "peer-es256/s")
		b.ReportMetric(rate/peerRate, "ratio")
	})
}

// vectorSignatureChecks reads the valid test vector and answers a
// function that checks every signature of its proof, as the verifier
// does, timing them in t.
func vectorSignatureChecks(b *testing.B) func(t *Timing) {
	b.Helper()
	dir := filepath.Join("testdata/vectors", "valid")
	read := func(name string) []byte {
		v, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	proofKeys, err := parseJWKS(read("proof-jwks.json"))
	if err != nil {
		b.Fatal(err)
	}
	issuerKeys, err := parseJWKS(read("issuer-jwks.json"))
	if err != nil {
		b.Fatal(err)
	}
	proofDoc := read("proof.json")
	var t Timing
	proof, err := verifyFlattened(&t, proofDoc, typProof, byKID(proofKeys, "proof JWKS"))
	if err != nil {
		b.Fatal(err)
	}
	p, err := parseProofPayload(proof.payload, "sbp_vectorsProof0000000000001")
	if err != nil {
		b.Fatal(err)
	}
	return func(t *Timing) {
		if _, err := verifyFlattened(t, proofDoc, typProof, byKID(proofKeys, "proof JWKS")); err != nil {
			b.Fatal(err)
		}
		if _, err := verifyCompact(t, p.mandate, typMandate, "jwk", byEmbeddedJWK); err != nil {
			b.Fatal(err)
		}
		for _, a := range p.attempts {
			if _, err := verifyCompact(t, a.receipt, typReceipt, "kid", byKID(issuerKeys, "issuer JWKS")); err != nil {
				b.Fatal(err)
			}
		}
		for _, g := range p.gates {
			if _, err := verifyCompact(t, g.decision, typDecision, "jwk", byEmbeddedJWK); err != nil {
				b.Fatal(err)
			}
		}
	}
}
