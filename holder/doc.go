// Package holder is the holder's side of the Pier sandbox
// (docs/sandbox-proof.md): it keeps a P-256 key, signs the fake-money
// mandate and gate decisions, and posts them to the sandbox.
//
// A holder acts on its own key and never with agent authority: nothing in
// this package sends an Authorization header. It must not import the server
// or the CLI, so that holders can use it on its own.
package holder
