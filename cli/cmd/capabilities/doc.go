// Package capabilities is `pier capabilities`: every operation of the
// contract with its command, MCP tool, scopes, idempotency and human
// gates, read from the command tree and the SDK's operation table.
package capabilities
