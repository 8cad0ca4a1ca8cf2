package httpapi

import (
	"bytes"
	"net/http"
)

// Recorder keeps an answer in memory: for the kept answers, the stored
// idempotent replays and MCP's tool calls, which answer with the REST
// handler's bytes. httptest's would do, but it copies the header on every
// WriteHeader, and this is not test code.
type Recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

// NewRecorder is an empty Recorder whose body has room for size bytes.
func NewRecorder(size int) *Recorder {
	r := &Recorder{header: http.Header{}}
	r.body.Grow(size)
	return r
}

// Result is the answer recorded: its status, header and body. The body is
// the Recorder's own buffer.
func (r *Recorder) Result() (status int, header http.Header, body []byte) {
	return r.status, r.header, r.body.Bytes()
}

func (r *Recorder) Header() http.Header { return r.header }

func (r *Recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *Recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}
