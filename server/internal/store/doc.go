// Package store persists Pier's state in SQLite (embedded, the default) or
// PostgreSQL (for scale). One implementation serves both engines through
// database/sql; the few places where their SQL differs go through dialect.
// Migrations are embedded SQL files written once for both engines (BLOB
// becomes BYTEA on PostgreSQL), applied in a transaction each.
//
// It knows nothing of HTTP or MCP.
package store
