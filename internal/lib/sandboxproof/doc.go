// Package sandboxproof is the server's side of the sandbox protocol in
// docs/sandbox-proof.md: it keeps the issuer and proof keys, checks the
// holder's mandates and gate decisions, signs attempt receipts, mints proofs
// and lays out the reference release and its manifest.
//
// The verifier must never import this package. It re-implements the format
// from the document, so that a mistake made here shows up as a rejected proof
// instead of being repeated on both sides.
package sandboxproof
