package verifier

import "github.com/pierhq/pier/internal/lib/jsonscan"

// Fast paths for the two JSON documents every signature check reads: the
// flattened JWS of the proof and the protected headers. Each accepts only a
// narrow, common form whose value encoding/json would decode to exactly the
// same Go values, and says "not mine" (ok == false) for anything else, in
// which case the caller uses the general decoder, its checks and its error
// messages. So a fast path can change how long a check takes, never what it
// decides or says. The text is checked by jsonscan, a scanner with no
// knowledge of proofs that the server's MCP decoder uses too.

// base64URL marks the base64url alphabet.
var base64URL = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") {
		t[c] = true
	}
	return t
}()

// fastFlattened reads a flattened JWS whose members are exactly
// "protected", "payload" and "signature", once each and in any order, each a
// string of base64url characters. Such a text decodes with encoding/json to
// an object with exactly these three strings, which is all verifyFlattened
// reads from it.
func fastFlattened(doc []byte) (protected, payload, signature []byte, ok bool) {
	var seen [3]bool
	ok = jsonscan.Document(doc, func(key, v []byte) bool {
		var k int
		switch string(key) {
		case "protected":
			k = 0
		case "payload":
			k = 1
		case "signature":
			k = 2
		default:
			return false
		}
		if seen[k] || v[0] != '"' {
			return false
		}
		seen[k] = true
		v = v[1 : len(v)-1]
		for _, c := range v {
			if !base64URL[c] {
				return false
			}
		}
		switch k {
		case 0:
			protected = v
		case 1:
			payload = v
		case 2:
			signature = v
		}
		return true
	})
	if !ok || seen != [3]bool{true, true, true} {
		return nil, nil, nil, false
	}
	return protected, payload, signature, true
}

// fastHeader decodes a protected header whose members are all plain
// strings (ASCII, no escapes) or objects of plain strings one level down
// (the holder's "jwk"), with no name twice in an object. The result is the
// map encoding/json would decode the same text to.
func fastHeader(b []byte) (object, bool) {
	m := make(object, 4)
	if !jsonscan.Document(b, func(key, v []byte) bool { return addPlain(m, key, v, true) }) {
		return nil, false
	}
	return m, true
}

// addPlain adds a member to m when its value is a plain string or, when
// nest allows, an object of plain strings, under a name m does not have.
func addPlain(m object, key, v []byte, nest bool) bool {
	if _, dup := m[string(key)]; dup {
		return false
	}
	if nest && v[0] == '{' {
		inner := make(object, 4)
		if _, ok := jsonscan.Object(v, 0, func(k, v []byte) bool { return addPlain(inner, k, v, false) }); !ok {
			return false
		}
		m[string(key)] = inner
		return true
	}
	s, ok := jsonscan.Plain(v)
	if !ok {
		return false
	}
	m[string(key)] = string(s)
	return true
}
