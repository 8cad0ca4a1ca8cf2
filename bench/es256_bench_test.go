package bench

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/pierhq/pier/verifier"
)

// peerRate is BenchmarkECDSAVerifyP256's result, for the benchmarks that
// run after it in the same `go test -bench` run.
var peerRate float64

// peerKey returns what crypto/ecdsa's BenchmarkVerify/P256 verifies: a fresh
// P-256 key and its valid ASN.1 signature over the 7 bytes "testing".
func peerKey(b *testing.B) (*ecdsa.PublicKey, []byte, []byte) {
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
	return &priv.PublicKey, hashed, sig
}

// BenchmarkECDSAVerifyP256 is the peer: the loop of
// `go test crypto/ecdsa -bench Verify/P256` (crypto/ecdsa's BenchmarkVerify
// for P256), copied so that it runs in the same process and the same run as
// the verifier. bench/verify.sh also runs the standard library's own, to
// show the two agree.
func BenchmarkECDSAVerifyP256(b *testing.B) {
	pub, hashed, sig := peerKey(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !ecdsa.VerifyASN1(pub, hashed, sig) {
			b.Fatal("verify failed")
		}
	}
	peerRate = float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(peerRate, "es256/s")
}

// BenchmarkVerifySandboxProofES256 runs what `pier verify-sandbox-proof
// --tamper-check` runs (verifier.Verify) against a local Pier, every byte
// over loopback HTTP, and measures inside each run the ES256 verification
// rate: the signatures the verifier checked divided by the time it spent
// checking them (verifier.Timing.SignatureTime: parsing each JWS, base64url
// decoding, the header checks, choosing the key, SHA-256 of the signing
// input and ECDSA).
//
// PIER_BENCH_BASE_URL names a running server (bench/verify.sh starts one);
// without it an in-process server is used.
//
// Metrics, per run of the verifier:
//
//   - es256/s: the verification rate above; ratio: es256/s over
//     BenchmarkECDSAVerifyP256's rate, when it ran earlier in the same
//     `go test` run (the goal is 0.85).
//   - peer-es256/s, ratio-interleaved: the same peer loop, run after each
//     verification for as many signatures as it checked, so that both
//     sides of this ratio see the same load on the machine.
//   - runs/s, e2e-es256/s, e2e-ratio: the whole run (downloads and every
//     check), as signatures per second of the run's wall time.
//   - fetch-%, sig-%, other-%: where the run's time went: downloads,
//     signature checks, and everything else (hashing the release, JSON
//     parsing and the claims checks, the API comparison, the tamper check's
//     work other than its signature).
func BenchmarkVerifySandboxProofES256(b *testing.B) {
	base := os.Getenv("PIER_BENCH_BASE_URL")
	if base == "" {
		base = pierServer(b).URL
	}
	opts := verifier.Options{BaseURL: base, TamperCheck: true, HTTPClient: &http.Client{}}
	pub, hashed, sig := peerKey(b)
	// One run first: the connection is opened, and a rejection stops here.
	if r, err := verifier.Verify(context.Background(), opts); err != nil || r.Verdict != verifier.Accept {
		b.Fatalf("the reference release was rejected: %v %+v", err, r.Failed())
	}

	var sum verifier.Timing
	var wall, peer time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		r, err := verifier.Verify(context.Background(), opts)
		t1 := time.Now()
		if err != nil || r.Verdict != verifier.Accept || r.Timing.Signatures == 0 {
			b.Fatalf("rejected: %v %+v", err, r.Failed())
		}
		for range r.Timing.Signatures {
			if !ecdsa.VerifyASN1(pub, hashed, sig) {
				b.Fatal("verify failed")
			}
		}
		peer += time.Since(t1)
		wall += t1.Sub(t0)
		sum.Total += r.Timing.Total
		sum.Fetch += r.Timing.Fetch
		sum.Signatures += r.Timing.Signatures
		sum.SignatureTime += r.Timing.SignatureTime
	}
	b.StopTimer()

	sigs := float64(sum.Signatures)
	rate := sigs / sum.SignatureTime.Seconds()
	interleaved := sigs / peer.Seconds()
	b.ReportMetric(sigs/float64(b.N), "es256/run")
	b.ReportMetric(rate, "es256/s")
	if peerRate > 0 {
		b.ReportMetric(rate/peerRate, "ratio")
	}
	b.ReportMetric(interleaved, "peer-es256/s")
	b.ReportMetric(rate/interleaved, "ratio-interleaved")
	b.ReportMetric(float64(b.N)/wall.Seconds(), "runs/s")
	b.ReportMetric(sigs/wall.Seconds(), "e2e-es256/s")
	b.ReportMetric(sigs/wall.Seconds()/interleaved, "e2e-ratio")
	pct := func(d time.Duration) float64 { return 100 * d.Seconds() / sum.Total.Seconds() }
	b.ReportMetric(pct(sum.Fetch), "fetch-%")
	b.ReportMetric(pct(sum.SignatureTime), "sig-%")
	b.ReportMetric(pct(sum.Total-sum.Fetch-sum.SignatureTime), "other-%")
}
