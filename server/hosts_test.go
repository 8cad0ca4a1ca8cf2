package server_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/contracttest"
	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/internal/testkit/testserver"
)

// Three replicas as separate hosts, as an operator runs them on three
// machines: each `pier server` in a network namespace of its own with its
// own address on a shared network (a bridge), its own --sandbox-network
// routed to it by the others, and the others named in --sandbox-peers;
// PostgreSQL reached over TCP and nginx on a fourth host. A process
// service launched through replica 1 runs in a sandbox on one host and is
// served through every replica's edge and through nginx at that sandbox's
// address: the host running it reaches it from inside its namespace, the
// others over the network, and a host that is not a peer is refused.
// Then the host running it dies (its replica SIGKILLed, its sandboxes with
// it): another replica adopts the service once its heartbeat is 20 s old
// and runs it in a sandbox of its own, and every remaining edge and nginx
// serve it again within 60 s, charged once.
func TestReplicasOnSeparateHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three servers on hosts of their own (network namespaces) behind nginx")
	}
	began := time.Now()
	n := newHostsNet(t)
	c := n.startCluster(began)
	c.serviceIsServedFromEveryHost()
	c.serviceMovesWhenItsHostDies()
	t.Logf("the whole run took %s", time.Since(began).Round(time.Millisecond))
}

// hostsNet is four network namespaces on a bridge, as four machines on
// one network: the three replicas' hosts and nginx's. The test's own
// namespace is on the bridge too (the database's host), and is no peer.
type hostsNet struct {
	t      *testing.T
	net    int // the second octet of 10.net.0.0/16, free on this machine
	bridge string
	ns     []string
	apps   []string
}

const replicaHosts = 3

// addr is host i's address: the replicas' are 0 to 2, nginx's 3.
func (n *hostsNet) addr(i int) string { return fmt.Sprintf("10.%d.0.%d", n.net, 11+i) }

// rootAddr is the test's own address on the bridge.
func (n *hostsNet) rootAddr() string { return fmt.Sprintf("10.%d.0.1", n.net) }

// sandboxes is replica i's --sandbox-network.
func (n *hostsNet) sandboxes(i int) netip.Prefix {
	return netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/20", n.net, 16*(i+1)))
}

func (n *hostsNet) nsPath(i int) string { return "/run/netns/" + n.ns[i] }

// hostsPrerequisites fails (PIER_TEST_SANDBOX=require, as in CI) or skips
// unless this machine can make network namespaces and sandboxes.
func hostsPrerequisites(t *testing.T) {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, bin := range []string{"ip", "nsenter", "runc", "nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	if len(missing) == 0 {
		return
	}
	if testserver.SandboxRequired() {
		t.Fatalf("PIER_TEST_SANDBOX=require: this machine lacks %s", strings.Join(missing, ", "))
	}
	t.Skipf("replicas on hosts of their own need %s (set PIER_TEST_SANDBOX=require to fail instead)", strings.Join(missing, ", "))
}

func (n *hostsNet) ip(args ...string) {
	n.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		n.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// newHostsNet makes the bridge and the four namespaces, each with its
// address, routes from each replica's host (and the test's) to the other
// replicas' sandbox networks, and removes them all when the test ends.
func newHostsNet(t *testing.T) *hostsNet {
	hostsPrerequisites(t)
	n := &hostsNet{t: t, net: freeSecondOctet(t)}
	tag := fmt.Sprintf("%05d", rand.IntN(100000))
	n.bridge = "phb" + tag
	t.Cleanup(func() {
		// Deleting the bridge's ends of the pairs takes the hosts' ends
		// with them at once; a namespace itself goes once the last of
		// its sockets closing towards a dead host times out.
		for i, ns := range n.ns {
			exec.Command("ip", "link", "del", fmt.Sprintf("phv%s%d", tag, i)).Run()
			exec.Command("ip", "netns", "del", ns).Run()
		}
		exec.Command("ip", "link", "del", n.bridge).Run()
	})
	n.ip("link", "add", n.bridge, "type", "bridge")
	n.ip("addr", "add", n.rootAddr()+"/24", "dev", n.bridge)
	n.ip("link", "set", n.bridge, "up")
	for i := range replicaHosts + 1 {
		ns, veth := fmt.Sprintf("pier-host%s-%d", tag, i), fmt.Sprintf("phv%s%d", tag, i)
		n.ip("netns", "add", ns)
		n.ns = append(n.ns, ns)
		n.ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
		n.ip("link", "set", veth, "master", n.bridge, "up")
		n.ip("-n", ns, "addr", "add", n.addr(i)+"/24", "dev", "eth0")
		n.ip("-n", ns, "link", "set", "eth0", "up")
		n.ip("-n", ns, "link", "set", "lo", "up")
	}
	// What an operator routes: every replica's sandbox network to its
	// host, on every other replica's host (and here, to show that a host
	// that is no peer is refused).
	for j := range replicaHosts {
		for i := range replicaHosts {
			if i != j {
				n.ip("-n", n.ns[i], "route", "add", n.sandboxes(j).String(), "via", n.addr(j))
			}
		}
		n.ip("route", "add", n.sandboxes(j).String(), "via", n.addr(j))
	}
	return n
}

// freeSecondOctet picks a 10.x.0.0/16 this machine neither routes nor
// holds an address in.
func freeSecondOctet(t *testing.T) int {
	routes, _ := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	addrs, _ := exec.Command("ip", "-4", "addr", "show").Output()
	used := string(routes) + "\n" + string(addrs)
	start := rand.IntN(40)
	for k := range 40 {
		x := 200 + (start+k)%40
		if x == 209 {
			continue // the default sandbox network
		}
		if !strings.Contains(used, fmt.Sprintf(" 10.%d.", x)) && !strings.Contains(used, fmt.Sprintf("\n10.%d.", x)) && !strings.HasPrefix(used, fmt.Sprintf("10.%d.", x)) {
			return x
		}
	}
	t.Fatal("no free 10.x.0.0/16 for the hosts' network")
	return 0
}

// pgRelay lets the hosts reach the test's PostgreSQL (a Unix socket
// only) over TCP at addr, as a database machine on their network, and
// answers the URL they use.
func pgRelay(t *testing.T, db, addr string) string {
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(u.Query().Get("host"), ".s.PGSQL.5432")
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("unix", socket)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { io.Copy(up, c); up.Close() }()
				io.Copy(c, up)
			}()
		}
	}()
	return fmt.Sprintf("postgres://postgres@%s%s?sslmode=disable", addr, u.Path)
}

// hostsCluster is the replicas on their hosts and nginx on its own, with
// the scale-out test's helpers (status, succeeded, chargedOnce) over them.
type hostsCluster struct {
	*scaleOutCluster
	n         *hostsNet
	serviceID string
	quoted    any
	runner    int // the replica whose host runs the service
}

// startCluster starts the database relay, three replicas (each in its
// namespace, entered with nsenter: `ip netns exec` would remount /sys and
// hide the cgroup hierarchy the sandboxes need) and nginx.
func (n *hostsNet) startCluster(began time.Time) *hostsCluster {
	t := n.t
	db := testpg.NewDatabase(t)
	hostsDB := pgRelay(t, db, n.rootAddr()+":5432")
	bin, err := pierBinary()
	if err != nil {
		t.Fatal(err)
	}
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	out, err := exec.Command(bin, "admin", "create-key", "--data-dir", dirs[0], "--database-url", db,
		"--scopes", "read,quote,launch", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var key struct{ APIKey string }
	json.Unmarshal(out, &key)
	c := &scaleOutCluster{t: t, db: db, h: http.Header{"Authorization": {"Bearer " + key.APIKey}}, web: &http.Client{Timeout: 2 * time.Second}}
	for i := range replicaHosts {
		apps, err := os.MkdirTemp("", "pier-apps-")
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(apps, 0o711)
		n.apps = append(n.apps, apps)
		var peers []string
		for j := range replicaHosts {
			if j != i {
				peers = append(peers, n.addr(j))
			}
		}
		args := serverArgs(dirs[i], []string{"--http-addr", n.addr(i) + ":8080", "--database-url", hostsDB,
			"--preview-domain", "localhost", "--apps-dir", apps,
			"--sandbox-network", n.sandboxes(i).String(), "--sandbox-peers", strings.Join(peers, ",")})
		p := startCommand(t, exec.Command("nsenter", append([]string{"--net=" + n.nsPath(i), bin}, args...)...))
		c.replicas = append(c.replicas, p)
		c.addrs = append(c.addrs, strings.TrimPrefix(p.url, "http://"))
	}
	t.Cleanup(n.stopReplicas(c.replicas))
	c.lb = testserver.NginxIn(t, n.nsPath(replicaHosts), n.addr(replicaHosts)+":8080", c.addrs...)
	t.Logf("three replicas on their hosts and nginx on a fourth up after %s", time.Since(began).Round(time.Millisecond))
	c.viaLB = &contracttest.Client{T: t, BaseURL: "http://" + c.lb}
	c.project = c.api(0).Do("GET", "/v1/projects", nil, c.h).JSON()["data"].(map[string]any)["projects"].([]any)[0].(map[string]any)["id"].(string)
	c.everyReplica = []scaleOutTarget{{"replica 1", c.addrs[0]}, {"replica 2", c.addrs[1]}, {"replica 3", c.addrs[2]}, {"nginx", c.lb}}
	return &hostsCluster{scaleOutCluster: c, n: n}
}

// stopReplicas stops the replicas still running as an operator would
// (SIGTERM: each stops the versions it runs), then ends what a killed
// replica's host left: its runc containers, their mounts and their
// slots' network namespaces.
func (n *hostsNet) stopReplicas(replicas []*process) func() {
	return func() {
		began := time.Now()
		defer func() { n.t.Logf("replicas stopped in %s", time.Since(began).Round(time.Millisecond)) }()
		for _, p := range replicas {
			if p.cmd.ProcessState == nil {
				p.cmd.Process.Signal(syscall.SIGTERM)
			}
		}
		for _, p := range replicas {
			if p.cmd.ProcessState == nil {
				done := make(chan struct{})
				go func() { p.cmd.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(20 * time.Second):
					p.cmd.Process.Kill()
				}
			}
		}
		for _, apps := range n.apps {
			endContainers(apps)
			if b, err := os.ReadFile("/proc/self/mounts"); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], apps+"/") {
						syscall.Unmount(f[1], syscall.MNT_DETACH)
					}
				}
			}
			os.RemoveAll(apps)
		}
		for _, p := range replicas {
			freeSlotsOf(p.cmd.Process.Pid)
		}
	}
}

// freeSlotsOf removes the network namespaces of the host-wide sandbox
// slots a dead replica (process pid) still names, holding each slot's
// lock meanwhile, as the next supervisor to take the slot would.
func freeSlotsOf(pid int) {
	files, _ := filepath.Glob("/run/pier-sandbox/slot-*")
	for _, path := range files {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			if b, _ := io.ReadAll(f); strings.HasSuffix(strings.TrimSpace(string(b)), fmt.Sprintf(" pid %d", pid)) {
				exec.Command("ip", "netns", "del", "pier-s"+strings.TrimPrefix(filepath.Base(path), "slot-")).Run()
				f.Truncate(0)
			}
		}
		f.Close()
	}
}

// endContainers kills and removes the runc containers of the supervisor
// whose apps directory is apps, as the machine they ran on going away
// would end them.
func endContainers(apps string) {
	state := filepath.Join(apps, ".runc")
	out, _ := exec.Command("runc", "--root", state, "list", "-q").Output()
	for _, id := range strings.Fields(string(out)) {
		exec.Command("runc", "--root", state, "kill", "--all", id, "KILL").Run()
		exec.Command("runc", "--root", state, "delete", "--force", id).Run()
	}
}

// roamApp answers every GET with the address its request came from: the
// host that runs it reaches it from inside its namespace (127.0.0.1),
// another host over the network (that host's own address). It ends on
// SIGTERM, which as its PID namespace's first process it would otherwise
// ignore.
const roamApp = `import http.server, os, signal
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = ("roam from " + self.client_address[0] + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
`

// upstream is the service's stored upstream and the replica whose
// sandbox network holds it (-1 for none).
func (c *hostsCluster) upstream(serviceID string) (string, int) {
	sqlDB, err := sql.Open("pgx", c.db)
	if err != nil {
		c.t.Fatal(err)
	}
	defer sqlDB.Close()
	var up sql.NullString
	if err := sqlDB.QueryRow(`SELECT upstream FROM services WHERE id = $1`, serviceID).Scan(&up); err != nil {
		c.t.Fatal(err)
	}
	ap, err := netip.ParseAddrPort(up.String)
	if err != nil {
		return up.String, -1
	}
	for i := range replicaHosts {
		if c.n.sandboxes(i).Contains(ap.Addr()) {
			return up.String, i
		}
	}
	return up.String, -1
}

// body is what GET / for host at addr answers, or "" unless 200.
func (c *hostsCluster) body(addr, host string) string {
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Host = host
	res, err := c.web.Do(req)
	if err != nil {
		return ""
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// servedBy wants every replica in live to serve host from the version at
// runner's sandbox: through runner's own edge from inside its namespace,
// through every other's from that host's address; and nginx to serve it.
// It polls until each has, for at most d from since, and answers when the
// last did.
func (c *hostsCluster) servedBy(what, host string, runner int, live []int, since time.Time, d time.Duration) time.Duration {
	c.t.Helper()
	want := map[string]string{"nginx": ""}
	addrs := map[string]string{"nginx": c.lb}
	for _, i := range live {
		name := fmt.Sprintf("replica %d", i+1)
		addrs[name], want[name] = c.addrs[i], "roam from "+c.n.addr(i)
		if i == runner {
			want[name] = "roam from 127.0.0.1"
		}
	}
	took := map[string]time.Duration{}
	last := map[string]string{}
	for len(took) < len(want) && time.Since(since) < d {
		for name, w := range want {
			if _, done := took[name]; done {
				continue
			}
			got := c.body(addrs[name], host)
			last[name] = got
			if got != "" && (got == w || w == "" && strings.HasPrefix(got, "roam from ")) {
				took[name] = time.Since(since)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(took) < len(want) {
		c.t.Fatalf("%s: after %s not every target served the service from replica %d's host: took %v, last answers %q", what, d, runner+1, took, last)
	}
	c.t.Logf("%s: %v", what, took)
	var most time.Duration
	for _, v := range took {
		most = max(most, v)
	}
	return most
}

// serviceIsServedFromEveryHost launches the service through replica 1,
// wants its upstream to be a sandbox address of the host whose replica
// runs it, served through every edge and nginx, and refused to the test's
// own host, which is no peer.
func (c *hostsCluster) serviceIsServedFromEveryHost() {
	t := c.t
	t.Helper()
	api := c.api(0)
	q := api.Do("POST", "/v1/quotes", map[string]any{"projectId": c.project, "items": []any{
		map[string]any{"kind": "service", "workload": "dynamic_service", "target": "process", "name": "roam", "months": 1}}}, c.h)
	if q.StatusCode != 201 {
		t.Fatalf("quote: %d %s", q.StatusCode, q.Body)
	}
	c.quoted = q.JSON()["data"].(map[string]any)["amountUsd"]
	b := api.Do("POST", "/v1/bundles", uploadBody(c.project, map[string]string{"Procfile": "web: python3 app.py\n", "app.py": roamApp}), c.h)
	if b.StatusCode != 201 {
		t.Fatalf("upload: %d %s", b.StatusCode, b.Body)
	}
	r := api.Do("POST", "/v1/projects/"+c.project+"/launch", map[string]any{"name": "roam", "target": "process",
		"bundleId": b.JSON()["data"].(map[string]any)["bundleId"], "quoteId": q.JSON()["data"].(map[string]any)["quoteId"]}, c.h)
	if r.StatusCode != 202 {
		t.Fatalf("launch: %d %s", r.StatusCode, r.Body)
	}
	launch := r.JSON()["data"].(map[string]any)
	c.serviceID = launch["serviceId"].(string)
	done := c.succeeded(api, launch["taskId"].(string), 60*time.Second)
	up, runner := c.upstream(c.serviceID)
	if runner < 0 {
		t.Fatalf("the service's upstream %q is no sandbox address of a replica's host", up)
	}
	c.runner = runner
	t.Logf("replica %d runs the service at %s", runner+1, up)
	c.servedBy("launched through replica 1", c.hostFor("roam"), runner, []int{0, 1, 2}, done, 5*time.Second)
	if conn, err := net.DialTimeout("tcp", up, time.Second); err == nil {
		conn.Close()
		t.Fatalf("the test's host, no peer of replica %d, reached the sandbox at %s", runner+1, up)
	}
}

// serviceMovesWhenItsHostDies kills the replica running the service and
// its sandboxes, as the loss of its machine would, and wants another
// replica to run the service in its own sandbox, served by the remaining
// edges and nginx within 60 s, with one charge.
func (c *hostsCluster) serviceMovesWhenItsHostDies() {
	t := c.t
	t.Helper()
	victim := c.runner
	c.replicas[victim].kill(t)
	killed := time.Now()
	left, _ := exec.Command("runc", "--root", filepath.Join(c.n.apps[victim], ".runc"), "list").Output()
	t.Logf("what the killed replica left running:\n%s", left)
	endContainers(c.n.apps[victim])
	var live []int
	for i := range replicaHosts {
		if i != victim {
			live = append(live, i)
		}
	}
	var up string
	runner := -1
	for deadline := killed.Add(60 * time.Second); runner < 0 || runner == victim; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("60 s after replica %d's host died the service's upstream is still %s", victim+1, up)
		}
		up, runner = c.upstream(c.serviceID)
	}
	t.Logf("replica %d's host died; replica %d runs the service at %s %s later", victim+1, runner+1, up, time.Since(killed).Round(time.Millisecond))
	took := c.servedBy("after the host died", c.hostFor("roam"), runner, live, killed, 60*time.Second)
	t.Logf("the service answered through every remaining edge and nginx %s after the kill", took.Round(time.Millisecond))
	c.chargedOnce(c.api(live[0]), c.quoted)
}
