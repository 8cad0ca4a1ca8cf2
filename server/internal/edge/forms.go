package edge

import (
	"bytes"
	"compress/gzip"
	"strconv"
	"strings"
	"sync"

	"github.com/andybalholm/brotli"

	"github.com/pierhq/pier/server/internal/store"
)

// A body is sent in one of these encodings; the compressed ones are the
// blob's forms, made once per content and kept in the store by its hash.
const (
	identity = iota
	gzipped
	brotlied
	encodings
)

// encodingH are the Content-Encoding values, by encoding.
var encodingH = [encodings][]string{nil, {"gzip"}, {"br"}}

// etagSuffix tells one encoding's ETag from another's: each is a
// different representation, and a cache that stored one must not be told
// by a 304 that it holds another.
var etagSuffix = [encodings]string{"", "-gzip", "-br"}

const (
	// minCompress is the smallest body worth compressing: under it, the
	// encodings' framing eats most of what they save.
	minCompress = 256
	// brotliLevel costs about twice gzip's best level and gets most of
	// brotli's gain over gzip; 11 gains a tenth more at 25 to 150 times
	// the cost, too slow for a first request to wait on (BenchmarkForms,
	// bench/README.md "Launch latency").
	brotliLevel = 5
)

// compressible says whether a media type is worth compressing: text and
// its kin, not images, audio, video, fonts in compressed formats or
// archives, which are compressed already.
func compressible(ctype string) bool {
	return strings.HasPrefix(ctype, "text/") || strings.Contains(ctype, "javascript") || strings.Contains(ctype, "json") ||
		strings.Contains(ctype, "xml") || strings.Contains(ctype, "svg") || ctype == "application/wasm"
}

// Compressors are reused: a gzip writer at its best level holds about a
// megabyte of state, and a brotli writer more.
var (
	gzipWriters   = sync.Pool{New: func() any { w, _ := gzip.NewWriterLevel(nil, gzip.BestCompression); return w }}
	brotliWriters = sync.Pool{New: func() any { return brotli.NewWriterLevel(nil, brotliLevel) }}
	formBuffers   = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

// makeForms compresses data with gzip and brotli. A form is kept only when
// it saves at least a tenth of the body, and brotli's only when it is
// smaller than gzip's too.
func makeForms(data []byte) store.Forms {
	var f store.Forms
	keep := len(data) * 9 / 10
	buf := formBuffers.Get().(*bytes.Buffer)
	defer formBuffers.Put(buf)

	buf.Reset()
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(buf)
	zw.Write(data)
	zw.Close()
	gzipWriters.Put(zw)
	if buf.Len() < keep {
		f.Gzip = bytes.Clone(buf.Bytes())
		keep = buf.Len()
	}

	buf.Reset()
	bw := brotliWriters.Get().(*brotli.Writer)
	bw.Reset(buf)
	bw.Write(data)
	bw.Close()
	brotliWriters.Put(bw)
	if buf.Len() < keep {
		f.Brotli = bytes.Clone(buf.Bytes())
	}
	return f
}

// newBlob is a hot cache entry for a body and its forms.
func newBlob(data []byte, f store.Forms) *blob {
	b := &blob{forms: [encodings][]byte{data, f.Gzip, f.Brotli}}
	for enc, body := range b.forms {
		if body != nil || enc == identity {
			b.lengthH[enc] = []string{strconv.Itoa(len(body))}
		}
	}
	b.varies = f.Gzip != nil || f.Brotli != nil
	return b
}

// choose picks the encoding to send a blob in for an Accept-Encoding
// value, as RFC 9110 §12.5.3 has it: among the forms the blob has, the one
// with the highest q-value above 0 (brotli before gzip when they tie, as
// it is smaller), else the body as it is. A coding the header does not
// name takes the q-value of "*", or is not acceptable; "gzip;q=0" refuses
// gzip. No header, or one that accepts no form the blob has, gets the
// body as it is, which identity;q=0 does not change: refusing every
// answer would help no one.
func (b *blob) choose(acceptEncoding string) int {
	if !b.varies || acceptEncoding == "" {
		return identity
	}
	q := [encodings]float64{-1, -1, -1}
	star := -1.0
	for part := range strings.SplitSeq(acceptEncoding, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		name = strings.TrimSpace(name)
		enc := -1
		switch {
		case strings.EqualFold(name, "br"):
			enc = brotlied
		case strings.EqualFold(name, "gzip"), strings.EqualFold(name, "x-gzip"):
			enc = gzipped
		case strings.EqualFold(name, "identity"):
			enc = identity
		case name == "*":
			if star < 0 {
				star = qValue(params)
			}
			continue
		default:
			continue
		}
		if q[enc] < 0 { // the first mention counts
			q[enc] = qValue(params)
		}
	}
	best, bestQ := identity, 0.0
	if q[identity] > 0 {
		bestQ = q[identity]
	}
	for _, enc := range []int{gzipped, brotlied} {
		if b.forms[enc] == nil {
			continue
		}
		qe := q[enc]
		if qe < 0 {
			qe = max(star, 0)
		}
		if qe > 0 && qe >= bestQ {
			best, bestQ = enc, qe
		}
	}
	return best
}

// qValue is the weight among a coding's parameters: 1 when absent, 0 when
// malformed (a client that garbles it is not sent that coding).
func qValue(params string) float64 {
	for p := range strings.SplitSeq(params, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || q < 0 || q > 1 {
			return 0
		}
		return q
	}
	return 1
}
