// Package safetext refuses text that displays as something other than it
// is: invalid UTF-8, and the bidirectional embedding, override and isolate
// controls (U+202A to U+202E, U+2066 to U+2069) that "Trojan Source" uses
// to make a name or a path read differently from its bytes.
package safetext

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Problem describes what is wrong with s, or is "" when s is safe.
func Problem(s string) string {
	if !utf8.ValidString(s) {
		return "not valid UTF-8"
	}
	for i, r := range s {
		if IsBidiControl(r) {
			return fmt.Sprintf("bidirectional control character U+%04X at byte %d", r, i)
		}
	}
	return ""
}

// IsBidiControl reports whether r is an embedding, override or isolate
// control.
func IsBidiControl(r rune) bool {
	return r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069
}

// JSONProblem describes what is wrong with the strings of a JSON document
// (keys and values, escapes decoded), or is "" when all are safe.
func JSONProblem(doc []byte) string {
	if !utf8.Valid(doc) {
		return "the body is not valid UTF-8"
	}
	// Without an escape, the raw bytes are the strings' bytes.
	if !bytes.Contains(doc, []byte(`\u`)) && !bytes.Contains(doc, []byte(`\U`)) {
		if p := Problem(string(doc)); p != "" {
			return "a string holds a " + p
		}
		return ""
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return "" // not JSON: the decoder's own error says so later
	}
	return walk(v)
}

// ValueProblem is JSONProblem for a value already decoded (strings,
// []any, map[string]any): what is wrong with its strings, or "".
func ValueProblem(v any) string { return walk(v) }

func walk(v any) string {
	switch x := v.(type) {
	case string:
		if p := Problem(x); p != "" {
			return "a string holds a " + p
		}
	case []any:
		for _, e := range x {
			if p := walk(e); p != "" {
				return p
			}
		}
	case map[string]any:
		for k, e := range x {
			if p := Problem(k); p != "" {
				return "a member name holds a " + p
			}
			if p := walk(e); p != "" {
				return p
			}
		}
	}
	return ""
}
