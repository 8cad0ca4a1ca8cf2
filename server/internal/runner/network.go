package runner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// firewallTable is the nftables table that confines sandboxes. Its comment
// carries the ruleset's version: a table of another version is replaced.
const (
	firewallTable   = "pier_sandbox"
	firewallVersion = "pier sandbox rules v3"
)

// firewallRules confine every interface named pvh*, the host's ends of the
// sandboxes' veth pairs:
//   - input: a sandbox reaches none of the host's listeners, on any
//     address, except answers to connections the host opened (the edge
//     and the health checks) and the ports in @host_ports, each on one
//     interface and the host's own address there (services the host
//     offers that sandbox alone, such as its database);
//   - output: nothing the host sends to the sandbox network leaves by
//     another interface (a stopped version's address is unreachable);
//   - forward: a sandbox reaches no other sandbox; nothing reaches into a
//     sandbox from outside but a new TCP connection to its app port
//     (AppPort) from an address in @peers (the other replicas, whose edges
//     proxy to this host's versions), and the sandbox's answers on those
//     connections (from its own address: one routed through another
//     interface is dropped); a sandbox reaches no loopback, private,
//     shared, link-local (metadata), multicast or reserved address; what
//     is left, the public network, is allowed unless its address is in
//     @no_egress (its project's policy), and is masqueraded.
func firewallRules(network netip.Prefix) string {
	return fmt.Sprintf(`table inet %[1]s
delete table inet %[1]s
table inet %[1]s {
	comment "%[2]s"
	set no_egress { type ipv4_addr; }
	set host_ports { type ifname . ipv4_addr . inet_service; }
	set peers { type ipv4_addr; flags interval; }
	chain input {
		type filter hook input priority filter - 5; policy accept;
		iifname "pvh*" ct state established,related accept
		iifname "pvh*" meta l4proto tcp iifname . ip daddr . tcp dport @host_ports accept
		iifname "pvh*" drop
	}
	chain forward {
		type filter hook forward priority filter - 5; policy accept;
		iifname "pvh*" oifname "pvh*" drop
		oifname "pvh*" ct state established,related accept
		oifname "pvh*" ip saddr @peers tcp dport %[4]d ct state new accept
		oifname "pvh*" drop
		iifname "pvh*" fib saddr . iif oif missing drop
		iifname "pvh*" ct direction reply ct state established accept
		iifname "pvh*" ip saddr != %[3]s drop
		iifname "pvh*" ip saddr @no_egress drop
		iifname "pvh*" ip daddr { 0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12, 192.0.0.0/24, 192.168.0.0/16, 198.18.0.0/15, 224.0.0.0/3 } drop
		iifname "pvh*" meta nfproto ipv6 drop
		iifname "pvh*" accept
	}
	chain output {
		type filter hook output priority filter - 5; policy accept;
		ip daddr %[3]s oifname != "pvh*" reject
	}
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr %[3]s oifname != "pvh*" masquerade
	}
}
`, firewallTable, firewallVersion, network.Masked(), AppPort)
}

// peersScript sets the firewall's @peers to exactly peers.
func peersScript(peers []netip.Prefix) string {
	s := fmt.Sprintf("flush set inet %s peers\n", firewallTable)
	if len(peers) > 0 {
		elems := make([]string, len(peers))
		for i, p := range peers {
			elems[i] = p.Masked().String()
		}
		s += fmt.Sprintf("add element inet %s peers { %s }\n", firewallTable, strings.Join(elems, ", "))
	}
	return s
}

// setupFirewall installs the rules unless this version of them is there,
// under a lock so Pier processes starting together install them once, and
// sets the peers allowed to reach sandboxes' app port (a setting of the
// host's network namespace: the last Pier to start there sets it). It
// reports whether sandboxes can reach the public network (forwarding on).
func setupFirewall(lockDir string, network netip.Prefix, peers []netip.Prefix) (egress bool, err error) {
	lock, err := os.OpenFile(filepath.Join(lockDir, "firewall.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return false, err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return false, err
	}
	cur, _ := exec.Command("nft", "list", "table", "inet", firewallTable).Output()
	if !bytes.Contains(cur, []byte(firewallVersion)) || !bytes.Contains(cur, []byte(network.Masked().String())) {
		if err := nftScript(firewallRules(network)); err != nil {
			return false, err
		}
	}
	if err := nftScript(peersScript(peers)); err != nil {
		return false, fmt.Errorf("the sandbox peers: %w", err)
	}
	// Nothing for the sandbox network leaves the host by another route
	// once a version's pair is gone.
	_, prefix, _ := net.ParseCIDR(network.Masked().String())
	if err := netlink.RouteReplace(&netlink.Route{Dst: prefix, Type: unix.RTN_UNREACHABLE}); err != nil {
		return false, fmt.Errorf("the sandbox network's unreachable route: %w", err)
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); err == nil && strings.TrimSpace(string(b)) == "1" {
		return true, nil
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return false, nil
	}
	return true, nil
}

// nftScript runs an nft script.
func nftScript(script string) error {
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// nftElement adds (or deletes) an element of one of the firewall's sets.
func nftElement(add bool, set, elem string) error {
	verb := "add"
	if !add {
		verb = "delete"
	}
	out, err := exec.Command("nft", verb, "element", "inet", firewallTable, set, "{ "+elem+" }").CombinedOutput()
	if err != nil {
		return fmt.Errorf("nft %s element %s: %v: %s", verb, set, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// netUp makes slot s's network namespace with the version's end of a veth
// pair in it, addressed, up and routed through the host's end.
func (sb *sandbox) netUp(s slot) error {
	netDown(s) // what a crashed holder of the slot left
	host, guest := sb.addrs(s)
	ns, err := newNamedNetns(netnsName(s))
	if err != nil {
		return fmt.Errorf("runner: network namespace: %w", err)
	}
	defer ns.Close()
	fail := func(err error) error {
		netDown(s)
		return fmt.Errorf("runner: sandbox network: %w", err)
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostIface(s)}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(ns))}
	if err := netlink.LinkAdd(veth); err != nil {
		return fail(err)
	}
	hl, err := netlink.LinkByName(hostIface(s))
	if err != nil {
		return fail(err)
	}
	if err := netlink.AddrAdd(hl, &netlink.Addr{IPNet: ipnet(host, 30)}); err != nil {
		return fail(err)
	}
	if err := netlink.LinkSetUp(hl); err != nil {
		return fail(err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fail(err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fail(err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fail(err)
	}
	gl, err := h.LinkByName("eth0")
	if err != nil {
		return fail(err)
	}
	if err := h.AddrAdd(gl, &netlink.Addr{IPNet: ipnet(guest, 30)}); err != nil {
		return fail(err)
	}
	if err := h.LinkSetUp(gl); err != nil {
		return fail(err)
	}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: gl.Attrs().Index, Gw: net.IP(host.AsSlice())}); err != nil {
		return fail(err)
	}
	if err := loopbackPort(netnsName(s)); err != nil {
		return fail(err)
	}
	return nil
}

// loopbackPort lets an app that listens on 127.0.0.1:AppPort, as many do,
// answer on its own address too: inside its namespace, connections to
// AppPort arriving on eth0 go to the loopback address.
func loopbackPort(ns string) error {
	rules := fmt.Sprintf(`table ip pier {
	chain prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		iifname "eth0" tcp dport %d dnat to 127.0.0.1:%d
	}
}
`, AppPort, AppPort)
	cmd := exec.Command("nsenter", "--net=/run/netns/"+ns, "sh", "-c",
		"echo 1 > /proc/sys/net/ipv4/conf/eth0/route_localnet && exec nft -f -")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("forwarding the app's port: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

func ipnet(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, 32)}
}

// netDown removes slot s's namespace, which takes the veth pair with it,
// and the host's end should it be left.
func netDown(s slot) {
	netns.DeleteNamed(netnsName(s))
	if l, err := netlink.LinkByName(hostIface(s)); err == nil {
		netlink.LinkDel(l)
	}
}

// newNamedNetns makes a network namespace bound at /run/netns/name without
// moving the calling goroutine's thread into it for longer than it takes.
func newNamedNetns(name string) (netns.NsHandle, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return 0, err
	}
	defer orig.Close()
	ns, err := netns.NewNamed(name)
	if serr := netns.Set(orig); serr != nil {
		// The thread is in the wrong namespace: it must not run anything
		// else. Leaving it locked makes the runtime end it.
		runtime.LockOSThread()
		return 0, errors.Join(err, serr)
	}
	if err != nil {
		return 0, err
	}
	return ns, nil
}

// HostService is a service of the host a sandboxed version may reach,
// through a forwarder on its own gateway: Pier reaches it at Network and
// Address; the version at the gateway's Port, and learns where from its
// variable Env, whose value Value makes from that host:port.
type HostService struct {
	Network, Address string
	Port             int
	Env              string
	Value            func(addr string) string
}

// maxForwarded bounds the connections one version has open to one host
// service.
const maxForwarded = 64

// forwarder relays one version's connections to one host service.
type forwarder struct {
	ln      net.Listener
	elem    string
	guest   netip.Addr
	network string
	address string
	slots   chan struct{}
}

// openHostService listens on slot s's gateway for hs, lets the version
// (and only it) reach that port through the firewall, and relays what
// arrives. It returns the address the version reaches it by.
func (sb *sandbox) openHostService(s slot, hs HostService) (*forwarder, string, error) {
	host, guest := sb.addrs(s)
	addr := netip.AddrPortFrom(host, uint16(hs.Port)).String()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("runner: forwarding %s: %w", hs.Env, err)
	}
	f := &forwarder{ln: ln, guest: guest, network: hs.Network, address: hs.Address, slots: make(chan struct{}, maxForwarded),
		elem: fmt.Sprintf("%q . %s . %d", hostIface(s), host, hs.Port)}
	if err := nftElement(true, "host_ports", f.elem); err != nil {
		ln.Close()
		return nil, "", err
	}
	go f.serve()
	return f, addr, nil
}

func (f *forwarder) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
		if err != nil || ap.Addr().Unmap() != f.guest {
			c.Close() // only the version whose gateway this is
			continue
		}
		select {
		case f.slots <- struct{}{}:
		default:
			c.Close()
			continue
		}
		go func() {
			defer func() { <-f.slots }()
			defer c.Close()
			up, err := net.DialTimeout(f.network, f.address, 5*time.Second)
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { io.Copy(up, c); closeWrite(up); done <- struct{}{} }()
			go func() { io.Copy(c, up); closeWrite(c); done <- struct{}{} }()
			<-done
			<-done
		}()
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

func (f *forwarder) close() {
	f.ln.Close()
	nftElement(false, "host_ports", f.elem)
}
