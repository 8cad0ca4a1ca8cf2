package mcp

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// decodeMessage decodes one JSON-RPC message into m exactly as
// json.Unmarshal(raw, m) would, errors included.
//
// Nearly every message a client sends is a flat object with the members
// this server reads, plain strings and a few raw values, and reflection
// made decoding it a quarter of a tools/call's own cost (json.Valid alone
// is a state machine step per byte). So a message of that common shape is
// read, and its syntax checked, in one strict pass; anything else (a
// syntax error, an escaped or non-ASCII key or string, a member named
// twice, a value of an unexpected type, a key that differs only in case,
// which encoding/json would still match, deep nesting) goes to
// json.Unmarshal, so that every refusal and every unusual decision is
// encoding/json's. FuzzDecodeMessage holds the two to the same result.
func decodeMessage(raw []byte, m *rpcMessage) error {
	var fast rpcMessage
	if scanMessage(raw, &fast) {
		*m = fast
		return nil
	}
	return json.Unmarshal(raw, m)
}

// scanMessage reads a message of the common shape, checking its syntax,
// and reports false for anything it leaves to encoding/json.
func scanMessage(b []byte, m *rpcMessage) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	var seen [6]bool
	end, ok := scanObject(b, i, func(key string, v []byte) bool {
		f := -1
		switch key {
		case "jsonrpc":
			f = 0
		case "id":
			f = 1
		case "method":
			f = 2
		case "params":
			f = 3
		case "result":
			f = 4
		case "error":
			f = 5
		default:
			return !foldsToAny(key, "jsonrpc", "id", "method", "params", "result", "error")
		}
		if seen[f] {
			return false
		}
		seen[f] = true
		switch f {
		case 0, 2:
			s, ok := plainString(v)
			if !ok {
				return false
			}
			if f == 0 {
				m.JSONRPC = s
			} else {
				m.Method = s
			}
		case 1:
			m.ID = json.RawMessage(v)
		case 3:
			if string(v) == "null" {
				m.Params = nil
				return true
			}
			if v[0] != '{' {
				return false
			}
			m.Params = &rpcParams{}
			return scanParams(v, m.Params)
		case 4:
			m.Result = json.RawMessage(v)
		case 5:
			m.Error = json.RawMessage(v)
		}
		return true
	})
	return ok && skipSpace(b, end) == len(b)
}

// scanParams reads params, a checked object value.
func scanParams(b []byte, p *rpcParams) bool {
	var seen [3]bool
	_, ok := scanObject(b, 0, func(key string, v []byte) bool {
		f := -1
		switch key {
		case "protocolVersion":
			f = 0
		case "name":
			f = 1
		case "arguments":
			f = 2
		default:
			return !foldsToAny(key, "protocolVersion", "name", "arguments")
		}
		if seen[f] {
			return false
		}
		seen[f] = true
		if f == 2 {
			p.Arguments = json.RawMessage(v)
			return true
		}
		var dst **string = &p.ProtocolVersion
		if f == 1 {
			dst = &p.Name
		}
		if string(v) == "null" {
			*dst = nil
			return true
		}
		s, ok := plainString(v)
		if !ok {
			return false
		}
		*dst = &s
		return true
	})
	return ok
}

// scanObject checks the JSON object that starts at b[i] and calls member
// for each member, with its key (which must be plain ASCII without
// escapes) and its raw value, stopping at the first false. It returns the
// end of the object, or false for a syntax error or a false from member.
func scanObject(b []byte, i int, member func(key string, v []byte) bool) (int, bool) {
	i = skipSpace(b, i+1)
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
		key := string(b[i+1 : end])
		i = skipSpace(b, end+1)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		i = skipSpace(b, i+1)
		vEnd := skipValue(b, i, 1)
		if vEnd < 0 || !member(key, b[i:vEnd]) {
			return 0, false
		}
		i = skipSpace(b, vEnd)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
	return 0, false
}

// maxScanDepth is how deep a value the scanner checks; deeper ones go to
// encoding/json, with its own limit.
const maxScanDepth = 64

// skipValue checks the JSON value starting at b[i] and returns its end, or
// -1 for a syntax error or nesting past maxScanDepth.
func skipValue(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{' || c == '[':
		if depth > maxScanDepth {
			return -1
		}
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == closer {
			return i + 1
		}
		for {
			if c == '{' {
				if i >= len(b) || b[i] != '"' {
					return -1
				}
				if i = skipString(b, i); i < 0 {
					return -1
				}
				i = skipSpace(b, i)
				if i >= len(b) || b[i] != ':' {
					return -1
				}
				i = skipSpace(b, i+1)
			}
			if i = skipValue(b, i, depth+1); i < 0 {
				return -1
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return -1
			}
			if b[i] == closer {
				return i + 1
			}
			if b[i] != ',' {
				return -1
			}
			i = skipSpace(b, i+1)
		}
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || '0' <= c && c <= '9':
		return skipNumber(b, i)
	}
	return -1
}

func literal(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// skipNumber checks the JSON number at b[i]: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func skipNumber(b []byte, i int) int {
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

// skipString checks the JSON string starting at b[i] and returns its end,
// or -1. Bytes of invalid UTF-8 pass, as encoding/json's scanner lets them.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
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

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString is the value of a JSON string without escapes or non-ASCII
// bytes (which need encoding/json's decoding and its treatment of invalid
// UTF-8).
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	for _, c := range v[1 : len(v)-1] {
		if c == '\\' || c >= utf8.RuneSelf {
			return "", false
		}
	}
	return string(v[1 : len(v)-1]), true
}

// foldsToAny reports whether key matches one of the names apart from
// case, which encoding/json would decode into that field (keys here are
// ASCII, so strings.EqualFold folds as encoding/json does).
func foldsToAny(key string, names ...string) bool {
	for _, n := range names {
		if strings.EqualFold(n, key) {
			return true
		}
	}
	return false
}
