package verifier_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pierhq/pier/verifier"
)

// TestTimingCountsEverySignature: Timing.Signatures is the number of ES256
// signatures the run checked, the tamper check's included, so that the
// rate bench/ reports is signatures over the time spent on them; and the
// timing stays out of the JSON report.
func TestTimingCountsEverySignature(t *testing.T) {
	for _, name := range []string{"valid", "valid-decision-denied", "tampered-receipt", "alg-none"} {
		dir := filepath.Join(vectorsDir, name)
		srv := serveVector(t, dir)
		online, err := verifier.Verify(context.Background(), verifier.Options{BaseURL: srv.URL, TamperCheck: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []*verifier.Report{online, verifier.VerifyFiles(filesOf(t, dir), true)} {
			want := 0
			for _, c := range r.Checks {
				switch c.ID {
				case verifier.CheckProofSignature, verifier.CheckMandateSig, verifier.CheckReceiptSig, verifier.CheckDecisionSig:
					// A signature check that failed before the ECDSA
					// check (alg none) is timed but not counted.
					if c.OK || strings.Contains(c.Detail, "does not verify") {
						want++
					}
				case verifier.CheckTamperRejected:
					want++ // the altered proof's signature
				}
			}
			tm := r.Timing
			if tm.Signatures != want {
				t.Errorf("%s: Timing.Signatures = %d, want %d", name, tm.Signatures, want)
			}
			if tm.SignatureTime <= 0 || tm.Fetch <= 0 || tm.Total < tm.Fetch+tm.SignatureTime {
				t.Errorf("%s: implausible timing %+v", name, tm)
			}
			b, _ := json.Marshal(r)
			if strings.Contains(string(b), "Signature") || strings.Contains(string(b), "Timing") {
				t.Errorf("%s: the JSON report carries the timing: %s", name, b)
			}
		}
	}
}
