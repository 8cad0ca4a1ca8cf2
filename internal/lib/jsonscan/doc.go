// Package jsonscan checks and walks JSON text in one pass without
// reflection, for the decoders that read one common, narrow shape fast and
// hand everything else to encoding/json: MCP's JSON-RPC messages and the
// verifier's flattened JWS and protected headers. It decodes nothing
// itself beyond plain strings, so encoding/json stays the judge of every
// unusual text; it imports only the standard library, so the verifier may
// use it and still share no code path with the server it audits.
package jsonscan
