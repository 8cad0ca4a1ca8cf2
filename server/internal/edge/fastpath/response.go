package fastpath

import (
	"bufio"
	"bytes"
	"iter"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
)

// respHead is an upstream's response head as the forwarder needs it: the
// status, the header fields in their order (hop-by-hop ones included; the
// writer drops them), and the framing net/http's Transport would read.
type respHead struct {
	status       int
	major, minor int
	fields       []field
	// clen is the body's length from Content-Length, -1 when none
	// applies; chunked means Transfer-Encoding: chunked (which overrides
	// it). close is set when the upstream closes the connection after
	// this response, as net/http's shouldClose decides.
	clen    int64
	chunked bool
	close   bool
	hasDate bool
}

// field is one header line's name and trimmed value.
type field struct{ k, v []byte }

// headEnd returns the length of the response head at the start of b (up
// to and including the empty line ending it), or 0 when b holds no whole
// head. Lines end in LF, with or without CR, as net/textproto reads them.
func headEnd(b []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return 0
		}
		line := b[i : i+j]
		if i > 0 && (len(line) == 0 || len(line) == 1 && line[0] == '\r') {
			return i + j + 1
		}
		i += j + 1
	}
}

// parseResponseHead reads a response head (as headEnd found it) strictly:
// an HTTP/1.0 or HTTP/1.1 status line with a three-digit code, header
// lines of a token, a colon and a value of visible characters, blanks and
// obs-text, no folded lines. Whatever it refuses goes to
// http.ReadResponse (readResponseHead). The fields' slices point into b.
func parseResponseHead(b []byte, h *respHead) bool {
	*h = respHead{fields: h.fields[:0], clen: -1}
	line, rest := cutLF(b)
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || (line[7] != '0' && line[7] != '1') || line[8] != ' ' {
		return false
	}
	h.major, h.minor = 1, int(line[7]-'0')
	code := line[9:12]
	if code[0] < '1' || code[0] > '9' || code[1] < '0' || code[1] > '9' || code[2] < '0' || code[2] > '9' {
		return false
	}
	if len(line) > 12 && line[12] != ' ' {
		return false
	}
	h.status = int(code[0]-'0')*100 + int(code[1]-'0')*10 + int(code[2]-'0')
	var cl []byte
	var te, conn int
	var hasClose, hasKeepAlive bool
	for {
		line, rest = cutLF(rest)
		if len(line) == 0 {
			break
		}
		k, v, ok := splitField(line, true)
		if !ok {
			return false
		}
		h.fields = append(h.fields, field{k, v})
		switch {
		case equalFold(k, "content-length"):
			if cl != nil && !bytes.Equal(cl, v) {
				return false
			}
			cl = v
		case equalFold(k, "transfer-encoding"):
			te++
			if !equalFold(v, "chunked") {
				return false
			}
		case equalFold(k, "connection"):
			conn++
			for tok := range tokens(v) {
				switch {
				case equalFold(tok, "close"):
					hasClose = true
				case equalFold(tok, "keep-alive"):
					hasKeepAlive = true
				}
			}
		case equalFold(k, "date"):
			h.hasDate = true
		}
	}
	if te > 1 {
		return false
	}
	if cl != nil {
		n, err := strconv.ParseUint(string(cl), 10, 63)
		if err != nil {
			return false
		}
		h.clen = int64(n)
	}
	h.chunked = te == 1 && h.minor == 1
	if h.chunked {
		h.clen = -1
	}
	if h.minor == 0 {
		h.close = hasClose || !hasKeepAlive
	} else if h.close = hasClose; hasClose && conn > 0 {
		// net/http's reader drops an HTTP/1.1 Connection header that
		// says close, so ReverseProxy drops none of the fields it names.
		h.fields = slices.DeleteFunc(h.fields, func(f field) bool { return equalFold(f.k, "connection") })
	}
	return true
}

// readResponseHead is the fallback for heads parseResponseHead refuses or
// that do not fit the connection's buffer: net/http's own reader (which
// consumes the head from br), its answer turned into the same shape.
func readResponseHead(br *bufio.Reader, h *respHead) bool {
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode < 100 || res.StatusCode > 999 {
		return false
	}
	*h = respHead{fields: h.fields[:0], clen: -1, status: res.StatusCode, major: res.ProtoMajor, minor: res.ProtoMinor}
	keys := make([]string, 0, len(res.Header))
	for k := range res.Header {
		keys = append(keys, k)
	}
	for _, k := range keys {
		for _, v := range res.Header[k] {
			h.fields = append(h.fields, field{[]byte(k), []byte(v)})
		}
	}
	if cl := res.Header["Content-Length"]; len(cl) > 0 {
		n, err := strconv.ParseUint(textproto.TrimString(cl[0]), 10, 63)
		if err != nil {
			return false
		}
		h.clen = int64(n)
	}
	for _, te := range res.TransferEncoding {
		if te == "chunked" {
			h.chunked = true
		}
	}
	if h.chunked {
		h.fields = append(h.fields, field{[]byte("Transfer-Encoding"), []byte("chunked")})
	}
	_, h.hasDate = res.Header["Date"]
	if len(res.Trailer) > 0 {
		ks := make([]string, 0, len(res.Trailer))
		for k := range res.Trailer {
			ks = append(ks, k)
		}
		h.fields = append(h.fields, field{[]byte("Trailer"), []byte(strings.Join(ks, ", "))})
	}
	// Close is also set for a body that ends with the connection, which
	// the forwarder never reuses either.
	h.close = res.Close
	return true
}

// tokens yields the trimmed, non-empty elements of a comma-separated
// header value.
func tokens(v []byte) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for tok := range bytes.SplitSeq(v, []byte(",")) {
			if tok = trim(tok); len(tok) > 0 && !yield(tok) {
				return
			}
		}
	}
}

// splitField splits a header field line into its name and its value
// without surrounding blanks. ok is false for a line the fast path leaves
// to net/http: a name that is not a token (a folded line too, which
// starts with a blank), or a value with control bytes, or, unless obsText
// allows them (answers from upstream may carry them), bytes past ASCII.
func splitField(line []byte, obsText bool) (name, value []byte, ok bool) {
	colon := -1
	for i, c := range line {
		if c == ':' {
			colon = i
			break
		}
		if !isToken(c) {
			return nil, nil, false
		}
	}
	if colon < 1 {
		return nil, nil, false
	}
	value = trim(line[colon+1:])
	for _, c := range value {
		if c < ' ' && c != '\t' || c == 0x7f || c > 0x7f && !obsText {
			return nil, nil, false
		}
	}
	return line[:colon], value, true
}

// cutLF cuts the first line off b: up to LF, without a CR before it.
func cutLF(b []byte) (line, rest []byte) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return b, nil
	}
	line, rest = b[:i], b[i+1:]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line, rest
}
