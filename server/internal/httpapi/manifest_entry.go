package httpapi

import (
	"github.com/pierhq/pier/server/internal/safetext"
	"github.com/pierhq/pier/server/internal/service"
)

// The contract's ManifestFile, as fastEntry checks it (openapi.yaml).
const (
	entryPathMax        = 512
	entrySizeMax        = 26214400
	entryContentTypeMax = 200
)

// fastEntry reads a manifest entry the decoder found to be one JSON value
// when it is plainly sound: an object of the contract's members alone
// (path, size, sha256, contentType), each once, their strings without
// escapes and within their lengths counted in bytes (never fewer than the
// contract's UTF-16 units), the size a plain integer in range, the hash
// 64 lowercase hex digits, no unsafe text. Anything else, sound or not,
// is not ok, and goes the whole way (the contract's validator), which
// words its refusal: an entry ok here is one the validator accepts.
func fastEntry(raw []byte) (service.ManifestEntry, bool) {
	var e service.ManifestEntry
	var seen [4]bool
	r := entryReader{b: raw}
	if !r.byte('{') {
		return e, false
	}
	for first := true; ; first = false {
		if r.byte('}') {
			break
		}
		if !first && !r.byte(',') {
			return e, false
		}
		key, ok := r.str()
		if !ok || !r.byte(':') {
			return e, false
		}
		member := memberOf(key)
		if member < 0 || seen[member] {
			return e, false
		}
		seen[member] = true
		if !r.member(member, &e) {
			return e, false
		}
	}
	r.space()
	if r.i != len(r.b) || !seen[0] || !seen[1] || !seen[2] {
		return e, false
	}
	return e, true
}

// memberOf numbers ManifestFile's members: path, size, sha256 (the
// required), contentType; -1 for another.
func memberOf(key string) int {
	switch key {
	case "path":
		return 0
	case "size":
		return 1
	case "sha256":
		return 2
	case "contentType":
		return 3
	}
	return -1
}

// entryReader reads a JSON value already found well formed.
type entryReader struct {
	b []byte
	i int
}

func (r *entryReader) space() {
	for r.i < len(r.b) && (r.b[r.i] == ' ' || r.b[r.i] == '\t' || r.b[r.i] == '\n' || r.b[r.i] == '\r') {
		r.i++
	}
}

// byte reads c after any white space.
func (r *entryReader) byte(c byte) bool {
	r.space()
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

// str reads a string without escapes, its text safe.
func (r *entryReader) str() (string, bool) {
	if !r.byte('"') {
		return "", false
	}
	start := r.i
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case '\\':
			return "", false
		case '"':
			s := string(r.b[start:r.i])
			r.i++
			return s, safetext.Problem(s) == ""
		}
		r.i++
	}
	return "", false
}

// member reads member m's value into e, checking it as the contract does.
func (r *entryReader) member(m int, e *service.ManifestEntry) bool {
	if m == 1 {
		r.space()
		n, digits := 0, 0
		for ; r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' && digits < 9; r.i++ {
			n = n*10 + int(r.b[r.i]-'0')
			digits++
		}
		if digits == 0 || n > entrySizeMax || r.i < len(r.b) && (r.b[r.i] == '.' || r.b[r.i] == 'e' || r.b[r.i] == 'E' || r.b[r.i] >= '0' && r.b[r.i] <= '9') {
			return false
		}
		e.Size = n
		return true
	}
	s, ok := r.str()
	switch {
	case !ok:
		return false
	case m == 0:
		e.Path = s
		return len(s) >= 1 && len(s) <= entryPathMax
	case m == 2:
		e.SHA256 = s
		return isLowerHex64(s)
	}
	e.ContentType = s
	return len(s) <= entryContentTypeMax
}

func isLowerHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
