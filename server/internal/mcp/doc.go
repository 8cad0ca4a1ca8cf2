// Package mcp is the MCP adapter: POST /mcp speaks JSON-RPC 2.0 over
// stateless streamable HTTP (protocol 2025-03-26, JSON answers only) and
// offers every operation of the contract as a tool of the same name.
//
// A tool call is dispatched in-process to the REST handler its route reaches,
// carrying the caller's Authorization header, so both doors share one
// implementation per operation, the same authentication, rate limits,
// validation and idempotency, and return the same envelope. This package
// must not call the service layer itself.
package mcp
