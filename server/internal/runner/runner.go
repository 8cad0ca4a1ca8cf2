// Package runner runs the process and worker versions of services on this
// machine: the local supervisor. It starts each version in a sandbox of
// its own (an OCI container executed by runc, see sandbox.go) holding the
// bundle's files, with a clean environment, PORT and limits; waits until
// it is healthy; captures its output line by line; restarts it with
// exponential backoff when it exits; gives up on a crash loop; and stops
// it gracefully, ending every process it started.
//
// Without a sandbox (no runc, not root, no cgroups) versions do not start,
// unless the operator allowed unsandboxed runs for local development.
//
// The domain drives it through service.Runtime (server/runtime.go adapts
// it); the supervisor is the implementation for one machine.
// docs/architecture.md says how a Kubernetes or Nomad runner would
// implement the same interface.
package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Spec is one version of a service to run.
type Spec struct {
	ServiceID string
	Version   int
	// Worker is true for a worker (no HTTP): healthy once it stayed up
	// Grace. A process is healthy once GET HealthPath answers below 500.
	Worker  bool
	Command string
	// Env is the service's variables; PORT, HOME and PATH are added.
	Env map[string]string
	// Materialize writes the version's files into dir.
	Materialize func(ctx context.Context, dir string) error
	HealthPath  string
	// HealthTimeout bounds the wait for the first healthy answer; Grace is
	// how long a worker must stay up.
	HealthTimeout, Grace time.Duration
	// NoEgress keeps a sandboxed version off the public network (its
	// project's policy); by default it may reach it.
	NoEgress bool
	// HostServices are services of the host the version may reach.
	HostServices []HostService
}

// Instance is a started, healthy version.
type Instance struct {
	// Addr is host:port where a process answers HTTP; empty for a worker.
	// A sandboxed version answers on its own address.
	Addr string
	Dir  string
	UID  int
	// Sandboxed is false only for a version run as a bare process, which
	// the operator allowed for local development.
	Sandboxed bool
}

// Health is what the supervisor knows of a running version.
type Health struct {
	State    string // healthy, starting, crashed, stopped
	Restarts int
	Detail   string
	At       time.Time
}

// Events is what the supervisor reports: every output line, and a
// version's health when it changes (a restart, a crash loop).
type Events interface {
	Log(serviceID string, version int, stream, text string, at time.Time)
	Health(serviceID string, version int, h Health)
}

// Limits bound one version. Zero means the default.
type Limits struct {
	// MemoryBytes bounds the memory of all the version's processes
	// together (its cgroup; memory and swap where the host can).
	MemoryBytes int64
	CPUSeconds  int64 // CPU time of each process (RLIMIT_CPU)
	CPUMillis   int64 // CPU bandwidth: 1000 is one CPU
	OpenFiles   int64
	Processes   int64 // processes and threads together (pids.max)
	DiskBytes   int64 // the version's own directory, the bundle's files included
	TmpBytes    int64 // each of its /tmp and /dev/shm
}

// DefaultLimits are the limits a version runs under.
var DefaultLimits = Limits{MemoryBytes: 2 << 30, CPUSeconds: 24 * 3600, CPUMillis: 1000, OpenFiles: 1024, Processes: 256,
	DiskBytes: 1 << 30, TmpBytes: 64 << 20}

// withDefaults fills l's zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	for _, f := range []struct{ v, def *int64 }{{&l.MemoryBytes, &d.MemoryBytes}, {&l.CPUSeconds, &d.CPUSeconds},
		{&l.CPUMillis, &d.CPUMillis}, {&l.OpenFiles, &d.OpenFiles}, {&l.Processes, &d.Processes},
		{&l.DiskBytes, &d.DiskBytes}, {&l.TmpBytes, &d.TmpBytes}} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return l
}

// Config configures a Supervisor.
type Config struct {
	// Dir holds each version's working directory. It must not be inside
	// the data directory, which the versions must not read.
	Dir    string
	Events Events
	Limits Limits
	// RestartBase is the first restart's delay, doubling up to RestartMax.
	RestartBase, RestartMax time.Duration
	// CrashLoop: CrashRestarts restarts within CrashWindow stop the version
	// as crashed.
	CrashRestarts int
	CrashWindow   time.Duration
	// StopGrace is how long a version has between SIGTERM and SIGKILL.
	StopGrace time.Duration
	// UIDBase is the first of the user ids versions run as when Pier runs
	// as root; each running version holds one of UIDRange ids after it,
	// from the slot table.
	UIDBase, UIDRange int
	Now               func() time.Time

	// AllowUnsandboxed lets versions run as bare processes when no
	// sandbox can be set up here: for local development only.
	AllowUnsandboxed bool
	// Runc is the runc binary (default: runc on the PATH).
	Runc string
	// Network is the prefix sandboxes' addresses come from (default
	// DefaultNetwork); each version takes a /30 of it.
	Network netip.Prefix
	// SlotDir holds the host's slot table, shared by every Pier process
	// on the host (default /run/pier-sandbox).
	SlotDir string
	// Peers are the prefixes (other replicas' hosts) allowed to connect
	// to a sandbox's app port, so that their edges reach the versions
	// this host runs at their sandbox addresses. Nothing else reaches into
	// a sandbox.
	Peers []netip.Prefix
}

// Errors Start answers with.
var (
	// ErrUnhealthy: the version did not become healthy in time, or exited
	// first. The error's text carries the last lines it wrote.
	ErrUnhealthy = errors.New("runner: version did not become healthy")
)

// UnhealthyError carries why a version failed its health check and the
// last lines it wrote.
type UnhealthyError struct {
	Reason string
	Tail   []string
}

func (e *UnhealthyError) Error() string {
	msg := e.Reason
	if len(e.Tail) > 0 {
		msg += "; last lines:\n" + strings.Join(e.Tail, "\n")
	}
	return msg
}

func (e *UnhealthyError) Is(target error) bool { return target == ErrUnhealthy }

// Supervisor runs versions as local processes.
type Supervisor struct {
	cfg     Config
	sb      *sandbox  // nil when versions cannot be sandboxed here
	sbErr   error     // why not
	cgroups *cgroupV2 // unsandboxed runs: nil when cgroups v2 cannot be used here
	root    bool

	mu      sync.Mutex
	running map[key]*proc
	closed  bool

	spawn chan spawnReq
}

type key struct {
	service string
	version int
}

// New returns a Supervisor. The working directories' root is made (0711,
// so versions can reach their own directory and list nothing).
func New(cfg Config) (*Supervisor, error) {
	if cfg.Dir == "" {
		return nil, errors.New("runner: no directory for versions")
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if !cfg.Network.IsValid() {
		cfg.Network = DefaultNetwork
	}
	if cfg.SlotDir == "" {
		cfg.SlotDir = "/run/pier-sandbox"
	}
	if cfg.RestartBase <= 0 {
		cfg.RestartBase = time.Second
	}
	if cfg.RestartMax <= 0 {
		cfg.RestartMax = 30 * time.Second
	}
	if cfg.CrashRestarts <= 0 {
		cfg.CrashRestarts = 5
	}
	if cfg.CrashWindow <= 0 {
		cfg.CrashWindow = 2 * time.Minute
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 10 * time.Second
	}
	if cfg.UIDBase <= 0 {
		cfg.UIDBase = 200_000
	}
	if cfg.UIDRange <= 0 {
		cfg.UIDRange = 60_000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := os.MkdirAll(cfg.Dir, 0o711); err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	fi, err := os.Lstat(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("runner: %s is not a directory", cfg.Dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return nil, fmt.Errorf("runner: %s belongs to another user", cfg.Dir)
	}
	if err := os.Chmod(cfg.Dir, 0o711); err != nil {
		return nil, err
	}
	s := &Supervisor{cfg: cfg, running: map[key]*proc{}, root: os.Geteuid() == 0, spawn: make(chan spawnReq)}
	s.killLeftovers()
	s.sb, s.sbErr = probeSandbox(cfg)
	if s.sb == nil && cfg.AllowUnsandboxed && s.root {
		s.cgroups = detectCgroupV2("/sys/fs/cgroup")
	}
	go s.spawner()
	return s, nil
}

// Isolation says how versions are confined here, for the log and docs, and
// why they cannot start when they cannot.
func (s *Supervisor) Isolation() (string, error) {
	if s.sb != nil {
		return s.sb.detail, nil
	}
	if !s.cfg.AllowUnsandboxed {
		return "none", s.sbErr
	}
	parts := []string{"UNSANDBOXED (--unsandboxed-services): bare processes with rlimits"}
	if s.cgroups != nil {
		parts = []string{"UNSANDBOXED (--unsandboxed-services): bare processes in cgroups v2"}
	}
	return strings.Join(parts, ", ") + "; " + s.sbErr.Error(), nil
}

// Sandboxed reports whether versions run in sandboxes here.
func (s *Supervisor) Sandboxed() bool { return s.sb != nil }

// Limits are the limits every version runs under here.
func (s *Supervisor) Limits() Limits { return s.cfg.Limits }

// Running reports whether a version runs here.
func (s *Supervisor) Running(serviceID string, version int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.running[key{serviceID, version}]
	return ok
}

// Start runs spec and returns once it is healthy. A version already
// running here is left as it is and its instance returned.
func (s *Supervisor) Start(ctx context.Context, spec Spec) (Instance, error) {
	k := key{spec.ServiceID, spec.Version}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Instance{}, errors.New("runner: shutting down")
	}
	if p, ok := s.running[k]; ok {
		s.mu.Unlock()
		return p.waitHealthy(ctx)
	}
	p := &proc{s: s, spec: spec, healthy: make(chan struct{}), done: make(chan struct{}), tail: newRing(30)}
	s.running[k] = p
	s.mu.Unlock()

	if err := p.prepare(ctx); err != nil {
		// Nothing runs: release what prepare took.
		close(p.done)
		s.mu.Lock()
		delete(s.running, k)
		s.mu.Unlock()
		p.cleanup()
		return Instance{}, err
	}
	go p.supervise()
	inst, err := p.waitHealthy(ctx)
	if err != nil {
		s.Stop(context.WithoutCancel(ctx), spec.ServiceID, spec.Version)
		return Instance{}, err
	}
	return inst, nil
}

// Stop stops a version: SIGTERM to its process group, StopGrace, then
// SIGKILL; then its directory goes. Stopping what does not run is a no-op.
func (s *Supervisor) Stop(ctx context.Context, serviceID string, version int) error {
	s.mu.Lock()
	p, ok := s.running[key{serviceID, version}]
	s.mu.Unlock()
	if !ok {
		// Files of a version that no longer runs (after a crash of Pier).
		os.RemoveAll(filepath.Join(s.cfg.Dir, serviceID, fmt.Sprintf("v%d", version)))
		return nil
	}
	p.stop()
	select {
	case <-p.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	if s.running[key{serviceID, version}] == p {
		delete(s.running, key{serviceID, version})
	}
	s.mu.Unlock()
	p.cleanup()
	return nil
}

// cleanup removes what a version held once it no longer runs: every
// process left in its sandbox, its network, its files and its slot.
func (p *proc) cleanup() {
	s := p.s
	for _, f := range p.forwarders {
		f.close()
	}
	if p.sandboxed {
		s.sb.killAll(p.slot)
		if p.spec.NoEgress {
			_, guest := s.sb.addrs(p.slot)
			nftElement(false, "no_egress", guest.String())
		}
		disown(s.sb, p.slot)
		netDown(p.slot)
		unmountAppDir(p.dir)
		os.RemoveAll(p.bundleDir())
	}
	if p.dir != "" {
		os.RemoveAll(p.dir)
		os.Remove(p.pgidFile())
		if entries, err := os.ReadDir(filepath.Dir(p.dir)); err == nil && len(entries) == 0 {
			os.Remove(filepath.Dir(p.dir))
		}
	}
	if p.sandboxed {
		s.sb.slots.release(p.slot)
	}
	if s.cgroups != nil {
		s.cgroups.remove(p.spec.ServiceID, p.spec.Version)
	}
}

// Shutdown stops every version, as Pier stops; they start again when it
// starts.
func (s *Supervisor) Shutdown(ctx context.Context) {
	s.mu.Lock()
	s.closed = true
	var all []key
	for k := range s.running {
		all = append(all, k)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, k := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Stop(ctx, k.service, k.version)
		}()
	}
	wg.Wait()
	// The directory goes when nothing is left in it.
	entries, _ := os.ReadDir(s.cfg.Dir)
	for _, e := range entries {
		os.Remove(filepath.Join(s.cfg.Dir, e.Name())) // an empty service directory
	}
	os.Remove(s.cfg.Dir)
}

// spawnReq asks the spawner goroutine to start a command.
type spawnReq struct {
	cmd *exec.Cmd
	err chan error
}

// spawner starts every process from one OS thread that never exits, so
// that Pdeathsig (which fires when the thread that forked exits) kills the
// versions when Pier dies, and only then.
func (s *Supervisor) spawner() {
	runtime.LockOSThread()
	for r := range s.spawn {
		r.err <- r.cmd.Start()
	}
}

// start starts cmd from the spawner's thread, with pipes for its output.
func (s *Supervisor) start(cmd *exec.Cmd) (stdout, stderr io.ReadCloser, err error) {
	if stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, nil, err
	}
	if stderr, err = cmd.StderrPipe(); err != nil {
		return nil, nil, err
	}
	req := spawnReq{cmd: cmd, err: make(chan error, 1)}
	s.spawn <- req
	return stdout, stderr, <-req.err
}

// proc is one version under supervision.
type proc struct {
	s    *Supervisor
	spec Spec
	dir  string
	port int
	uid  int
	// sandboxed versions hold a slot: their user, address and namespace.
	sandboxed bool
	slot      slot
	// forwarders relay to the host services the version reaches; hostEnv
	// tells it where.
	forwarders []*forwarder
	hostEnv    map[string]string

	mu       sync.Mutex
	cmd      *exec.Cmd
	stopping bool
	restarts int
	crashes  []time.Time
	exited   chan struct{} // closed when the current process exits
	health   Health

	healthy chan struct{} // closed once healthy the first time
	failed  error         // set before done closes when never healthy
	done    chan struct{} // closed when supervision ends
	stopCh  chan struct{}
	once    sync.Once
	tail    *ring

	// pipes are the current process's output pipes; reading counts the
	// capture goroutines holding bytes read but not yet reported.
	pipes   [2]*os.File
	reading atomic.Int32
}

func (p *proc) prepare(ctx context.Context) error {
	p.stopCh = make(chan struct{})
	isolation, err := p.s.Isolation()
	if err != nil {
		return err
	}
	if err := p.makeDir(); err != nil {
		return err
	}
	p.uid = os.Getuid()
	if sb := p.s.sb; sb != nil {
		if err := p.takeSlot(sb); err != nil {
			return err
		}
	}
	if p.spec.Materialize != nil {
		if err := p.spec.Materialize(ctx, p.dir); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return fmt.Errorf("runner: the version's files are larger than its disk limit of %d MiB", p.s.cfg.Limits.DiskBytes>>20)
			}
			return fmt.Errorf("runner: writing the version's files: %w", err)
		}
	}
	if err := p.handOver(); err != nil {
		return err
	}
	p.system("starting version %d: %s (%s)", p.spec.Version, p.spec.Command, isolation)
	if err := p.startOnce(); err != nil {
		return err
	}
	return nil
}

// makeDir makes the version's directory afresh.
func (p *proc) makeDir() error {
	dir := filepath.Join(p.s.cfg.Dir, p.spec.ServiceID, fmt.Sprintf("v%d", p.spec.Version))
	unmountAppDir(dir) // a tmpfs a crashed Pier left
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o711); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	p.dir = dir
	return nil
}

// takeSlot sets the version up in a sandbox slot: its user, its network
// (without egress when the spec says so), its disk, and the forwarders to
// the host services it uses.
func (p *proc) takeSlot(sb *sandbox) error {
	sl, err := sb.slots.acquire(fmt.Sprintf("%s v%d pid %d", p.spec.ServiceID, p.spec.Version, os.Getpid()))
	if err != nil {
		return err
	}
	p.slot, p.sandboxed = sl, true
	p.uid = sb.uid(sl)
	sb.cleanSlot(sl) // what a crashed holder left
	if err := sb.netUp(sl); err != nil {
		return err
	}
	own(sb, sl)
	if p.spec.NoEgress {
		_, guest := sb.addrs(sl)
		if err := nftElement(true, "no_egress", guest.String()); err != nil {
			return err
		}
	}
	if err := mountAppDir(p.dir, p.uid, p.s.cfg.Limits.DiskBytes); err != nil {
		return err
	}
	p.hostEnv = map[string]string{}
	for _, hs := range p.spec.HostServices {
		f, addr, err := sb.openHostService(sl, hs)
		if err != nil {
			return err
		}
		p.forwarders = append(p.forwarders, f)
		p.hostEnv[hs.Env] = hs.Value(addr)
	}
	return nil
}

// handOver gives the version's files to its user and picks its port: the
// app port inside a sandbox, whose bundle it writes, or a free one on the
// host.
func (p *proc) handOver() error {
	if p.sandboxed {
		if err := chownTree(p.dir, p.uid); err != nil {
			return err
		}
		if !p.spec.Worker {
			p.port = AppPort
		}
		return writeBundle(p.bundleDir(), p.s.sb.spec(p.slot, p))
	}
	if p.s.root {
		if err := chownTree(p.dir, p.uid); err != nil {
			return err
		}
	}
	if !p.spec.Worker {
		port, err := freePort()
		if err != nil {
			return err
		}
		p.port = port
	}
	return nil
}

// bundleDir is the OCI bundle of a sandboxed version: its config.json,
// beside its directory, where the version cannot read it.
func (p *proc) bundleDir() string { return p.dir + ".oci" }

func chownTree(root string, uid int) error {
	return filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, uid)
	})
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (p *proc) addr() string {
	if p.spec.Worker {
		return ""
	}
	if p.sandboxed {
		_, guest := p.s.sb.addrs(p.slot)
		return netip.AddrPortFrom(guest, uint16(p.port)).String()
	}
	return fmt.Sprintf("127.0.0.1:%d", p.port)
}

func (p *proc) env() []string {
	home := p.dir
	if p.sandboxed {
		home = "/app"
	}
	env := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
		"LANG=C.UTF-8",
		"PYTHONUNBUFFERED=1",
	}
	for k, v := range p.spec.Env {
		switch k {
		case "PORT", "HOME":
			continue
		}
		if hv, ok := p.hostEnv[k]; ok {
			v = hv
		}
		env = append(env, k+"="+v)
	}
	if !p.spec.Worker {
		env = append(env, fmt.Sprintf("PORT=%d", p.port))
	}
	return env
}

// startOnce starts the command once.
func (p *proc) startOnce() error {
	if p.sandboxed {
		return p.startSandboxed()
	}
	cmd := exec.Command("/bin/sh", "-c", shellCommand(p.spec.Command))
	cmd.Dir = p.dir
	cmd.Env = p.env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if p.s.root {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(p.uid), Gid: uint32(p.uid), Groups: []uint32{}}
	}
	var cgfd *os.File
	if p.s.cgroups != nil {
		if f, err := p.s.cgroups.create(p.spec.ServiceID, p.spec.Version, p.s.cfg.Limits); err == nil {
			cgfd = f
			cmd.SysProcAttr.UseCgroupFD = true
			cmd.SysProcAttr.CgroupFD = int(f.Fd())
		}
	}
	stdout, stderr, err := p.s.start(cmd)
	if cgfd != nil {
		cgfd.Close()
	}
	if err != nil {
		return fmt.Errorf("runner: starting %q: %w", p.spec.Command, err)
	}
	// The limits bind from the first moment the command runs: os/exec
	// forks with CLONE_VFORK, so the command has just been exec'd.
	setLimits(cmd.Process.Pid, p.s.cfg.Limits, p.s.root)
	// The process group is recorded where the version cannot write, so a
	// Pier killed before it could stop it finds and ends it when it starts.
	os.WriteFile(p.pgidFile(), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
	p.watch(cmd, stdout, stderr)
	return nil
}

// startSandboxed runs the version's container with runc run, which stays
// its parent: it passes the output pipes through, forwards the signals it
// gets to the container's first process, and exits with its status. The
// container's namespaces and cgroup exist, with their limits, before the
// command's first instruction.
func (p *proc) startSandboxed() error {
	sb := p.s.sb
	id := containerID(p.slot)
	p.mu.Lock()
	restart := p.cmd != nil
	p.mu.Unlock()
	if restart {
		sb.runcCmd(context.Background(), "delete", "--force", id).Run() // the last run's, if runc left it
	}
	cmd := exec.Command(sb.runc, "--root", sb.state, "run", "--bundle", p.bundleDir(), id)
	cmd.Dir = p.bundleDir()
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, stderr, err := p.s.start(cmd)
	if err != nil {
		return fmt.Errorf("runner: starting the sandbox: %w", err)
	}
	p.watch(cmd, stdout, stderr)
	return nil
}

// watch captures a started command's output and closes its exited
// channel once it has exited and its output is read.
func (p *proc) watch(cmd *exec.Cmd, stdout, stderr io.ReadCloser) {
	exited := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.pipes[0], _ = stdout.(*os.File)
	p.pipes[1], _ = stderr.(*os.File)
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.capture("stdout", stdout) }()
	go func() { defer wg.Done(); p.capture("stderr", stderr) }()
	go func() {
		wg.Wait()
		cmd.Wait()
		close(exited)
	}()
}

// capture reads a stream line by line (a line longer than 8 KiB is cut)
// and reports each line.
func (p *proc) capture(stream string, r io.Reader) {
	buf := make([]byte, 0, 4096)
	chunk := make([]byte, 4096)
	emit := func(line []byte) {
		text := strings.TrimRight(string(line), "\r")
		p.tail.add(text)
		if p.s.cfg.Events != nil {
			p.s.cfg.Events.Log(p.spec.ServiceID, p.spec.Version, stream, text, p.s.cfg.Now())
		}
	}
	for {
		n, err := r.Read(chunk)
		p.reading.Add(1)
		data := chunk[:n]
		for len(data) > 0 {
			i := indexByte(data, '\n')
			if i < 0 {
				room := 8192 - len(buf)
				if len(data) > room {
					buf = append(buf, data[:room]...)
					emit(buf)
					buf = buf[:0]
					data = data[room:]
					continue
				}
				buf = append(buf, data...)
				break
			}
			buf = append(buf, data[:i]...)
			// A line longer than 8 KiB goes out in 8 KiB pieces.
			for len(buf) > 8192 {
				emit(buf[:8192])
				buf = append(buf[:0], buf[8192:]...)
			}
			emit(buf)
			buf = buf[:0]
			data = data[i+1:]
		}
		if err != nil {
			if len(buf) > 0 {
				emit(buf)
			}
			p.reading.Add(-1)
			return
		}
		p.reading.Add(-1)
	}
}

// drain waits, briefly, until the lines the process wrote so far are
// reported: its pipes hold no unread bytes and no capture goroutine holds
// bytes it read. A version's first lines then come before the word that it
// is healthy, in its log and in what its launch prints.
func (p *proc) drain() {
	p.mu.Lock()
	pipes := p.pipes
	p.mu.Unlock()
	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) {
		if p.reading.Load() == 0 && unread(pipes[0]) == 0 && unread(pipes[1]) == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// unread is how many bytes wait in a pipe; 0 when it cannot be told.
func unread(f *os.File) int {
	if f == nil {
		return 0
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	// TIOCINQ is FIONREAD on Linux. Control, not Fd: Fd would put the pipe
	// in blocking mode.
	rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
	return n
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// system writes one of Pier's own lines into the version's log.
func (p *proc) system(format string, a ...any) {
	text := fmt.Sprintf(format, a...)
	p.tail.add(text)
	if p.s.cfg.Events != nil {
		p.s.cfg.Events.Log(p.spec.ServiceID, p.spec.Version, "system", text, p.s.cfg.Now())
	}
}

func (p *proc) setHealth(state, detail string) {
	p.mu.Lock()
	p.health = Health{State: state, Restarts: p.restarts, Detail: detail, At: p.s.cfg.Now()}
	h := p.health
	p.mu.Unlock()
	if p.s.cfg.Events != nil {
		p.s.cfg.Events.Health(p.spec.ServiceID, p.spec.Version, h)
	}
}

func (p *proc) stop() {
	p.once.Do(func() {
		p.mu.Lock()
		p.stopping = true
		p.mu.Unlock()
		close(p.stopCh)
	})
}

// waitHealthy waits until the version is healthy, fails, or ctx ends.
func (p *proc) waitHealthy(ctx context.Context) (Instance, error) {
	select {
	case <-p.healthy:
		return Instance{Addr: p.addr(), Dir: p.dir, UID: p.uid, Sandboxed: p.sandboxed}, nil
	case <-p.done:
		if p.failed != nil {
			return Instance{}, p.failed
		}
		return Instance{}, errors.New("runner: version stopped")
	case <-ctx.Done():
		return Instance{}, ctx.Err()
	}
}

// supervise checks the first start's health, then restarts the process
// each time it exits, with exponential backoff, until it is stopped or
// crash-loops.
func (p *proc) supervise() {
	defer close(p.done)
	defer p.kill()
	if err := p.checkHealth(); err != nil {
		p.failed = err
		p.setHealth("unhealthy", err.Error())
		return
	}
	p.drain()
	p.system("version %d is healthy", p.spec.Version)
	p.setHealth("healthy", "")
	close(p.healthy)
	backoff := p.s.cfg.RestartBase
	for {
		p.mu.Lock()
		exited := p.exited
		p.mu.Unlock()
		select {
		case <-p.stopCh:
			return
		case <-exited:
		}
		status := p.cmd.ProcessState.String()
		now := p.s.cfg.Now()
		p.mu.Lock()
		p.crashes = append(p.crashes, now)
		cut := 0
		for cut < len(p.crashes) && now.Sub(p.crashes[cut]) > p.s.cfg.CrashWindow {
			cut++
		}
		p.crashes = p.crashes[cut:]
		loops := len(p.crashes) >= p.s.cfg.CrashRestarts
		p.mu.Unlock()
		if loops {
			detail := fmt.Sprintf("exited %d times within %s (last: %s); stopped as crashed", len(p.crashes), p.s.cfg.CrashWindow, status)
			p.system("%s", detail)
			p.setHealth("crashed", detail+"; last lines:\n"+strings.Join(p.tail.lines(), "\n"))
			return
		}
		p.system("process %s; restarting in %s", status, backoff)
		p.setHealth("starting", "process "+status)
		select {
		case <-p.stopCh:
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, p.s.cfg.RestartMax)
		p.mu.Lock()
		p.restarts++
		p.mu.Unlock()
		if err := p.startOnce(); err != nil {
			p.system("restart failed: %v", err)
			continue
		}
		if err := p.checkHealth(); err == nil {
			p.setHealth("healthy", "restarted")
			backoff = p.s.cfg.RestartBase
		}
	}
}

// checkHealth waits for the current process to be healthy: a worker that
// stayed up Grace, a process answering GET HealthPath below 500 within
// HealthTimeout. A process that exits first fails at once.
func (p *proc) checkHealth() error {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	timeout := p.spec.HealthTimeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	if p.spec.Worker {
		grace := p.spec.Grace
		if grace <= 0 {
			grace = 3 * time.Second
		}
		select {
		case <-exited:
			return p.unhealthy(fmt.Sprintf("the worker exited (%s) within its %s grace period", p.cmd.ProcessState, grace))
		case <-p.stopCh:
			return errors.New("runner: stopped while starting")
		case <-time.After(grace):
			return nil
		}
	}
	path := p.spec.HealthPath
	if path == "" {
		path = "/"
	}
	url := "http://" + p.addr() + path
	client := &http.Client{Timeout: 2 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	// The first tries come every 5 ms, so a version that is up in a few
	// milliseconds is seen as soon; then every 50 ms.
	interval := 5 * time.Millisecond
	tick := time.NewTimer(interval)
	defer tick.Stop()
	last := "no answer yet"
	for {
		resp, err := client.Get(url)
		if err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return nil
			}
			last = fmt.Sprintf("GET %s answered %d", path, resp.StatusCode)
		} else {
			last = "GET " + path + ": " + shortErr(err)
		}
		select {
		case <-exited:
			return p.unhealthy(fmt.Sprintf("the process exited (%s) before it was healthy", p.cmd.ProcessState))
		case <-p.stopCh:
			return errors.New("runner: stopped while starting")
		case <-deadline.C:
			return p.unhealthy(fmt.Sprintf("no healthy answer within %s (%s)", timeout, last))
		case <-tick.C:
			interval = min(interval*2, 50*time.Millisecond)
			tick.Reset(interval)
		}
	}
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

func (p *proc) unhealthy(reason string) error {
	p.system("%s", reason)
	// Let the output of a process that just exited reach the tail.
	time.Sleep(50 * time.Millisecond)
	return &UnhealthyError{Reason: reason, Tail: p.tail.lines()}
}

// kill ends the current process: SIGTERM to its group, StopGrace, SIGKILL.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	pid := cmd.Process.Pid
	if p.sandboxed {
		// runc forwards SIGTERM to the container's first process; when
		// that ends, the kernel ends every other process of its PID
		// namespace, whatever session or group it made for itself.
		syscall.Kill(pid, syscall.SIGTERM)
	} else {
		syscall.Kill(-pid, syscall.SIGTERM)
	}
	select {
	case <-exited:
		p.system("stopped (SIGTERM)")
	case <-time.After(p.s.cfg.StopGrace):
		if p.sandboxed {
			p.s.sb.killAll(p.slot)
		}
		syscall.Kill(-pid, syscall.SIGKILL)
		<-exited
		p.system("killed (SIGKILL after %s)", p.s.cfg.StopGrace)
	}
	p.setHealth("stopped", "")
}

// ring keeps the last lines a version wrote.
type ring struct {
	mu  sync.Mutex
	buf []string
	n   int
}

func newRing(n int) *ring { return &ring{buf: make([]string, 0, n), n: n} }

func (r *ring) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) == r.n {
		copy(r.buf, r.buf[1:])
		r.buf = r.buf[:r.n-1]
	}
	r.buf = append(r.buf, s)
}

func (r *ring) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.buf...)
}

// Version names a version running here.
type Version struct {
	ServiceID string
	Version   int
}

// List names the versions running here.
func (s *Supervisor) List() []Version {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Version, 0, len(s.running))
	for k := range s.running {
		out = append(out, Version{k.service, k.version})
	}
	return out
}

func (p *proc) pgidFile() string { return p.dir + ".pgid" }

// shellCommand lets sh exec a simple command in its place, so the command
// is the process Pier signals and that dies with Pier; a compound one
// (pipes, lists, redirections) runs under sh.
func shellCommand(c string) string {
	if strings.ContainsAny(c, ";&|<>()`$\n{}*?[]#~=") || strings.HasPrefix(strings.TrimSpace(c), "exec ") {
		return c
	}
	return "exec " + c
}

// killLeftovers ends the process groups of versions a previous Pier ran
// and could not stop (it was killed): Pdeathsig reaches only the direct
// child, not what it started. A group is killed only while one of its
// processes still works in this supervisor's directory, so a reused pid
// is never signalled.
func (s *Supervisor) killLeftovers() {
	files, _ := filepath.Glob(filepath.Join(s.cfg.Dir, "*", "v*.pgid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		os.Remove(f)
		if err != nil {
			continue
		}
		pgid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pgid <= 1 {
			continue
		}
		dir := strings.TrimSuffix(f, ".pgid")
		if groupWorksIn(pgid, dir) {
			syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
}

// groupWorksIn reports whether a process of group pgid has its working
// directory under dir.
func groupWorksIn(pgid int, dir string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err != nil || g != pgid {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/")) {
			return true
		}
	}
	return false
}
