package httpheader

import (
	"iter"
	"mime"
	"strconv"
	"strings"
)

// Elements yields the trimmed, non-empty elements of comma-separated header
// values, in order.
func Elements(values ...string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, v := range values {
			for e := range strings.SplitSeq(v, ",") {
				if e = strings.TrimSpace(e); e != "" && !yield(e) {
					return
				}
			}
		}
	}
}

// MediaTypes yields the media types that Accept values admit: each element
// that parses, without its parameters, unless its q-value is 0.
func MediaTypes(accept ...string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for e := range Elements(accept...) {
			mt, params, err := mime.ParseMediaType(e)
			if err != nil {
				continue
			}
			if q, ok := params["q"]; ok {
				if f, err := strconv.ParseFloat(q, 64); err == nil && f == 0 {
					continue
				}
			}
			if !yield(mt) {
				return
			}
		}
	}
}

// ETagMatches applies If-None-Match's weak comparison (RFC 9110 §13.1.2):
// whether header is "*" or lists etag, weak or strong.
func ETagMatches(header, etag string) bool {
	for e := range Elements(header) {
		if e == "*" || strings.TrimPrefix(e, "W/") == etag {
			return true
		}
	}
	return false
}
