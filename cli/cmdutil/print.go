package cmdutil

import (
	"encoding/json"
	"io"
)

// PrintJSON writes v as one line of JSON, without HTML escaping.
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// Deref is *s, or "-" when s is nil, for a value a summary prints.
func Deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}
