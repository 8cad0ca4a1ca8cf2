// Package oauth is Pier's OAuth 2.1 authorization server for MCP clients:
// metadata (RFC 8414, RFC 9728), dynamic registration of public clients
// (RFC 7591), the authorization code grant with PKCE S256 only, rotating
// refresh tokens with replay detection, audience binding (RFC 8707) and
// revocation (RFC 7009).
//
// A grant is always a human's decision: Decide takes the organisation and
// human of a signed-in session, which only the human pages (package web)
// supply. Nothing here accepts an agent's credential as authority to
// approve, and an access token authenticates an agent, never a human.
// Codes and tokens are stored only as SHA-256 hashes.
package oauth
