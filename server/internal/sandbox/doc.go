// Package sandbox is Pier's fake-money sandbox (SPEC.md §2.9, §2.10, §4;
// docs/sandbox-proof.md): sessions with a sandbox-only agent capability, the
// holder's mandate, attempts answered with issuer-signed receipts or gates,
// compare-and-set gate decisions, proofs, and the reference release that
// auditors verify.
//
// It signs and checks everything with internal/lib/sandboxproof and keeps its
// state in the store. It knows nothing of HTTP: adapters turn its results
// into envelopes and its *apierr.Error values into error envelopes.
package sandbox
