// Package js carries the JavaScript twin of the verifier so that the server
// can publish it, byte for byte, at /verify-sandbox-proof.mjs.
package js

import _ "embed"

// VerifierMJS is verify-sandbox-proof.mjs.
//
//go:embed verify-sandbox-proof.mjs
var VerifierMJS []byte
