// Package verifier checks a published Pier sandbox proof the way an auditor
// would: it downloads the reference release over plain HTTP, runs SPEC.md §4
// rule 3 (manifest state, proof id, file hashes, API proof equals the static
// artifact) and then checks every signature in the proof, in the order that
// docs/sandbox-proof.md §6 fixes, stopping at the first failure.
//
// It must share no code path with what it audits: it imports neither the
// server nor internal/lib/sandboxproof, and parses the format from the document.
// verify-sandbox-proof.mjs in js/ is its twin; both must reach the same
// verdict on every vector under testdata/vectors.
package verifier
