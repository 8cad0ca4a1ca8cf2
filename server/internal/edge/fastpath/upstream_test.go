package fastpath

import (
	"net"
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
