// Package js carries the JavaScript twin of the holder so that the server
// can publish it, byte for byte, at /sandbox-holder.mjs.
package js

import _ "embed"

// HolderMJS is sandbox-holder.mjs.
//
//go:embed sandbox-holder.mjs
var HolderMJS []byte
