// Package jsonappend appends JSON values to a byte slice as encoding/json
// writes them (json.Marshal, or an Encoder with HTML escaping, less its
// newline), without reflection, for the answers made on every write:
// create_quote's envelope (httpapi) and the actions every answer offers
// (actions). What is not plain (a string with a character the encoder
// escapes, a value of a kind not written here) goes through encoding/json
// itself, so the bytes are always its bytes; the callers' tests compare
// the two.
package jsonappend

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/pierhq/pier/models"
)

// Compact appends raw JSON as encoding/json writes a marshaller's
// answer: compacted, HTML escaped. Bytes already so are copied.
func Compact(b, raw []byte) []byte {
	plain := true
	for _, c := range raw {
		if c <= ' ' || c == '<' || c == '>' || c == '&' || c >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		return append(b, raw...)
	}
	var compact, escaped bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return append(b, raw...)
	}
	json.HTMLEscape(&escaped, compact.Bytes())
	return append(b, escaped.Bytes()...)
}

// Strings appends a slice of a string type (nil is null).
func Strings[S ~string](b []byte, ss []S) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = String(b, string(s))
	}
	return append(b, ']')
}

// Map appends a map as encoding/json does: members sorted by key.
func Map(b []byte, m map[string]any) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = String(b, k)
		b = append(b, ':')
		b = Any(b, m[k])
	}
	return append(b, '}')
}

// Any appends v: the kinds JSON decodes to and the ones actions'
// arguments hold are written here, any other through encoding/json.
func Any(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case string:
		return String(b, v)
	case bool:
		return strconv.AppendBool(b, v)
	case int:
		return strconv.AppendInt(b, int64(v), 10)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			break
		}
		return Float(b, v)
	case map[string]any:
		return Map(b, v)
	case []any:
		if v == nil {
			return append(b, "null"...)
		}
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = Any(b, e)
		}
		return append(b, ']')
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

// Float appends f as encoding/json writes a float64.
func Float(b []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 is written e-9.
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// Time appends t as time.Time's MarshalJSON does.
func Time(b []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		raw, err := json.Marshal(t)
		if err != nil {
			return append(b, "null"...)
		}
		return append(b, raw...)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// String appends s quoted; a string with anything encoding/json
// would escape goes through it.
func String(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			raw, _ := json.Marshal(s)
			return append(b, raw...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// ToolAction appends t as encoding/json writes a models.ToolAction.
func ToolAction(b []byte, t *models.ToolAction) []byte {
	b = append(b, `{"actor":`...)
	b = String(b, string(t.Actor))
	if t.After != nil {
		b = append(b, `,"after":`...)
		b = Strings(b, *t.After)
	}
	if t.Arguments != nil {
		b = append(b, `,"arguments":`...)
		b = Map(b, *t.Arguments)
	}
	b = append(b, `,"http":{"method":`...)
	b = String(b, string(t.Http.Method))
	b = append(b, `,"path":`...)
	b = String(b, t.Http.Path)
	b = append(b, '}')
	if t.Id != nil {
		b = append(b, `,"id":`...)
		b = String(b, *t.Id)
	}
	b = append(b, `,"kind":`...)
	b = String(b, string(t.Kind))
	if t.MissingArguments != nil {
		b = append(b, `,"missingArguments":`...)
		b = Strings(b, *t.MissingArguments)
	}
	if t.RequiredHeaders != nil {
		b = append(b, `,"requiredHeaders":`...)
		b = Strings(b, *t.RequiredHeaders)
	}
	if t.RetryAfterSeconds != nil {
		b = append(b, `,"retryAfterSeconds":`...)
		b = strconv.AppendInt(b, int64(*t.RetryAfterSeconds), 10)
	}
	b = append(b, `,"tool":`...)
	b = String(b, t.Tool)
	return append(b, '}')
}
