package jsonscan

import "unicode/utf8"

// MaxDepth is how deep a value Value checks; deeper ones are refused, and
// their callers leave them to encoding/json, with its own limit.
const MaxDepth = 64

// Space returns the index of the first byte at or after i that is not JSON
// whitespace.
func Space(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// Document checks that b is one JSON object, optionally surrounded by
// whitespace, calling member for each of its members as Object does.
func Document(b []byte, member func(key, v []byte) bool) bool {
	i := Space(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	end, ok := Object(b, i, member)
	return ok && Space(b, end) == len(b)
}

// Object checks the JSON object that starts at b[i] and calls member for
// each member, with its key (which must be plain ASCII without escapes, so
// the bytes are the key) and its raw value, stopping at the first false.
// It returns the end of the object, or false for a syntax error, a key of
// another form, or a false from member.
func Object(b []byte, i int, member func(key, v []byte) bool) (int, bool) {
	i = Space(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for i < len(b) {
		if b[i] != '"' {
			return 0, false
		}
		end := i + 1
		for end < len(b) && b[end] != '"' {
			if b[end] < 0x20 || b[end] == '\\' || b[end] >= utf8.RuneSelf {
				return 0, false
			}
			end++
		}
		if end >= len(b) {
			return 0, false
		}
		key := b[i+1 : end]
		i = Space(b, end+1)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		i = Space(b, i+1)
		vEnd := value(b, i, 1)
		if vEnd < 0 || !member(key, b[i:vEnd]) {
			return 0, false
		}
		i = Space(b, vEnd)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = Space(b, i+1)
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
	return 0, false
}

// Value checks the JSON value starting at b[i] and returns its end, or -1
// for a syntax error or nesting past MaxDepth.
func Value(b []byte, i int) int { return value(b, i, 1) }

func value(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c == '"':
		return String(b, i)
	case c == '{' || c == '[':
		if depth > MaxDepth {
			return -1
		}
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		i = Space(b, i+1)
		if i < len(b) && b[i] == closer {
			return i + 1
		}
		for {
			if c == '{' {
				if i >= len(b) || b[i] != '"' {
					return -1
				}
				if i = String(b, i); i < 0 {
					return -1
				}
				i = Space(b, i)
				if i >= len(b) || b[i] != ':' {
					return -1
				}
				i = Space(b, i+1)
			}
			if i = value(b, i, depth+1); i < 0 {
				return -1
			}
			i = Space(b, i)
			if i >= len(b) {
				return -1
			}
			if b[i] == closer {
				return i + 1
			}
			if b[i] != ',' {
				return -1
			}
			i = Space(b, i+1)
		}
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || '0' <= c && c <= '9':
		return number(b, i)
	}
	return -1
}

func literal(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// number checks the JSON number at b[i]: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func number(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	digits := func() bool {
		start := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > start
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return -1
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return -1
		}
	}
	return i
}

// plain marks the bytes a string holds as they are: neither the quote, the
// backslash nor a control character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// String checks the JSON string starting at b[i] and returns its end, or
// -1. Bytes of invalid UTF-8 pass, as encoding/json's scanner lets them.
func String(b []byte, i int) int {
	for i++; i < len(b); i++ {
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i >= len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-i <= 4 {
					return -1
				}
				for _, h := range b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// Plain returns the bytes between the quotes of v, a checked JSON value,
// when it is a string without escapes or non-ASCII bytes: the bytes
// encoding/json would decode it to. Anything else (a string that needs
// encoding/json's decoding and its treatment of invalid UTF-8, or another
// kind of value) is false.
func Plain(v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' {
		return nil, false
	}
	for _, c := range v[1 : len(v)-1] {
		if c == '\\' || c >= utf8.RuneSelf {
			return nil, false
		}
	}
	return v[1 : len(v)-1], true
}
