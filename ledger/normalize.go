package ledger

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"unicode/utf8"
)

// normalizedPlain is normalize's answer for details made only of what
// the server's entries hold (strings, booleans, integers, lists of
// strings, nil), built without the round trip through JSON: the same
// values the round trip gives. ok is false for anything else, which then
// takes the round trip. TestNormalizePlainMatchesTheRoundTrip compares
// the two.
func normalizedPlain(d map[string]any) (out map[string]any, ok bool) {
	out = make(map[string]any, len(d))
	for k, v := range d {
		if !utf8.ValidString(k) {
			return nil, false
		}
		if out[k], ok = plainValue(v); !ok {
			return nil, false
		}
	}
	return out, true
}

// plainValue is v as JSON would give it back (a string, a bool, a
// json.Number, a []any of strings, nil), or ok false.
func plainValue(v any) (any, bool) {
	switch x := v.(type) {
	case nil:
		return nil, true
	case bool:
		return x, true
	case string:
		return x, utf8.ValidString(x)
	case json.Number, json.Marshaler, encoding.TextMarshaler:
		return nil, false
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return json.Number(strconv.FormatInt(rv.Int(), 10)), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return json.Number(strconv.FormatUint(rv.Uint(), 10)), true
	case reflect.Bool:
		return rv.Bool(), true
	case reflect.String:
		return rv.String(), utf8.ValidString(rv.String())
	case reflect.Slice:
		return plainStrings(rv)
	}
	return nil, false
}

// plainStrings is a slice of strings as JSON gives it back: nil for a nil
// slice, else a []any of strings.
func plainStrings(rv reflect.Value) (any, bool) {
	elem := rv.Type().Elem()
	if elem.Kind() != reflect.String || elem == numberType || elem.Implements(marshalerType) || elem.Implements(textMarshalerType) {
		return nil, false
	}
	if rv.IsNil() {
		return nil, true
	}
	out := make([]any, rv.Len())
	for i := range out {
		s := rv.Index(i).String()
		if !utf8.ValidString(s) {
			return nil, false
		}
		out[i] = s
	}
	return out, true
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	numberType        = reflect.TypeFor[json.Number]()
)
