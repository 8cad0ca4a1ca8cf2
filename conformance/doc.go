// Package conformance runs Pier's public probes against a deployment and
// writes, signs and verifies the run reports of SPEC.md §2.11.
//
// A run has three suites, always in this order: wire (envelopes, errors,
// typed actions, the MCP transport rules, 429s and idempotent replays),
// discovery (the OpenAPI document, the published schemas, OAuth metadata,
// the sandbox reference manifest and its hashes, the verifier and holder
// scripts, MCP tools/list) and governed (quotes and holds, a launch and its
// teardown, a human gate, and the sandbox mandate flow as a simulated
// holder). governed needs an API key and runs only in the governed profile;
// elsewhere it is not_run and not required. It runs in a throwaway child
// project that the run creates and deletes (create_project,
// delete_project), and tells the caller so through Options.Say.
//
// A report's digest is the SHA-256 of its RFC 8785 canonical form. Reports
// chain through previousDigest, and each is signed by a detached compact
// JWS (ES256) whose payload is the digest, kept beside the report as
// <report>.jws. Verify needs no server, and trusts no key a report or its
// signature hands it: the signer must be in the auditor's key set
// (RequireTrusted), and a chain's newest end must match the auditor's
// anchor (Anchor). Governed probes record the holder they act as in their
// spec note; a simulated holder never supports human separation.
package conformance
