// Package server runs Pier: it opens the store, builds the REST adapter and
// serves it until its context ends, then shuts down gracefully. Its commands
// (`pier server`, `pier admin …`) are wired into the CLI by cmd/pier-server,
// so that the CLI itself stays a pure client of the SDK; cmd/pier, the
// client, hands them over to that binary.
package server
