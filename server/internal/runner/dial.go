package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netns"
)

// ownNamespaces are the versions this process's supervisors run in
// sandboxes: each one's address → its bound network namespace. Only these
// are dialed from inside: a version another replica runs, even one on the
// same machine whose namespace is visible under /run/netns, is reached
// over TCP at its address, as from another machine.
var ownNamespaces sync.Map // netip.Addr → string

// own records slot s's version as this process's, once its network is up.
func own(sb *sandbox, s slot) {
	_, guest := sb.addrs(s)
	ownNamespaces.Store(guest, "/run/netns/"+netnsName(s))
}

// disown forgets slot s's version before its network goes.
func disown(sb *sandbox, s slot) {
	_, guest := sb.addrs(s)
	ownNamespaces.CompareAndDelete(guest, "/run/netns/"+netnsName(s))
}

// DialVersion dials addr (host:port) for the edge. An address of a
// version this process runs in a sandbox is dialed from inside its network
// namespace, at its loopback port: the connection is made on a thread that
// entered the namespace for that moment, so the proxied request reaches
// the app over the namespace's own loopback, as a request from inside
// would, and never crosses the veth pair, the NAT or the firewall. Any
// other address, or a namespace that cannot be entered, is a plain TCP
// dial.
func DialVersion(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		if ns, ok := namespaceOf(ap.Addr()); ok {
			if c, err := dialIn(ctx, &d, ns, ap); err == nil || !errors.Is(err, errEnter) {
				return c, err
			}
		}
	}
	return d.DialContext(ctx, network, addr)
}

// namespaceOf is the bound network namespace of the version whose sandbox
// address is a, if this process runs it.
func namespaceOf(a netip.Addr) (string, bool) {
	ns, ok := ownNamespaces.Load(a)
	if !ok {
		return "", false
	}
	if _, err := os.Stat(ns.(string)); err != nil {
		return "", false
	}
	return ns.(string), true
}

var errEnter = errors.New("runner: entering the version's namespace")

// dialIn connects to the version at ap from inside the namespace at path:
// its loopback port first, where apps bound to 127.0.0.1 answer, then its
// own address. A socket keeps the namespace it was made in.
func dialIn(ctx context.Context, d *net.Dialer, path string, ap netip.AddrPort) (net.Conn, error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("%w: %v", errEnter, err)
	}
	defer orig.Close()
	target, err := netns.GetFromPath(path)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("%w: %v", errEnter, err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("%w: %v", errEnter, err)
	}
	c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), ap.Port()).String())
	if errors.Is(err, syscall.ECONNREFUSED) {
		c, err = d.DialContext(ctx, "tcp", ap.String())
	}
	if serr := netns.Set(orig); serr != nil {
		// The thread stays in the version's namespace: it must run
		// nothing else, so it stays locked and ends with this goroutine.
		if c != nil {
			c.Close()
		}
		return nil, fmt.Errorf("%w: returning: %v", errEnter, serr)
	}
	runtime.UnlockOSThread()
	return c, err
}
