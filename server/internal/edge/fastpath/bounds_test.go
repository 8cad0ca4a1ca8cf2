package fastpath

import (
	"net"
	"net/http"
	"testing"
)

// An address's pool keeps at most maxIdlePerUpstream idle connections;
// one returned past that is closed, not kept.
func TestUpstreamPoolIsBounded(t *testing.T) {
	u := &upstreams{pools: map[string]*pool{}}
	var extra []net.Conn
	for i := range maxIdlePerUpstream + 3 {
		a, b := net.Pipe()
		defer b.Close()
		u.put("127.0.0.1:1", &upConn{nc: a})
		if i >= maxIdlePerUpstream {
			extra = append(extra, b)
		}
	}
	u.mu.Lock()
	kept := len(u.pools["127.0.0.1:1"].idle)
	u.pools["127.0.0.1:1"].sweep.Stop()
	u.mu.Unlock()
	if kept != maxIdlePerUpstream {
		t.Fatalf("%d idle connections kept, want %d", kept, maxIdlePerUpstream)
	}
	for _, b := range extra {
		if _, err := b.Read(make([]byte, 1)); err == nil {
			t.Fatal("a connection past the bound was kept open")
		}
	}
}

// An in-process answer on the h2 path is kept up to h2MaxBuffered bytes;
// a write past that fails and marks the answer failed.
func TestH2HandlerAnswerIsBounded(t *testing.T) {
	w := &h2writer{header: http.Header{}}
	chunk := make([]byte, 64<<10)
	for w.buf.Len()+len(chunk) <= h2MaxBuffered {
		if _, err := w.Write(chunk); err != nil {
			t.Fatalf("a write within the bound failed at %d bytes: %v", w.buf.Len(), err)
		}
	}
	if _, err := w.Write(chunk); err == nil || !w.failed {
		t.Fatalf("a write past %d bytes was kept (%d buffered)", h2MaxBuffered, w.buf.Len())
	}
	if w.buf.Len() > h2MaxBuffered {
		t.Fatalf("%d bytes buffered, bound %d", w.buf.Len(), h2MaxBuffered)
	}
}
