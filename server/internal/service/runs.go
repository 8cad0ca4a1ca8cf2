package service

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/store"
)

// RunSpec is one version of a process or worker service to run.
type RunSpec struct {
	ServiceID, OrgID, BundleID string
	Version                    int
	Worker                     bool
	Command                    string
	Env                        map[string]string
	HealthPath                 string
	HealthTimeout, Grace       time.Duration
	// HostServices are services of the host the version may reach, such
	// as its database.
	HostServices []HostService
	// NoEgress keeps the version off the public network: its project's
	// policy says serviceEgress: denied.
	NoEgress bool
}

// HostService is a service of the host a version may reach: where Pier
// reaches it (network "tcp" or "unix", and address), and the variable
// that tells the version where it reaches it. A sandboxed version reaches
// it through its own gateway: Value makes the variable's value from the
// address the version reaches it by (host:port).
type HostService struct {
	Network, Address string
	Port             int
	Env              string
	Value            func(addr string) string
}

// StartError is a version that never became healthy: why, and the last
// lines it wrote.
type StartError struct {
	Reason string
	Tail   []string
}

func (e *StartError) Error() string { return e.Reason }

// Runtime runs the versions of process and worker services. Start returns
// once the version is healthy, with where it answers (host:port; empty for
// a worker), or a *StartError. Stop stops a version gracefully and removes
// its files; stopping what does not run is a no-op. The server implements
// it over the local supervisor; see docs/architecture.md for runners that
// span machines.
type Runtime interface {
	Start(ctx context.Context, spec RunSpec) (addr string, err error)
	Stop(ctx context.Context, serviceID string, version int) error
	// Running lists the versions running here.
	Running() []RunningVersion
	// ID names this replica's runner, the same across its restarts.
	ID() string
	// Sandbox is how versions are confined here, or why none can start:
	// without a sandbox, process and worker launches are refused.
	Sandbox() (Sandbox, error)
}

// Sandbox is how a runtime confines each version, and its limits.
type Sandbox struct {
	// Isolation is "runc", or "unsandboxed" where the operator allowed
	// bare processes for local development.
	Isolation                                              string
	MemoryBytes, CPUMillis, Processes, DiskBytes, TmpBytes int64
	Egress                                                 bool
}

// sandboxUnavailable is the refusal of a process or worker launch on a
// server that cannot sandbox it.
func sandboxUnavailable(err error) *apierr.Error {
	return apierr.New("plan:sandbox_unavailable", err.Error()+"; process and worker services need a sandbox: the operator installs what is missing (or, for local development only, starts pier server with --unsandboxed-services); static sites launch on edge").
		WithActions(actions.Manual("configure_sandbox", "human"), actions.Tool("estimate", "agent", map[string]any{"workload": "static_site"}))
}

// RunningVersion is a version a Runtime runs.
type RunningVersion struct {
	ServiceID string
	Version   int
}

// Databases is the managed PostgreSQL add-on: a database and role per
// service. Each call is idempotent.
type Databases interface {
	Create(ctx context.Context, name, password string) error
	URL(name, password string) string
	// Endpoint is where the server listens as Pier reaches it, and URLAt
	// a role's URL for a version that reaches it at addr (host:port).
	Endpoint() (network, address string)
	URLAt(name, password, addr string) string
	Dump(ctx context.Context, name string) ([]byte, error)
	Drop(ctx context.Context, name string) error
}

// Health is what the runtime reports of a running version.
type Health struct {
	State    string // healthy, starting, unhealthy, crashed, stopped
	Restarts int
	Detail   string
	At       time.Time
}

// versionSpec is what a version runs, stored with it. Secret values are
// kept for the process and never returned by reads.
type versionSpec struct {
	Run           string            `json:"run,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
	Secrets       map[string]string `json:"secrets,omitempty"`
	HealthPath    string            `json:"healthPath,omitempty"`
	HealthTimeout int               `json:"healthTimeoutSeconds,omitempty"`
	Grace         int               `json:"graceSeconds,omitempty"`
	Addons        []string          `json:"addons,omitempty"`
}

func (v versionSpec) envNames() []string {
	var out []string
	for k := range v.Env {
		out = append(out, k)
	}
	for k := range v.Secrets {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func parseVersionSpec(s string) versionSpec {
	var v versionSpec
	json.Unmarshal([]byte(s), &v)
	return v
}

var envNameRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
})

// reservedEnv are set by Pier and cannot be configured.
var reservedEnv = map[string]bool{"PORT": true, "HOME": true, "PATH": true, "DATABASE_URL": true}

func checkEnvNames(field string, m map[string]string) error {
	for k := range m {
		if !envNameRE().MatchString(k) {
			return apierr.Newf("input:invalid", "variable name %q must be letters, digits and underscores, not starting with a digit", k).
				WithField(field+"."+k, "not a variable name")
		}
		if reservedEnv[k] {
			return apierr.Newf("input:invalid", "%s is set by Pier and cannot be configured", k).
				WithField(field+"."+k, "reserved")
		}
	}
	return nil
}

// runsProcesses reports whether a target runs a command.
func runsProcesses(target string) bool { return target == "process" || target == "worker" }

// procfileCommand reads the command for a target from a bundle's Procfile:
// the web: line for a process, worker: for a worker.
func (s *Runs) procfileCommand(ctx context.Context, b store.Bundle, target string) (string, error) {
	f, ok, err := bundleFile(ctx, s.store.Bundles(), b, "Procfile")
	if err != nil || !ok {
		return "", err
	}
	want := "web"
	if target == "worker" {
		want = "worker"
	}
	data, err := s.store.Bundles().Blob(ctx, f.SHA256)
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, cmd, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(name) == want && strings.TrimSpace(cmd) != "" {
			return strings.TrimSpace(cmd), nil
		}
	}
	return "", nil
}

func noCommand(target string, projectID string) *apierr.Error {
	line := "web: python3 app.py"
	if target == "worker" {
		line = "worker: python3 worker.py"
	}
	return apierr.Newf("plan:no_command", "a %s launch needs a command: add a Procfile with a line such as %q to the bundle, or pass run", target, line).
		WithActions(actions.Tool("upload_assets", "agent", map[string]any{"projectId": projectID})).
		WithField("body.run", "missing, and the bundle has no Procfile line for "+target)
}

// runSpec is what the runtime needs to run version v of svc.
func (s *Runs) runSpec(ctx context.Context, svc store.Service, v store.ServiceVersion) (RunSpec, error) {
	spec := parseVersionSpec(v.Spec)
	env := map[string]string{}
	for k, val := range spec.Env {
		env[k] = val
	}
	for k, val := range spec.Secrets {
		env[k] = val
	}
	var hostServices []HostService
	if slices.Contains(spec.Addons, "managed_postgres") {
		if s.databases == nil {
			return RunSpec{}, apierr.New("plan:addon_unavailable", "this deployment has no PostgreSQL for the managed_postgres add-on; the operator sets --postgres-admin-url (PIER_POSTGRES_ADMIN_URL)")
		}
		d, err := s.store.Services().Database(ctx, svc.ID)
		if err != nil {
			return RunSpec{}, fmt.Errorf("the service's database: %w", err)
		}
		env["DATABASE_URL"] = s.databases.URL(d.Name, d.Password)
		network, address := s.databases.Endpoint()
		hostServices = append(hostServices, HostService{Network: network, Address: address, Port: 5432, Env: "DATABASE_URL",
			Value: func(addr string) string { return s.databases.URLAt(d.Name, d.Password, addr) }})
	}
	noEgress := false
	if proj, err := s.store.Projects().Get(ctx, svc.OrgID, svc.ProjectID); err == nil {
		noEgress = egressDenied(proj.Policy)
	}
	rs := RunSpec{ServiceID: svc.ID, OrgID: svc.OrgID, BundleID: v.BundleID, Version: v.Number, Worker: svc.Target == "worker",
		Command: spec.Run, Env: env, HealthPath: spec.HealthPath,
		HealthTimeout: time.Duration(spec.HealthTimeout) * time.Second, Grace: time.Duration(spec.Grace) * time.Second,
		HostServices: hostServices, NoEgress: noEgress}
	return rs, nil
}

// start starts version v and returns where it answers. A version that
// never became healthy is service:unhealthy, with its last lines and an
// action to read the logs.
func (s *Runs) start(ctx context.Context, svc store.Service, v store.ServiceVersion) (string, error) {
	if s.runtime == nil {
		return "", apierr.New("plan:not_implemented", "this server runs no processes")
	}
	if _, err := s.runtime.Sandbox(); err != nil {
		return "", sandboxUnavailable(err)
	}
	spec, err := s.runSpec(ctx, svc, v)
	if err != nil {
		return "", err
	}
	addr, err := s.runtime.Start(ctx, spec)
	var se *StartError
	if errors.As(err, &se) {
		msg := fmt.Sprintf("version %d of %s never became healthy: %s", v.Number, svc.Name, se.Reason)
		if len(se.Tail) > 0 {
			msg += "\nlast lines:\n" + strings.Join(lastN(se.Tail, 15), "\n")
		}
		return "", apierr.New("service:unhealthy", msg,
			actions.Tool("get_service_logs", "agent", map[string]any{"id": svc.ID, "version": v.Number}))
	}
	return addr, err
}

func lastN(xs []string, n int) []string {
	if len(xs) > n {
		return xs[len(xs)-n:]
	}
	return xs
}

// Supervise keeps this replica's share of the running services running:
// at start it adopts the live process and worker services no replica
// supervises (embedded: all of them) and starts their serving versions,
// then every few seconds it says it is alive, adopts those a dead replica
// left, and stops what runs here for services no longer live. It returns
// when ctx ends.
func (s *Runs) Supervise(ctx context.Context, embedded bool) {
	if s.runtime == nil {
		return
	}
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	first := true
	for {
		stale := s.Now().Add(-20 * time.Second)
		if embedded && first {
			stale = s.Now().Add(time.Hour) // one replica: every service is ours
		}
		first = false
		s.adopt(ctx, stale)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.store.ServiceRuns().Heartbeat(ctx, s.runtime.ID(), s.Now())
		s.reconcile(ctx)
	}
}

func (s *Runs) adopt(ctx context.Context, stale time.Time) {
	svcs, err := s.store.ServiceRuns().Adopt(ctx, s.runtime.ID(), stale, s.Now())
	if err != nil {
		s.log.Warn("adopting services", "err", err)
		return
	}
	running := map[RunningVersion]bool{}
	for _, rv := range s.runtime.Running() {
		running[rv] = true
	}
	for _, svc := range svcs {
		if running[RunningVersion{svc.ID, svc.Version}] {
			continue
		}
		v, err := s.store.ServiceVersions().Get(ctx, svc.ID, svc.Version)
		if err != nil {
			s.log.Warn("adopting service", "service", svc.ID, "err", err)
			continue
		}
		go func() {
			addr, err := s.start(ctx, svc, v)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.Warn("restarting service", "service", svc.ID, "version", v.Number, "err", err)
				s.Health(svc.ID, v.Number, Health{State: "crashed", Detail: "could not start again after the server restarted: " + err.Error(), At: s.Now()})
				return
			}
			if err := s.store.ServiceRuns().SetUpstream(context.WithoutCancel(ctx), svc.ID, addr, s.runtime.ID(), s.Now()); err != nil {
				s.log.Warn("restarting service", "service", svc.ID, "err", err)
			}
			s.platform.InvalidateHosts(s.serviceHosts(ctx, svc)...)
			s.log.Info("service running again", "service", svc.ID, "version", v.Number, "addr", addr)
		}()
	}
}

// reconcile stops versions running here whose service no longer runs
// them: torn down or failed (perhaps by a task on another replica), or
// superseded and no longer starting.
func (s *Runs) reconcile(ctx context.Context) {
	for _, rv := range s.runtime.Running() {
		svc, err := s.store.Services().GetAnyOrg(ctx, rv.ServiceID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			continue
		}
		stop := errors.Is(err, store.ErrNotFound) || ServiceState(svc.State) == ServiceTornDown || ServiceState(svc.State) == ServiceFailed || ServiceState(svc.State) == ServicePaused
		if !stop && rv.Version != svc.Version && svc.Runner != "" && svc.Runner != s.runtime.ID() {
			stop = true // another replica serves this service now
		}
		if stop {
			s.runtime.Stop(ctx, rv.ServiceID, rv.Version)
		}
	}
}

func (s *Runs) serviceHosts(ctx context.Context, svc store.Service) []string {
	hosts, _ := s.store.Services().Hosts(ctx, svc.ID)
	return append(hosts, svc.PreviewHost)
}

// Health records what the runtime says of a version. Only the serving
// version's health is the service's; a crash loop marks the service
// crashed, with its reason in the ledger.
func (s *Runs) Health(serviceID string, version int, h Health) {
	ctx := context.Background()
	svc, err := s.store.Services().GetAnyOrg(ctx, serviceID)
	if err != nil || svc.Version != version {
		return
	}
	hj, _ := json.Marshal(h)
	var state ServiceState
	switch HealthState(h.State) {
	case HealthCrashed:
		state = ServiceCrashed
	case HealthHealthy:
		if ServiceState(svc.State) == ServiceCrashed {
			state = ServiceLive
		}
	}
	if err := s.store.ServiceRuns().SetHealth(ctx, serviceID, string(hj), string(state), s.Now()); err != nil {
		s.log.Warn("recording health", "service", serviceID, "err", err)
		return
	}
	if state == ServiceCrashed {
		s.store.Ledger().Append(ctx, store.LedgerRecord{OrgID: svc.OrgID, Actor: "system", Action: "service_crashed", ObjectType: "service", ObjectID: serviceID,
			Details: map[string]any{"version": version, "restarts": h.Restarts}}, s.Now())
		s.platform.InvalidateHosts(s.serviceHosts(ctx, svc)...)
	}
}

// logWriter is the log writer: lines wait in memory briefly and are
// written in batches, numbered per service as they are written; followers
// are woken on each batch. Capturing a line does no I/O.
type logWriter struct {
	st   serviceLogsStore
	keep int64

	mu      sync.Mutex
	pending []store.LogLine
	wake    map[string]chan struct{}

	// flushing orders flushes; next, the next sequence number per
	// service, is read and written only under it.
	flushing sync.Mutex
	next     map[string]int64
}

// maxPending bounds the lines waiting to be written; past it the oldest
// are dropped.
const maxPending = 20_000

func newLogWriter(st serviceLogsStore, keep int64) *logWriter {
	if keep <= 0 {
		keep = 5000
	}
	return &logWriter{st: st, keep: keep, next: map[string]int64{}, wake: map[string]chan struct{}{}}
}

// Log records one line of a version's output.
func (s *Runs) Log(serviceID string, version int, stream, text string, at time.Time) {
	w := s.logs
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) >= maxPending {
		w.pending = w.pending[1:]
	}
	w.pending = append(w.pending, store.LogLine{ServiceID: serviceID, At: at.UTC(), Stream: stream, Version: version, Text: text})
}

// FlushLogs writes the waiting lines every interval until ctx ends, then
// once more.
func (s *Runs) FlushLogs(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.flush(context.WithoutCancel(ctx))
			return
		case <-t.C:
			s.flush(ctx)
		}
	}
}

func (s *Runs) flush(ctx context.Context) {
	w := s.logs
	w.flushing.Lock()
	defer w.flushing.Unlock()
	w.mu.Lock()
	lines := w.pending
	w.pending = nil
	w.mu.Unlock()
	if len(lines) == 0 {
		return
	}
	touched := map[string]bool{}
	for i := range lines {
		id := lines[i].ServiceID
		touched[id] = true
		seq, ok := w.next[id]
		if !ok {
			last, err := s.store.ServiceLogs().LastSeq(ctx, id)
			if err != nil {
				last = lines[i].At.UnixMicro() // still increasing
			}
			seq = last + 1
		}
		lines[i].Seq, w.next[id] = seq, seq+1
	}
	for len(lines) > 0 {
		n := min(len(lines), 500)
		if err := s.store.ServiceLogs().Append(ctx, lines[:n]); err != nil {
			s.log.Warn("writing logs", "err", err, "lines", n)
		}
		lines = lines[n:]
	}
	w.mu.Lock()
	for id := range touched {
		if ch, ok := w.wake[id]; ok {
			close(ch)
			delete(w.wake, id)
		}
	}
	w.mu.Unlock()
	for id := range touched {
		s.store.ServiceLogs().Trim(ctx, id, w.keep)
	}
}

// pendingLines is how many lines wait to be written.
func (s *Runs) pendingLines() int {
	s.logs.mu.Lock()
	defer s.logs.mu.Unlock()
	return len(s.logs.pending)
}

// logsWritten is closed once lines of the service are next written here.
func (s *Runs) logsWritten(serviceID string) <-chan struct{} {
	w := s.logs
	w.mu.Lock()
	defer w.mu.Unlock()
	ch, ok := w.wake[serviceID]
	if !ok {
		ch = make(chan struct{})
		w.wake[serviceID] = ch
	}
	return ch
}

// LogQuery is what get_service_logs asks.
type LogQuery struct {
	Tail    int
	Since   time.Time
	After   int64
	Version int
	Wait    time.Duration
}

// LogLine is one line a service wrote, on stdout or stderr, from one of
// its versions.
type LogLine struct {
	Seq     int64
	At      time.Time
	Stream  string
	Version int
	Text    string
}

// ServiceLogs are lines of a service and where the next read starts
// (after the last line read, or the newest line when none was).
type ServiceLogs struct {
	ServiceID string
	Lines     []LogLine
	NextAfter int64
}

// Logs reads a service's lines; with Wait, an empty answer waits for lines.
func (s *Runs) Logs(ctx context.Context, orgID, id string, q LogQuery) (*ServiceLogs, error) {
	svc, err := s.store.Services().Get(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notInOrg("service", id, "list_services")
	}
	if err != nil {
		return nil, apierr.Internal(err)
	}
	if q.Tail <= 0 {
		q.Tail = 200
	}
	sq := store.LogQuery{After: q.After, Since: q.Since, Version: q.Version, Limit: q.Tail, Tail: q.After == 0 && q.Since.IsZero()}
	deadline := time.Now().Add(q.Wait)
	var lines []store.LogLine
	before, _ := s.store.ServiceLogs().LastSeq(ctx, svc.ID)
	for {
		woken := s.logsWritten(svc.ID)
		lines, err = s.store.ServiceLogs().Read(ctx, svc.ID, sq)
		if err != nil {
			return nil, apierr.Internal(err)
		}
		left := time.Until(deadline)
		if len(lines) > 0 || left <= 0 {
			break
		}
		// Lines written by another replica are seen within a second.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-woken:
		case <-time.After(min(left, time.Second)):
		}
		if sq.Tail {
			// Having waited, read what came after the point we started at.
			sq = store.LogQuery{After: max(q.After, before), Version: q.Version, Limit: q.Tail}
		}
	}
	out := &ServiceLogs{ServiceID: svc.ID, Lines: []LogLine{}, NextAfter: q.After}
	for _, l := range lines {
		out.Lines = append(out.Lines, LogLine{Seq: l.Seq, At: l.At, Stream: l.Stream, Version: l.Version, Text: l.Text})
		out.NextAfter = l.Seq
	}
	if len(lines) == 0 && out.NextAfter == 0 {
		out.NextAfter, _ = s.store.ServiceLogs().LastSeq(ctx, svc.ID)
	}
	return out, nil
}

// Ended reports whether a service will write no more lines.
func (s *Runs) Ended(ctx context.Context, orgID, id string) bool {
	svc, err := s.store.Services().Get(ctx, orgID, id)
	return err != nil || ServiceState(svc.State) == ServiceTornDown || ServiceState(svc.State) == ServiceFailed
}

// EnvVar is one of a service's variables; a secret shows its name only.
type EnvVar struct {
	Name, Value string
	Secret      bool
}

// ServiceEnv is the serving version's variables (Version 0 before any).
type ServiceEnv struct {
	ServiceID string
	Version   int
	Variables []EnvVar
}

// ListEnv lists the serving version's variables; secrets by name only.
func (s *Runs) ListEnv(ctx context.Context, orgID, id string) (*ServiceEnv, error) {
	svc, v, err := s.currentVersion(ctx, orgID, id)
	if err != nil {
		return nil, err
	}
	spec := parseVersionSpec(v.Spec)
	out := &ServiceEnv{ServiceID: svc.ID, Version: v.Number, Variables: []EnvVar{}}
	for _, name := range spec.envNames() {
		ev := EnvVar{Name: name}
		if val, ok := spec.Env[name]; ok {
			ev.Value = val
		} else {
			ev.Secret = true
		}
		out.Variables = append(out.Variables, ev)
	}
	return out, nil
}

// currentVersion is the service and its serving version (or, before any
// serves, its newest).
func (s *Runs) currentVersion(ctx context.Context, orgID, id string) (store.Service, store.ServiceVersion, error) {
	svc, err := s.store.Services().Get(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return svc, store.ServiceVersion{}, notInOrg("service", id, "list_services")
	}
	if err != nil {
		return svc, store.ServiceVersion{}, apierr.Internal(err)
	}
	n := svc.Version
	if n == 0 {
		vs, err := s.store.ServiceVersions().List(ctx, svc.ID, 1)
		if err != nil || len(vs) == 0 {
			return svc, store.ServiceVersion{}, err
		}
		return svc, vs[0], nil
	}
	v, err := s.store.ServiceVersions().Get(ctx, svc.ID, n)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return svc, v, apierr.Internal(err)
	}
	return svc, v, nil
}

// FlushNow writes the waiting lines now.
func (s *Runs) FlushNow(ctx context.Context) { s.flush(ctx) }
