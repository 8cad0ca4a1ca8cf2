package fastpath

import (
	"bufio"
	"context"
	"net"
	"sync"
	"time"

	"github.com/pierhq/pier/server/internal/edge"
)

// The upstream connections' bounds, net/http's Transport's as the edge's
// ReverseProxy sets it (server/internal/edge/proxy.go).
const (
	// maxIdlePerUpstream bounds the idle connections kept to one address.
	maxIdlePerUpstream = 512
	// upstreamIdle is how long an idle connection is kept.
	upstreamIdle = 90 * time.Second
	dialTimeout  = 5 * time.Second
	// responseHeaderTimeout bounds the wait for a response head after the
	// request was written, and any silence within a response's body.
	responseHeaderTimeout = 5 * time.Minute
	// maxResponseHead bounds a response head, as the Transport's default.
	maxResponseHead = 10 << 20
)

// upConn is a connection to a process. Its reader reads through lim, which
// bounds a response head: a head larger than maxResponseHead fails.
type upConn struct {
	nc  net.Conn
	lim limitedConn
	br  *bufio.Reader
	// readBy and writeBy are the deadlines set on nc.
	readBy, writeBy time.Time
	idleSince       time.Time
}

type limitedConn struct {
	net.Conn
	left int64
}

func (c *limitedConn) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errHeadTooLarge
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.Conn.Read(p)
	c.left -= int64(n)
	return n, err
}

type upErr string

func (e upErr) Error() string { return string(e) }

const errHeadTooLarge = upErr("upstream response head too large")

// pool keeps idle connections to one address, newest last.
type pool struct {
	idle  []*upConn
	sweep *time.Timer
}

// upstreams are the forwarder's idle connections by address, shared by
// both listeners. An address's pool is removed once it holds none.
type upstreams struct {
	mu    sync.Mutex
	pools map[string]*pool
}

var conns = &upstreams{pools: map[string]*pool{}}

// get returns an idle connection to addr, or a new one; reused says which.
// With check, an idle connection is first peeked at (a system call) to
// skip one the process closed; without, the caller sends the request
// again on a new connection when a reused one fails before answering.
func (u *upstreams) get(addr string, check bool) (uc *upConn, reused bool, err error) {
	for {
		u.mu.Lock()
		p := u.pools[addr]
		if p == nil || len(p.idle) == 0 {
			u.mu.Unlock()
			break
		}
		uc = p.idle[len(p.idle)-1]
		p.idle[len(p.idle)-1] = nil
		p.idle = p.idle[:len(p.idle)-1]
		u.mu.Unlock()
		if time.Since(uc.idleSince) < upstreamIdle && (!check || alive(uc.nc)) {
			return uc, true, nil
		}
		uc.nc.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	nc, err := edge.DialUpstream(ctx, "tcp", addr)
	cancel()
	if err != nil {
		return nil, false, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetKeepAlivePeriod(30 * time.Second)
	}
	uc = &upConn{nc: nc, lim: limitedConn{Conn: nc}}
	uc.br = bufio.NewReaderSize(&uc.lim, 8<<10)
	return uc, false, nil
}

// put keeps uc for the next request to addr, or closes it when the pool
// is full.
func (u *upstreams) put(addr string, uc *upConn) {
	uc.idleSince = time.Now()
	u.mu.Lock()
	p := u.pools[addr]
	if p == nil {
		p = &pool{}
		u.pools[addr] = p
	}
	if len(p.idle) >= maxIdlePerUpstream {
		u.mu.Unlock()
		uc.nc.Close()
		return
	}
	p.idle = append(p.idle, uc)
	if p.sweep == nil {
		p.sweep = time.AfterFunc(upstreamIdle/3, func() { u.sweep(addr) })
	}
	u.mu.Unlock()
}

// sweep closes addr's connections idle for longer than upstreamIdle or
// closed by the process (a version stopped after a relaunch), and forgets
// the address once none is left.
func (u *upstreams) sweep(addr string) {
	u.mu.Lock()
	p := u.pools[addr]
	if p == nil {
		u.mu.Unlock()
		return
	}
	var drop []*upConn
	keep := p.idle[:0]
	for _, uc := range p.idle {
		if time.Since(uc.idleSince) >= upstreamIdle || !alive(uc.nc) {
			drop = append(drop, uc)
		} else {
			keep = append(keep, uc)
		}
	}
	clear(p.idle[len(keep):])
	p.idle = keep
	if len(p.idle) == 0 {
		delete(u.pools, addr)
	} else {
		p.sweep.Reset(upstreamIdle / 3)
	}
	u.mu.Unlock()
	for _, uc := range drop {
		uc.nc.Close()
	}
}
