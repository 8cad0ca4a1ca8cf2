package service

import (
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/store"
)

// process launches a process (or worker) service paid by a quote and runs
// its task; it returns the task.
func (h *harness) process(tn tenant, name, target, workload string, req LaunchRequest) *Task {
	h.t.Helper()
	q := h.quote(tn, serviceItem(workload, target, name))
	if req.BundleID == "" {
		req.BundleID = h.site(tn, map[string]string{"Procfile": "web: python3 app.py\nworker: python3 worker.py\n", "app.py": "print(1)"})
	}
	req.Name, req.Target, req.QuoteID = name, target, q.ID
	v, err := h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, req)
	h.must(err)
	h.drain()
	return h.task(tn.org, v.ID)
}

// A process launch starts its version from the Procfile until healthy,
// with its variables and secrets; reads never show a secret's value.
func TestProcessLaunch(t *testing.T) {
	h := newHarness(t)
	a, b := h.tenant(100, DefaultPolicy()), h.tenant(100, DefaultPolicy())
	task := h.process(a, "api", "process", "dynamic_service", LaunchRequest{
		Env: map[string]string{"MODE": "prod"}, Secrets: map[string]string{"TOKEN": "s3cret"},
		HealthCheck: &HealthCheck{Path: "/healthz", TimeoutSeconds: 5, GraceSeconds: 1}})
	if task.State != "succeeded" {
		t.Fatalf("launch %+v", task.Steps)
	}
	id := task.ServiceID
	spec, ok := h.runtime.spec(id, 1)
	if !ok || spec.Command != "python3 app.py" || spec.Env["TOKEN"] != "s3cret" || spec.HealthPath != "/healthz" || spec.Grace != time.Second {
		t.Fatalf("runs %+v", spec)
	}
	svc, err := h.svc.Launches.GetService(h.ctx, a.org, id)
	h.must(err)
	if svc.Sandbox == nil || svc.Health == nil || svc.Health.State != "healthy" || !svc.RunsProcesses() {
		t.Fatalf("service %+v", svc)
	}
	env, err := h.svc.Runs.ListEnv(h.ctx, a.org, id)
	h.must(err)
	if len(env.Variables) != 2 || env.Variables[0].Name != "MODE" || env.Variables[0].Value != "prod" || env.Variables[1].Value != "" || !env.Variables[1].Secret {
		t.Fatalf("env %+v", env.Variables)
	}
	for _, err := range []error{
		lastErr(h.svc.Runs.ListEnv(h.ctx, b.org, id)),
		second2(h.svc.Runs.SetEnv(h.ctx, b.agent, id, EnvChange{})),
		second2(h.svc.Runs.Rollback(h.ctx, b.agent, id, nil)),
		lastErr(h.svc.Runs.Logs(h.ctx, b.org, id, LogQuery{})),
	} {
		wantCode(t, err, "not_found:resource")
	}
	if !h.svc.Runs.Ended(h.ctx, b.org, id) || h.svc.Runs.Ended(h.ctx, a.org, id) {
		t.Fatal("Ended answers across organisations")
	}
	h.books(a.org, a.project)
}

// New versions start beside the serving one, take the traffic and stop
// the one before; rollback serves an earlier version again.
func TestDeployAndRollback(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(100, DefaultPolicy())
	id := h.process(tn, "api", "process", "dynamic_service", LaunchRequest{Env: map[string]string{"A": "1", "B": "2"}}).ServiceID
	v2, err := h.svc.Runs.SetEnv(h.ctx, tn.agent, id, EnvChange{Set: map[string]string{"C": "3"}, Unset: []string{"A"}, Secrets: map[string]string{"B": "hidden"}})
	h.must(err)
	if v2.Undo.Call == nil || v2.Undo.Call.Tool != "rollback_service" {
		t.Fatalf("deploy undo %+v", v2.Undo)
	}
	h.drain()
	if got := h.task(tn.org, v2.ID); got.State != "succeeded" {
		t.Fatalf("deploy %+v", got.Steps)
	}
	if _, running := h.runtime.spec(id, 1); running {
		t.Fatal("version 1 still runs after draining")
	}
	spec, _ := h.runtime.spec(id, 2)
	if spec.Env["B"] != "hidden" || spec.Env["C"] != "3" || spec.Env["A"] != "" {
		t.Fatalf("version 2 env %v", spec.Env)
	}
	for _, c := range []struct {
		req  EnvChange
		code models.BlockedBy
	}{{EnvChange{Set: map[string]string{"PATH": "/"}}, "input:invalid"}, {EnvChange{Secrets: map[string]string{"a-b": "x"}}, "input:invalid"}} {
		wantCode(t, second2(h.svc.Runs.SetEnv(h.ctx, tn.agent, id, c.req)), c.code)
	}
	// Relaunching the name is the next version; it cannot change what the service is.
	bnd := h.site(tn, map[string]string{"Procfile": "web: python3 v3.py\nworker: python3 w.py\n"})
	v3, err := h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, LaunchRequest{Name: "api", Target: "process", BundleID: bnd})
	h.must(err)
	h.drain()
	if got := h.task(tn.org, v3.ID); got.State != "succeeded" || got.Kind != "deploy" {
		t.Fatalf("relaunch %s %s", got.Kind, got.State)
	}
	q := h.quote(tn, serviceItem("dynamic_service", "process", "api"))
	for _, c := range []struct {
		req  LaunchRequest
		code models.BlockedBy
	}{
		{LaunchRequest{Name: "api", Target: "worker", BundleID: bnd}, "conflict:state"},
		{LaunchRequest{Name: "api", Target: "process", BundleID: bnd, QuoteID: q.ID}, "conflict:quote_mismatch"},
		{LaunchRequest{Name: "api", Target: "process", BundleID: bnd, Domain: "other.dev"}, "conflict:state"},
	} {
		wantCode(t, second2(h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, c.req)), c.code)
	}
	rb, err := h.svc.Runs.Rollback(h.ctx, tn.agent, id, nil)
	h.must(err)
	h.drain()
	if got := h.task(tn.org, rb.ID); got.State != "succeeded" || got.Result["version"] != float64(2) {
		t.Fatalf("rollback %+v", got.Result)
	}
	for _, c := range []struct {
		version *int
		code    models.BlockedBy
	}{{ptr(2), "conflict:state"}, {ptr(99), "not_found:resource"}} {
		wantCode(t, second2(h.svc.Runs.Rollback(h.ctx, tn.agent, id, c.version)), c.code)
	}
	if svc, _ := h.svc.Launches.GetService(h.ctx, tn.org, id); svc.Version != 2 || len(svc.Versions) != 3 {
		t.Fatalf("serving %d of %d", svc.Version, len(svc.Versions))
	}
	h.books(tn.org, tn.project)
}

// A version that never gets healthy fails its launch, refunded in full;
// a failed deploy leaves the serving version serving.
func TestUnhealthyVersions(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(100, DefaultPolicy())
	h.runtime.startErr = &StartError{Reason: "exited 1", Tail: []string{"Traceback", "boom"}}
	task := h.process(tn, "api", "process", "dynamic_service", LaunchRequest{})
	if task.State != "failed" || task.Result["blockedBy"] != "service:unhealthy" || h.remaining(tn.org, tn.project) != 100_000_000 {
		t.Fatalf("launch %s %v, remaining %d", task.State, task.Result, h.remaining(tn.org, tn.project))
	}
	got, _ := h.svc.Tasks.Get(h.ctx, tn.org, task.ID)
	if !strings.Contains(string(got.Remedies), "get_service_logs") {
		t.Fatalf("failed task remedies %s", got.Remedies)
	}
	h.runtime.startErr = nil
	id := h.process(tn, "web", "process", "dynamic_service", LaunchRequest{}).ServiceID
	h.runtime.startErr = &StartError{Reason: "port never opened"}
	v, err := h.svc.Runs.SetEnv(h.ctx, tn.agent, id, EnvChange{Set: map[string]string{"X": "1"}})
	h.must(err)
	h.drain()
	if got := h.task(tn.org, v.ID); got.State != "failed" || got.Result["serving"] != float64(1) {
		t.Fatalf("deploy %s %v", got.State, got.Result)
	}
	if svc, _ := h.svc.Launches.GetService(h.ctx, tn.org, id); svc.State != "live" || svc.Version != 1 {
		t.Fatalf("service %s v%d", svc.State, svc.Version)
	}
	h.books(tn.org, tn.project)
}

// Crash and recovery are recorded on the serving version only; a crashed
// service offers its relaunch and rollback.
func TestHealthAndLogs(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(100, DefaultPolicy())
	id := h.process(tn, "api", "process", "dynamic_service", LaunchRequest{}).ServiceID
	h.svc.Runs.Health(id, 7, Health{State: "crashed"}) // not the serving version
	if svc, _ := h.svc.Launches.GetService(h.ctx, tn.org, id); svc.State != "live" {
		t.Fatalf("state %s", svc.State)
	}
	h.svc.Runs.Health(id, 1, Health{State: "crashed", Restarts: 5, Detail: "exit 1", At: h.clock.Now()})
	svc, _ := h.svc.Launches.GetService(h.ctx, tn.org, id)
	if svc.State != ServiceCrashed || svc.Health.Restarts != 5 || svc.BundleID == "" {
		t.Fatalf("crashed %+v", svc)
	}
	h.svc.Runs.Health(id, 1, Health{State: "healthy"})
	if svc, _ := h.svc.Launches.GetService(h.ctx, tn.org, id); svc.State != "live" {
		t.Fatalf("recovered %s", svc.State)
	}
	for i := range 3 {
		h.svc.Runs.Log(id, 1, "stdout", "line", h.clock.Now().Add(time.Duration(i)))
	}
	h.svc.Runs.FlushNow(h.ctx)
	logs, err := h.svc.Runs.Logs(h.ctx, tn.org, id, LogQuery{Tail: 2})
	h.must(err)
	if len(logs.Lines) != 2 || logs.NextAfter != 3 || logs.ServiceID != id {
		t.Fatalf("logs %+v", logs)
	}
	after, _ := h.svc.Runs.Logs(h.ctx, tn.org, id, LogQuery{After: 3, Wait: time.Millisecond})
	if len(after.Lines) != 0 || after.NextAfter != 3 {
		t.Fatalf("after the end %+v", after)
	}
	go func() {
		sleepABit()
		h.svc.Runs.Log(id, 1, "stderr", "late", h.clock.Now())
		h.svc.Runs.FlushNow(h.ctx)
	}()
	w, err := h.svc.Runs.Logs(h.ctx, tn.org, id, LogQuery{After: 3, Wait: time.Minute})
	if err != nil || len(w.Lines) != 1 || w.Lines[0].Text != "late" || w.Lines[0].Stream != "stderr" {
		t.Fatalf("waited %+v %v", w, err)
	}
}

// A teardown stops what runs and drops the database after dumping it.
func TestProcessTeardown(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(100, DefaultPolicy())
	pg := []string{"managed_postgres"}
	task := h.process(tn, "db", "process", "database_backed_app", LaunchRequest{Addons: pg})
	if task.State != "succeeded" {
		t.Fatalf("launch %+v", task.Steps)
	}
	id := task.ServiceID
	spec, _ := h.runtime.spec(id, 1)
	if spec.Env["DATABASE_URL"] == "" || len(spec.HostServices) != 1 || spec.HostServices[0].Value("10.0.0.1:5432") == "" {
		t.Fatalf("spec %+v", spec)
	}
	exp, err := h.svc.Projects.Export(h.ctx, tn.agent, tn.project)
	h.must(err)
	if !hasFile(exp, "databases/db-"+id+".sql") {
		t.Fatalf("export %+v", exp.Files)
	}
	td, _, err := h.svc.Launches.Teardown(h.ctx, tn.agent, id)
	h.must(err)
	h.drain()
	if got := h.task(tn.org, td.ID); got.State != "succeeded" || len(h.runtime.Running()) != 0 || len(h.dbs.dbs) != 0 {
		t.Fatalf("teardown %+v running %v dbs %v", got.Steps, h.runtime.Running(), h.dbs.dbs)
	}
	exp, _ = h.svc.Projects.Export(h.ctx, tn.agent, tn.project)
	if !hasFile(exp, "databases/db-"+id+".sql") {
		t.Fatal("the dump left the leave package with the database")
	}
	// A worker answers no HTTP: its TLS step checks nothing.
	checks := h.platform.httpsChecks
	if w := h.process(tn, "jobs", "worker", "worker", LaunchRequest{}); w.State != "succeeded" || h.platform.httpsChecks != checks {
		t.Fatalf("worker %s, %d HTTPS checks", w.State, h.platform.httpsChecks-checks)
	}
	if l, _ := h.svc.Tasks.List(h.ctx, tn.org, store.Filter{}); len(l.Items) != 3 || l.Items[0].ServiceName == "" {
		t.Fatalf("tasks %+v", l.Items)
	}
}

func hasFile(p *LeavePackage, path string) bool {
	for _, f := range p.Files {
		if f.Path == path {
			return true
		}
	}
	return false
}
