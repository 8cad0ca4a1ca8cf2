package clientaddr

import (
	"net"
	"time"

	"github.com/pires/go-proxyproto"
)

// Listen wraps ln so that a connection from a trusted proxy may open with
// a PROXY protocol header (v2, or v1), whose source address then becomes
// the connection's RemoteAddr. The header is optional from a trusted peer,
// which may speak plain HTTP with X-Forwarded-For instead. From any other
// peer the connection is handed on untouched: a PROXY header it sends is
// not read as one, and the HTTP server refuses it as a malformed request.
// headerTimeout bounds the wait for the header. With no trusted proxy ln
// is answered as it is.
func (t *Trusted) Listen(ln net.Listener, headerTimeout time.Duration) net.Listener {
	if t == nil {
		return ln
	}
	return &proxyproto.Listener{
		Listener:          ln,
		ReadHeaderTimeout: headerTimeout,
		ConnPolicy: func(o proxyproto.ConnPolicyOptions) (proxyproto.Policy, error) {
			if ta, ok := o.Upstream.(*net.TCPAddr); ok && t.Contains(tcpAddr(ta)) {
				return proxyproto.USE, nil
			}
			return proxyproto.SKIP, nil
		},
	}
}
