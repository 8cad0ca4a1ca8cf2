package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pierhq/pier/server/internal/runner"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/site"
	"github.com/pierhq/pier/server/internal/store"
)

// appsDirFor is where versions' working directories live by default: a
// directory of the temporary directory named for the data directory, so
// that versions, which must not read the data directory, can reach their
// own. Their files are written again from the store at each start.
func appsDirFor(dataDir string) string {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		abs = dataDir
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(os.TempDir(), fmt.Sprintf("pier-apps-%d-%s", os.Getuid(), hex.EncodeToString(sum[:4])))
}

// runnerID names this replica's supervisor, the same across its restarts.
func runnerID(dataDir string) string {
	host, _ := os.Hostname()
	abs, _ := filepath.Abs(dataDir)
	sum := sha256.Sum256([]byte(abs))
	return host + "/" + hex.EncodeToString(sum[:4])
}

// runtime is the domain's Runtime over the local supervisor: it writes a
// version's bundle into its directory and turns the supervisor's health
// failures into the domain's StartError.
type runtime struct {
	sup   *runner.Supervisor
	store *store.Store
	id    string
}

func (r runtime) ID() string { return r.id }

func (r runtime) Start(ctx context.Context, spec service.RunSpec) (string, error) {
	inst, err := r.sup.Start(ctx, runner.Spec{
		ServiceID: spec.ServiceID, Version: spec.Version, Worker: spec.Worker, Command: spec.Command, Env: spec.Env,
		HealthPath: spec.HealthPath, HealthTimeout: spec.HealthTimeout, Grace: spec.Grace,
		HostServices: hostServices(spec.HostServices), NoEgress: spec.NoEgress,
		Materialize: func(ctx context.Context, dir string) error { return r.materialize(ctx, spec.OrgID, spec.BundleID, dir) },
	})
	var ue *runner.UnhealthyError
	if errors.As(err, &ue) {
		return "", &service.StartError{Reason: ue.Reason, Tail: ue.Tail}
	}
	return inst.Addr, err
}

func (r runtime) Sandbox() (service.Sandbox, error) {
	if _, err := r.sup.Isolation(); err != nil {
		return service.Sandbox{}, err
	}
	l := r.sup.Limits()
	sb := service.Sandbox{Isolation: "runc", MemoryBytes: l.MemoryBytes, CPUMillis: l.CPUMillis, Processes: l.Processes,
		DiskBytes: l.DiskBytes, TmpBytes: l.TmpBytes, Egress: true}
	if !r.sup.Sandboxed() {
		sb.Isolation = "unsandboxed"
	}
	return sb, nil
}

func (r runtime) Stop(ctx context.Context, serviceID string, version int) error {
	return r.sup.Stop(ctx, serviceID, version)
}

func (r runtime) Running() []service.RunningVersion {
	var out []service.RunningVersion
	for _, v := range r.sup.List() {
		out = append(out, service.RunningVersion{ServiceID: v.ServiceID, Version: v.Version})
	}
	return out
}

// materialize writes a bundle's files into dir. Bundle paths were checked
// when uploaded (relative, no .., no links); they are checked again here.
func (r runtime) materialize(ctx context.Context, orgID, bundleID, dir string) error {
	b, err := r.store.Bundles().Get(ctx, orgID, bundleID)
	if err != nil {
		return err
	}
	var files []site.File
	if err := json.Unmarshal([]byte(b.Manifest), &files); err != nil {
		return err
	}
	for _, f := range files {
		if !filepath.IsLocal(f.Path) {
			return fmt.Errorf("bundle path %q leaves the directory", f.Path)
		}
		data, err := r.store.Bundles().Blob(ctx, f.SHA256)
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if isScript(data) {
			mode = 0o755
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			return err
		}
	}
	return nil
}

// isScript: a file starting with #! is made executable, as a bundle
// carries no modes.
func isScript(b []byte) bool { return len(b) > 2 && b[0] == '#' && b[1] == '!' }

// runEvents hands the supervisor's reports to the domain, once it exists.
type runEvents struct{ s *Server }

func (e runEvents) Log(serviceID string, version int, stream, text string, at time.Time) {
	if e.s.svc != nil {
		e.s.svc.Runs.Log(serviceID, version, stream, text, at)
	}
}

func (e runEvents) Health(serviceID string, version int, h runner.Health) {
	if e.s.svc != nil {
		e.s.svc.Runs.Health(serviceID, version, service.Health{State: h.State, Restarts: h.Restarts, Detail: h.Detail, At: h.At})
	}
}

func hostServices(in []service.HostService) []runner.HostService {
	var out []runner.HostService
	for _, h := range in {
		out = append(out, runner.HostService{Network: h.Network, Address: h.Address, Port: h.Port, Env: h.Env, Value: h.Value})
	}
	return out
}
