package sandboxproof

import "errors"

// The server maps these to blockedBy codes; the wrapped message says which
// member or check failed and is safe to show to the holder.
var (
	// ErrMalformed: the object does not have the shape the format requires.
	ErrMalformed = errors.New("sandboxproof: malformed")
	// ErrBadSignature: wrong algorithm, wrong length or a signature that does not verify.
	ErrBadSignature = errors.New("sandboxproof: bad signature")
	// ErrWrongKey: signed by a key other than the one the session is bound to.
	ErrWrongKey = errors.New("sandboxproof: wrong key")
	// ErrMismatch: a member does not match the session, issuer or gate it was sent to.
	ErrMismatch = errors.New("sandboxproof: does not match")
	// ErrExpired: the mandate or gate is past its expiry.
	ErrExpired = errors.New("sandboxproof: expired")
	// ErrNotYetValid: the mandate claims to be issued in the future.
	ErrNotYetValid = errors.New("sandboxproof: not yet valid")
)
