package mcp

import (
	"encoding/json"
	"strings"

	"github.com/pierhq/pier/internal/lib/jsonscan"
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
	var seen [6]bool
	return jsonscan.Document(b, func(key, v []byte) bool {
		f := -1
		switch string(key) {
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
			return !foldsToAny(string(key), "jsonrpc", "id", "method", "params", "result", "error")
		}
		if seen[f] {
			return false
		}
		seen[f] = true
		switch f {
		case 0, 2:
			s, ok := jsonscan.Plain(v)
			if !ok {
				return false
			}
			if f == 0 {
				m.JSONRPC = string(s)
			} else {
				m.Method = string(s)
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

// scanParams reads params, a checked object value.
func scanParams(b []byte, p *rpcParams) bool {
	var seen [3]bool
	_, ok := jsonscan.Object(b, 0, func(key, v []byte) bool {
		f := -1
		switch string(key) {
		case "protocolVersion":
			f = 0
		case "name":
			f = 1
		case "arguments":
			f = 2
		default:
			return !foldsToAny(string(key), "protocolVersion", "name", "arguments")
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
		s, ok := jsonscan.Plain(v)
		if !ok {
			return false
		}
		str := string(s)
		*dst = &str
		return true
	})
	return ok
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
