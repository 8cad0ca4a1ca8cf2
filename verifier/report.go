package verifier

import "time"

// Verdict is the outcome of a verification run.
type Verdict string

// Verdicts.
const (
	Accept Verdict = "accept"
	Reject Verdict = "reject"
)

// CheckID names one check. The ids are part of the report's JSON, and
// the JavaScript verifier uses the same ones.
type CheckID string

// Check ids, in the order the checks run (docs/sandbox-proof.md §6).
const (
	CheckManifest        CheckID = "manifest"
	CheckManifestState   CheckID = "manifest.state"
	CheckManifestProofID CheckID = "manifest.proofId"
	CheckHashProof       CheckID = "hash.proof"
	CheckHashProofJWKS   CheckID = "hash.proofJwks"
	CheckHashIssuerJWKS  CheckID = "hash.issuerJwks"
	CheckHashProvenance  CheckID = "hash.provenance"
	CheckHashVerifier    CheckID = "hash.verifier"
	CheckHashHolderCLI   CheckID = "hash.holderCli"
	CheckAPIProof        CheckID = "api.proof"
	CheckJWKSProof       CheckID = "jwks.proof"
	CheckJWKSIssuer      CheckID = "jwks.issuer"
	CheckProvenance      CheckID = "provenance"
	CheckProofSignature  CheckID = "proof.signature"
	CheckProofPayload    CheckID = "proof.payload"
	CheckMandateSig      CheckID = "mandate.signature"
	CheckMandateClaims   CheckID = "mandate.claims"
	CheckRequestDigest   CheckID = "attempt.requestDigest"
	CheckReceiptSig      CheckID = "receipt.signature"
	CheckReceiptClaims   CheckID = "receipt.claims"
	CheckGateAttempt     CheckID = "gate.attempt"
	CheckDecisionSig     CheckID = "gate.decision.signature"
	CheckDecisionBinding CheckID = "gate.decision.binding"
	CheckGateExpiry      CheckID = "gate.expiry"
	CheckGatesUnique     CheckID = "gates.unique"
	CheckMandateSpend    CheckID = "mandate.spend"
	CheckProofCoverage   CheckID = "proof.coverage"
	CheckTamperRejected  CheckID = "tamper.rejected"
)

// Check is one step of the run.
type Check struct {
	ID     CheckID `json:"id"`
	OK     bool    `json:"ok"`
	Detail string  `json:"detail"`
}

// Report lists every check that ran. The run stops at the first failure, so
// a rejected report ends with the failing check.
type Report struct {
	Verdict Verdict `json:"verdict"`
	ProofID string  `json:"proofId,omitempty"`
	Checks  []Check `json:"checks"`
	// Timing is where the run's time went. It is for measuring the
	// verifier (bench/README.md) and is not part of the JSON report.
	Timing Timing `json:"-"`
}

// Timing splits a run's wall time.
type Timing struct {
	// Total is the whole run, from the first download to the verdict.
	Total time.Duration
	// Fetch is the time spent getting the release's bytes: HTTP requests
	// in Verify, lookups in VerifyFiles.
	Fetch time.Duration
	// Signatures counts the ES256 signatures checked: those that reached
	// the ECDSA check, valid or not, the tamper check's included.
	Signatures int
	// SignatureTime is the time spent checking JWS signatures, from the
	// serialized JWS to the ECDSA result: splitting or parsing the JWS,
	// base64url decoding, the protected header's checks, choosing the key,
	// SHA-256 of the signing input and the ECDSA verification. It includes
	// JWSs refused before the ECDSA check, which Signatures does not count.
	SignatureTime time.Duration
}

// Failed returns the failing check, or nil when the proof was accepted.
func (r *Report) Failed() *Check {
	for i := range r.Checks {
		if !r.Checks[i].OK {
			return &r.Checks[i]
		}
	}
	return nil
}

// record appends a check and reports whether it passed, so that a stage can
// be written as a chain of "if !r.record(...) { return false }".
func (r *Report) record(id CheckID, err error, okDetail string) bool {
	if err != nil {
		r.Checks = append(r.Checks, Check{ID: id, OK: false, Detail: err.Error()})
		return false
	}
	r.Checks = append(r.Checks, Check{ID: id, OK: true, Detail: okDetail})
	return true
}

func (r *Report) finish() *Report {
	r.Verdict = Accept
	if r.Failed() != nil {
		r.Verdict = Reject
	}
	return r
}
