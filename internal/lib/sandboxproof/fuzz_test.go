package sandboxproof

import (
	"testing"
	"time"
)

// FuzzVerifyHolderJWS feeds arbitrary text to the server's mandate and
// decision checks: the sandbox parses it from anyone, before any
// authentication, so it must never panic and never accept a malformed input.
func FuzzVerifyHolderJWS(f *testing.F) {
	now := time.Date(2026, 7, 16, 12, 0, 0, 0, time.UTC)
	holder := newHolderKey(&testing.T{})
	mandate := mandateBuilder(holder, "sbs_s1", "issuer-kid", now).build()
	f.Add(mandate)
	f.Add("e30.e30.")
	f.Add("..")
	f.Fuzz(func(t *testing.T, jws string) {
		m, err := VerifyMandate(jws, MandateCheck{SessionID: "sbs_s1", IssuerKID: "issuer-kid", Now: now})
		if err == nil && (m.SessionID != "sbs_s1" || m.Audience != "issuer-kid" || m.HolderThumbprint == "") {
			t.Fatalf("accepted a mandate for someone else: %+v", m)
		}
		_, _ = VerifyDecision(jws, DecisionCheck{SessionID: "sbs_s1", Gate: Gate{ID: "g", ExpiresAt: "2026-07-16T12:10:00Z"}, Now: now})
	})
}
