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
	s := jsonScan{b: raw}
	ok := s.object(func(key string) bool {
		member := memberOf(key)
		if member < 0 || seen[member] {
			return false
		}
		seen[member] = true
		return s.entryMember(member, &e)
	})
	s.space()
	return e, ok && s.i == len(s.b) && seen[0] && seen[1] && seen[2]
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

// entryMember reads member m's value into e, checking it as the contract
// does; a string's text must be safe (safetext).
func (s *jsonScan) entryMember(m int, e *service.ManifestEntry) bool {
	if m == 1 {
		s.space()
		n, digits := 0, 0
		for ; s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' && digits < 9; s.i++ {
			n = n*10 + int(s.b[s.i]-'0')
			digits++
		}
		if digits == 0 || n > entrySizeMax || s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E' || s.b[s.i] >= '0' && s.b[s.i] <= '9') {
			return false
		}
		e.Size = n
		return true
	}
	v, ok := s.text()
	switch {
	case !ok || safetext.Problem(v) != "":
		return false
	case m == 0:
		e.Path = v
		return len(v) >= 1 && len(v) <= entryPathMax
	case m == 2:
		e.SHA256 = v
		return isLowerHex64(v)
	}
	e.ContentType = v
	return len(v) <= entryContentTypeMax
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
