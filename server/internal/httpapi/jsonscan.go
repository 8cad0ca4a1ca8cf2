package httpapi

// jsonScan reads the plainest JSON, for the checks that prove a request
// valid without the contract's validator (quoteRequestValid, fastEntry):
// strings without escapes and small positive integers without sign,
// fraction or exponent. Anything else fails the scan, which then proves
// nothing.
type jsonScan struct {
	b []byte
	i int
}

func (s *jsonScan) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next skips white space and takes c.
func (s *jsonScan) next(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string of bytes 0x20 to 0x7e, without a backslash.
func (s *jsonScan) str() (string, bool) { return s.stringOf(0x7e) }

// text reads a string without a backslash or control byte; bytes above
// 0x7f pass (the caller checks its text).
func (s *jsonScan) text() (string, bool) { return s.stringOf(0xff) }

// stringOf reads a string of bytes 0x20 to top, without a backslash.
func (s *jsonScan) stringOf(top byte) (string, bool) {
	if !s.next('"') {
		return "", false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			v := string(s.b[start:s.i])
			s.i++
			return v, true
		case c < 0x20 || c > top || c == '\\':
			return "", false
		}
	}
	return "", false
}

// intIn reads an integer of at most two digits, without a leading zero,
// within [lo, hi].
func (s *jsonScan) intIn(lo, hi int) bool {
	s.space()
	v, digits := 0, 0
	for ; s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9'; s.i++ {
		if digits == 0 && s.b[s.i] == '0' {
			return false
		}
		v, digits = v*10+int(s.b[s.i]-'0'), digits+1
		if digits > 2 {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return false
	}
	return digits > 0 && v >= lo && v <= hi
}

// object reads an object, member reads each member's value after its
// key.
func (s *jsonScan) object(member func(key string) bool) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return true
	}
	for {
		key, ok := s.str()
		if !ok || !s.next(':') || !member(key) {
			return false
		}
		if s.next('}') {
			return true
		}
		if !s.next(',') {
			return false
		}
	}
}

// array reads an array, elem reads each element.
func (s *jsonScan) array(elem func() bool) bool {
	if !s.next('[') {
		return false
	}
	if s.next(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if s.next(']') {
			return true
		}
		if !s.next(',') {
			return false
		}
	}
}
