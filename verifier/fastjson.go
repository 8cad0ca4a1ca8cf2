package verifier

// Fast paths for the two JSON documents every signature check reads: the
// flattened JWS of the proof and the protected headers. Each accepts only a
// narrow, common form whose value encoding/json would decode to exactly the
// same Go values, and says "not mine" (ok == false) for anything else, in
// which case the caller uses the general decoder, its checks and its error
// messages. So a fast path can change how long a check takes, never what it
// decides or says.

// scanner reads a JSON text from its start.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// expect consumes c after optional whitespace.
func (s *scanner) expect(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// peek reports the next byte after optional whitespace, 0 at the end.
func (s *scanner) peek() byte {
	s.space()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// str reads a JSON string whose every byte is allowed by class, so that it
// has no escape sequence, no control character and no byte that
// encoding/json would replace (invalid UTF-8); it returns the bytes between
// the quotes.
func (s *scanner) str(class *[256]bool) ([]byte, bool) {
	if !s.expect('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) && class[s.b[s.i]] {
		s.i++
	}
	if s.i == len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	s.i++
	return s.b[start : s.i-1], true
}

// end reports whether only whitespace is left.
func (s *scanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

var (
	// plainASCII: printable ASCII except the quote and the backslash.
	plainASCII [256]bool
	// base64URL: the base64url alphabet.
	base64URL [256]bool
)

func init() {
	for c := 0x20; c < 0x7f; c++ {
		plainASCII[c] = c != '"' && c != '\\'
	}
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") {
		base64URL[c] = true
	}
}

// fastFlattened reads a flattened JWS whose members are exactly
// "protected", "payload" and "signature", once each and in any order, each a
// string of base64url characters. Such a text decodes with encoding/json to
// an object with exactly these three strings, which is all verifyFlattened
// reads from it.
func fastFlattened(doc []byte) (protected, payload, signature []byte, ok bool) {
	s := scanner{b: doc}
	if !s.expect('{') {
		return nil, nil, nil, false
	}
	var seen [3]bool
	for n := 0; n < 3; n++ {
		if n > 0 && !s.expect(',') {
			return nil, nil, nil, false
		}
		name, ok := s.str(&plainASCII)
		if !ok || !s.expect(':') {
			return nil, nil, nil, false
		}
		value, ok := s.str(&base64URL)
		if !ok {
			return nil, nil, nil, false
		}
		var k int
		switch string(name) {
		case "protected":
			k, protected = 0, value
		case "payload":
			k, payload = 1, value
		case "signature":
			k, signature = 2, value
		default:
			return nil, nil, nil, false
		}
		if seen[k] {
			return nil, nil, nil, false
		}
		seen[k] = true
	}
	if !s.expect('}') || !s.end() {
		return nil, nil, nil, false
	}
	return protected, payload, signature, true
}

// fastHeader decodes a protected header whose members are all plain
// strings (plainASCII, no escapes) or objects of plain strings one level
// down (the holder's "jwk"), with no name twice in an object. The result is
// the map encoding/json would decode the same text to.
func fastHeader(b []byte) (object, bool) {
	s := scanner{b: b}
	m, ok := s.plainObject(true)
	if !ok || !s.end() {
		return nil, false
	}
	return m, true
}

func (s *scanner) plainObject(nest bool) (object, bool) {
	if !s.expect('{') {
		return nil, false
	}
	m := make(object, 4)
	if s.peek() == '}' {
		return nil, false // rare enough to leave to encoding/json
	}
	for {
		name, ok := s.str(&plainASCII)
		if !ok || !s.expect(':') {
			return nil, false
		}
		key := string(name)
		if _, dup := m[key]; dup {
			return nil, false
		}
		if nest && s.peek() == '{' {
			inner, ok := s.plainObject(false)
			if !ok {
				return nil, false
			}
			m[key] = inner
		} else {
			value, ok := s.str(&plainASCII)
			if !ok {
				return nil, false
			}
			m[key] = string(value)
		}
		if s.expect('}') {
			return m, true
		}
		if !s.expect(',') {
			return nil, false
		}
	}
}
