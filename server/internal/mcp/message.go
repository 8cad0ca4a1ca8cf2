package mcp

import (
	"encoding/json"
	"unicode/utf8"
)

// decodeMessage decodes one JSON-RPC message into m exactly as
// json.Unmarshal(raw, m) would, errors included.
//
// Nearly every message a client sends is a flat object with the members
// this server reads, plain strings and a few raw values, and reflection
// made decoding it a quarter of a tools/call's own cost. So a message of
// that common shape is read by scanning it once json.Valid has checked its
// syntax; anything else (an escaped or non-ASCII key or string, a member
// named twice, a value of an unexpected type, a key that differs only in
// case, which encoding/json would still match) goes to json.Unmarshal, so
// that every decision is encoding/json's. FuzzDecodeMessage holds the two
// to the same result.
func decodeMessage(raw []byte, m *rpcMessage) error {
	if json.Valid(raw) {
		var fast rpcMessage
		if scanMessage(raw, &fast) {
			*m = fast
			return nil
		}
	}
	return json.Unmarshal(raw, m)
}

// scanMessage reads a syntactically valid message of the common shape,
// reporting false for anything it leaves to encoding/json.
func scanMessage(b []byte, m *rpcMessage) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	var seen [6]bool
	return scanObject(b, i, func(key string, v []byte) bool {
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
}

func scanParams(b []byte, p *rpcParams) bool {
	var seen [3]bool
	return scanObject(b, 0, func(key string, v []byte) bool {
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
}

// scanObject calls member for each member of the valid JSON object that
// starts at b[i], with its key (which must be plain ASCII without escapes)
// and its raw value, stopping at the first false.
func scanObject(b []byte, i int, member func(key string, v []byte) bool) bool {
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return true
	}
	for i < len(b) {
		if b[i] != '"' {
			return false
		}
		end := i + 1
		for end < len(b) && b[end] != '"' {
			if b[end] == '\\' || b[end] >= utf8.RuneSelf {
				return false
			}
			end++
		}
		key := string(b[i+1 : end])
		i = skipSpace(b, end+1)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		vEnd := skipValue(b, i)
		if vEnd <= i || !member(key, b[i:vEnd]) {
			return false
		}
		i = skipSpace(b, vEnd)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return true
		default:
			return false
		}
	}
	return false
}

// skipValue returns the end of the valid JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// skipString returns the end of the valid JSON string starting at b[i].
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
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

// foldsToAny reports whether key matches one of the names apart from ASCII
// case, which encoding/json would decode into that field.
func foldsToAny(key string, names ...string) bool {
	for _, n := range names {
		if len(n) == len(key) && asciiEqualFold(n, key) {
			return true
		}
	}
	return false
}

func asciiEqualFold(a, b string) bool {
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
