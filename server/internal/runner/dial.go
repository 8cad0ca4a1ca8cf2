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

// sandboxNetworks are the sandbox networks of this process's supervisors.
var sandboxNetworks sync.Map // netip.Prefix → struct{}

// DialVersion dials addr (host:port) for the edge. An address of a
// version sandboxed on this host is dialed from inside its network
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
// address is a, if a is one on this host.
func namespaceOf(a netip.Addr) (string, bool) {
	if !a.Is4() {
		return "", false
	}
	var found string
	sandboxNetworks.Range(func(k, _ any) bool {
		p := k.(netip.Prefix)
		if !p.Contains(a) {
			return true
		}
		off := ipv4Uint(a) - ipv4Uint(p.Masked().Addr())
		if off%4 == 2 {
			found = "/run/netns/" + netnsName(slot{n: int(off / 4)})
		}
		return false
	})
	if found == "" {
		return "", false
	}
	if _, err := os.Stat(found); err != nil {
		return "", false
	}
	return found, true
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
