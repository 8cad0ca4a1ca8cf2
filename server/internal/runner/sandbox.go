package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// The sandbox runs each version in an OCI container executed by runc: its
// own mount, PID, IPC, UTS and network namespaces; a read-only root made
// of the host's /usr and /etc; a private /tmp and /dev/shm; only its own
// directory writable, on a tmpfs of a fixed size; cgroup limits on memory
// (the whole tree), pids and CPU set by runc before the command's first
// instruction; a user id of its own taken from a table of slots; and a veth
// pair to the host, behind nftables rules that let it reach neither the
// host, nor another version, nor a private or link-local address.
//
// A slot is one running version's claim on the host: a user id
// (UIDBase+n), a /30 of the sandbox network (the host's end .1, the
// version's .2), a network namespace pier-s<n>, a host interface pvh<n> and
// a cgroup pier/s<n>. Slots are files under SlotDir held with flock, so
// every Pier process on the host draws from one table and a slot whose
// holder died is free again, and is cleaned before it is reused.

// SandboxError says why versions cannot be sandboxed here, naming what is
// missing.
type SandboxError struct {
	Missing []string
}

func (e *SandboxError) Error() string {
	return "no sandbox for services on this host: " + strings.Join(e.Missing, "; ")
}

// ErrNoSandbox is what Start answers (as a *SandboxError) when versions
// cannot be sandboxed and unsandboxed runs are not allowed.
var ErrNoSandbox = errors.New("runner: no sandbox")

func (e *SandboxError) Is(target error) bool { return target == ErrNoSandbox }

// DefaultNetwork is the prefix sandboxes' addresses come from.
var DefaultNetwork = netip.MustParsePrefix("10.209.0.0/16")

// AppPort is the port a process version listens on in its own namespace.
const AppPort = 8080

// sandbox is the runc-backed isolation of one Supervisor.
type sandbox struct {
	runc    string // the runc binary
	state   string // runc --root: this supervisor's containers
	rootfs  string // the read-only skeleton every container's root is
	network netip.Prefix
	uidBase int
	slots   *slotTable
	memsw   bool // the memory cgroup can bound memory+swap
	egress  bool // forwarding and NAT to the public network work
	detail  string
}

// probeSandbox sets up what sandboxes need on this host, or says what is
// missing. Nothing is half set up: a failure leaves no firewall table.
func probeSandbox(cfg Config) (*sandbox, error) {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "Pier runs as root (namespaces, cgroups and the firewall need it)")
	}
	runc := cfg.Runc
	if runc == "" {
		runc = "runc"
	}
	runcPath, err := exec.LookPath(runc)
	if err != nil {
		missing = append(missing, "runc (Debian: apt-get install runc)")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		missing = append(missing, "nft (Debian: apt-get install nftables)")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		missing = append(missing, "nsenter (Debian: apt-get install util-linux)")
	}
	v2 := fileExists("/sys/fs/cgroup/cgroup.controllers")
	if !v2 {
		for _, c := range []string{"memory", "pids", "cpu"} {
			if !fileExists(filepath.Join("/sys/fs/cgroup", c)) {
				missing = append(missing, "the cgroup v1 "+c+" controller at /sys/fs/cgroup/"+c)
			}
		}
	} else if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		for _, c := range []string{"memory", "pids", "cpu"} {
			if !slices.Contains(strings.Fields(string(b)), c) {
				missing = append(missing, "the cgroup v2 "+c+" controller")
			}
		}
	}
	if !fileExists("/proc/self/ns/net") || !fileExists("/proc/self/ns/pid") {
		missing = append(missing, "network and PID namespaces")
	}
	if len(missing) > 0 {
		return nil, &SandboxError{Missing: missing}
	}
	sb := &sandbox{
		runc:    runcPath,
		state:   filepath.Join(cfg.Dir, ".runc"),
		rootfs:  filepath.Join(cfg.Dir, ".rootfs"),
		network: cfg.Network,
		uidBase: cfg.UIDBase,
		memsw:   v2 || fileExists("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"),
	}
	if err := os.MkdirAll(sb.state, 0o700); err != nil {
		return nil, &SandboxError{Missing: []string{"a runc state directory: " + err.Error()}}
	}
	if err := makeRootfs(sb.rootfs); err != nil {
		return nil, &SandboxError{Missing: []string{"the container root skeleton: " + err.Error()}}
	}
	n := 1 << (32 - cfg.Network.Bits()) / 4
	if n > cfg.UIDRange {
		n = cfg.UIDRange
	}
	if n < 1 {
		return nil, &SandboxError{Missing: []string{"a sandbox network of /30 or larger (--sandbox-network)"}}
	}
	slots, err := newSlotTable(cfg.SlotDir, n)
	if err != nil {
		return nil, &SandboxError{Missing: []string{"the slot table at " + cfg.SlotDir + ": " + err.Error()}}
	}
	sb.slots = slots
	egress, err := setupFirewall(cfg.SlotDir, cfg.Network, cfg.Peers)
	if err != nil {
		return nil, &SandboxError{Missing: []string{"the sandbox firewall (nftables): " + err.Error()}}
	}
	sb.egress = egress
	sb.detail = fmt.Sprintf("runc containers (%s): namespaces mnt, pid, ipc, uts, net; cgroup %s limits; read-only root; user from a slot table; network %s", runcVersion(runcPath), map[bool]string{true: "v2", false: "v1"}[v2], cfg.Network)
	if !egress {
		sb.detail += "; no outbound network (forwarding or NAT unavailable)"
	}
	sb.cleanLeftovers(cfg.Dir)
	return sb, nil
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func runcVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "runc"
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(first)
}

// makeRootfs makes the container root: empty mount points and the
// merged-/usr links, owned by root and writable by nobody else.
func makeRootfs(dir string) error {
	for _, d := range []string{"", "usr", "etc", "proc", "dev", "sys", "tmp", "app", "run"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	for _, l := range [][2]string{{"bin", "usr/bin"}, {"sbin", "usr/sbin"}, {"lib", "usr/lib"}, {"lib64", "usr/lib64"}, {"lib32", "usr/lib32"}} {
		p := filepath.Join(dir, l[0])
		if target, err := os.Readlink(p); err == nil && target == l[1] {
			continue
		}
		os.RemoveAll(p)
		if err := os.Symlink(l[1], p); err != nil {
			return err
		}
	}
	return os.Chmod(dir, 0o755)
}

// slot is one running version's claim: see the package comment above.
type slot struct {
	n    int
	file *os.File
}

func (sb *sandbox) uid(s slot) int { return sb.uidBase + s.n }

// addrs are the host's and the version's addresses of slot s.
func (sb *sandbox) addrs(s slot) (host, guest netip.Addr) {
	v := ipv4Uint(sb.network.Masked().Addr()) + uint32(s.n)*4 + 1
	h := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	return h, h.Next()
}

// ipv4Uint is an IPv4 address as a number.
func ipv4Uint(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func netnsName(s slot) string  { return fmt.Sprintf("pier-s%d", s.n) }
func hostIface(s slot) string  { return fmt.Sprintf("pvh%d", s.n) }
func cgroupPath(s slot) string { return fmt.Sprintf("/pier/s%d", s.n) }
func containerID(s slot) string {
	return fmt.Sprintf("pier-s%d", s.n)
}

// slotTable allocates slots from files under dir held with flock: a lock
// is released by the kernel when its holder dies, so the table never keeps
// a dead process's claim.
type slotTable struct {
	dir  string
	size int

	mu   sync.Mutex
	next int
	held map[int]bool
}

func newSlotTable(dir string, size int) (*slotTable, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &slotTable{dir: dir, size: size, held: map[int]bool{}}, nil
}

func (t *slotTable) path(n int) string { return filepath.Join(t.dir, fmt.Sprintf("slot-%d", n)) }

// tryLock takes slot n's lock if no process holds it.
func (t *slotTable) tryLock(n int) (*os.File, bool) {
	f, err := os.OpenFile(t.path(n), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
}

// acquire takes a free slot and writes owner into it.
func (t *slotTable) acquire(owner string) (slot, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := 0; i < t.size; i++ {
		n := (t.next + i) % t.size
		if t.held[n] {
			continue
		}
		f, ok := t.tryLock(n)
		if !ok {
			continue
		}
		f.Truncate(0)
		f.WriteAt([]byte(owner+"\n"), 0)
		t.held[n] = true
		t.next = n + 1
		return slot{n: n, file: f}, nil
	}
	return slot{}, fmt.Errorf("runner: all %d sandbox slots are taken", t.size)
}

func (t *slotTable) release(s slot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s.file != nil {
		s.file.Truncate(0)
		s.file.Close() // closing the last descriptor drops the lock
	}
	delete(t.held, s.n)
}

// cleanLeftovers ends what crashed Piers left: this supervisor's runc
// containers, the versions' directories still mounted under dir, and on
// every slot no process holds, the processes still in its cgroup, its
// network namespace and interface.
func (sb *sandbox) cleanLeftovers(dir string) {
	if b, err := os.ReadFile("/proc/self/mounts"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
				unmountAppDir(f[1])
			}
		}
	}
	out, _ := exec.Command(sb.runc, "--root", sb.state, "list", "-q").Output()
	for _, id := range strings.Fields(string(out)) {
		exec.Command(sb.runc, "--root", sb.state, "kill", "--all", id, "KILL").Run()
		exec.Command(sb.runc, "--root", sb.state, "delete", "--force", id).Run()
	}
	entries, _ := os.ReadDir(sb.slots.dir)
	for _, e := range entries {
		n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "slot-"))
		if err != nil || !strings.HasPrefix(e.Name(), "slot-") || n >= sb.slots.size {
			continue
		}
		sb.slots.mu.Lock()
		held := sb.slots.held[n]
		sb.slots.mu.Unlock()
		if held {
			continue
		}
		if f, ok := sb.slots.tryLock(n); ok {
			sb.cleanSlot(slot{n: n})
			f.Close()
		}
	}
}

// cleanSlot kills every process in slot s's cgroup and removes the cgroup,
// its network namespace and interface. It is safe on a clean slot.
func (sb *sandbox) cleanSlot(s slot) {
	killCgroup(cgroupPath(s))
	netDown(s)
}

// killCgroup SIGKILLs every process in a cgroup (on every v1 hierarchy
// that has it) until none is left, then removes it.
func killCgroup(path string) {
	dirs := cgroupDirs(path)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		alive := 0
		for _, d := range dirs {
			b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
					syscall.Kill(pid, syscall.SIGKILL)
					alive++
				}
			}
		}
		if alive == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, d := range dirs {
		os.Remove(d)
	}
}

func cgroupDirs(path string) []string {
	if fileExists("/sys/fs/cgroup/cgroup.controllers") {
		return []string{filepath.Join("/sys/fs/cgroup", path)}
	}
	var dirs []string
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		d := filepath.Join("/sys/fs/cgroup", e.Name(), path)
		if fileExists(d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// spec is the OCI runtime spec of one version's container.
func (sb *sandbox) spec(s slot, p *proc) *specs.Spec {
	l := p.s.cfg.Limits
	uid := uint32(sb.uid(s))
	noSuid := []string{"nosuid", "nodev"}
	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", fmt.Sprintf("size=%d", l.TmpBytes)}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		{Destination: "/usr", Type: "bind", Source: "/usr", Options: append([]string{"rbind", "ro"}, noSuid...)},
		{Destination: "/etc", Type: "bind", Source: "/etc", Options: append([]string{"rbind", "ro"}, noSuid...)},
		{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", fmt.Sprintf("size=%d", l.TmpBytes)}},
		{Destination: "/run", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "noexec", "mode=755", "size=1m"}},
		{Destination: "/app", Type: "bind", Source: p.dir, Options: append([]string{"rbind", "rw"}, noSuid...)},
	}
	var rlimits []specs.POSIXRlimit
	if l.OpenFiles > 0 {
		rlimits = append(rlimits, specs.POSIXRlimit{Type: "RLIMIT_NOFILE", Hard: uint64(l.OpenFiles), Soft: uint64(l.OpenFiles)})
	}
	if l.CPUSeconds > 0 {
		rlimits = append(rlimits, specs.POSIXRlimit{Type: "RLIMIT_CPU", Hard: uint64(l.CPUSeconds), Soft: uint64(l.CPUSeconds)})
	}
	mem := l.MemoryBytes
	res := &specs.LinuxResources{
		Memory:  &specs.LinuxMemory{Limit: &mem},
		Pids:    &specs.LinuxPids{Limit: l.Processes},
		Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
	}
	if sb.memsw {
		swap := mem
		res.Memory.Swap = &swap
	}
	if l.CPUMillis > 0 {
		period := uint64(100_000)
		quota := l.CPUMillis * 100
		res.CPU = &specs.LinuxCPU{Period: &period, Quota: &quota}
	}
	return &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			User:            specs.User{UID: uid, GID: uid},
			Args:            []string{"/bin/sh", "-c", shellCommand(p.spec.Command)},
			Env:             p.env(),
			Cwd:             "/app",
			Capabilities:    &specs.LinuxCapabilities{},
			Rlimits:         rlimits,
			NoNewPrivileges: true,
		},
		Root:     &specs.Root{Path: sb.rootfs, Readonly: true},
		Hostname: "app",
		Mounts:   mounts,
		Linux: &specs.Linux{
			Resources:   res,
			CgroupsPath: cgroupPath(s),
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace},
				{Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.MountNamespace},
				{Type: specs.NetworkNamespace, Path: "/run/netns/" + netnsName(s)},
			},
			MaskedPaths: []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
				"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"},
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
}

// writeBundle writes the container's config.json into dir.
func writeBundle(dir string, sp *specs.Spec) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(sp)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600)
}

// mountAppDir puts a tmpfs of the version's disk size on dir, owned by
// uid, so its own directory is the only place it writes and it cannot
// write more than its size.
func mountAppDir(dir string, uid int, size int64) error {
	data := fmt.Sprintf("size=%d,mode=0700,uid=%d,gid=%d", size, uid, uid)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		return fmt.Errorf("runner: mounting the version's directory: %w", err)
	}
	return nil
}

func unmountAppDir(dir string) {
	for i := 0; i < 3; i++ {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			return
		}
	}
}

// runcCmd is a runc command on this supervisor's state.
func (sb *sandbox) runcCmd(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, sb.runc, append([]string{"--root", sb.state}, args...)...)
}

// killAll SIGKILLs every process of slot s's container and removes it.
func (sb *sandbox) killAll(s slot) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sb.runcCmd(ctx, "kill", "--all", containerID(s), "KILL").Run()
	sb.runcCmd(ctx, "delete", "--force", containerID(s)).Run()
	killCgroup(cgroupPath(s))
}
