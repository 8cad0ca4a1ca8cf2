package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/store"
)

// launchSpec is the version a launch request describes: its command (from
// run or the bundle's Procfile), variables, health check and add-ons.
func (s *Launches) launchSpec(ctx context.Context, projectID string, req LaunchRequest, bundle store.Bundle) (versionSpec, error) {
	var spec versionSpec
	target := req.Target
	if !runsProcesses(target) {
		if req.Run != nil || req.Env != nil || req.Secrets != nil || req.HealthCheck != nil || req.Addons != nil {
			return spec, apierr.New("input:invalid", "run, env, secrets, healthCheck and addons are for process and worker targets; an edge launch serves the bundle's files").
				WithField("body.target", "edge takes no command")
		}
		return spec, nil
	}
	if req.Env != nil {
		if err := checkEnvNames("body.env", req.Env); err != nil {
			return spec, err
		}
		spec.Env = req.Env
	}
	if req.Secrets != nil {
		if err := checkEnvNames("body.secrets", req.Secrets); err != nil {
			return spec, err
		}
		for k := range req.Secrets {
			if _, ok := spec.Env[k]; ok {
				return spec, apierr.Newf("input:invalid", "%s is both a variable and a secret; name it once", k).
					WithField("body.secrets."+k, "also in env")
			}
		}
		spec.Secrets = req.Secrets
	}
	if req.Run != nil {
		spec.Run = strings.TrimSpace(*req.Run)
	} else {
		cmd, err := s.runs.procfileCommand(ctx, bundle, target)
		if err != nil {
			return spec, apierr.Internal(err)
		}
		spec.Run = cmd
	}
	if spec.Run == "" {
		return spec, noCommand(target, projectID)
	}
	spec.HealthPath, spec.HealthTimeout, spec.Grace = "/", 60, 3
	if hc := req.HealthCheck; hc != nil {
		if hc.Path != "" {
			spec.HealthPath = hc.Path
		}
		if hc.TimeoutSeconds != 0 {
			spec.HealthTimeout = hc.TimeoutSeconds
		}
		if hc.GraceSeconds != 0 {
			spec.Grace = hc.GraceSeconds
		}
	}
	for _, a := range req.Addons {
		if a == "managed_postgres" {
			if s.databases == nil {
				return spec, addonUnavailable()
			}
			spec.Addons = append(spec.Addons, a)
		}
	}
	return spec, nil
}

func addonUnavailable() *apierr.Error {
	return apierr.New("plan:addon_unavailable", "this deployment offers no managed PostgreSQL: the operator sets --postgres-admin-url (PIER_POSTGRES_ADMIN_URL) to a PostgreSQL URL with the right to create roles and databases").
		WithActions(actions.Manual("configure_postgres", "human"))
}

// relaunch makes the request the service's next version: it starts (for a
// process, until healthy) beside the serving version, takes the traffic,
// and the version before stops once drained. Its undo rolls back.
func (s *Launches) relaunch(ctx context.Context, p *auth.Principal, svc store.Service, req LaunchRequest, spec versionSpec) (*Task, error) {
	if svc.Target != req.Target {
		return nil, apierr.Newf("conflict:state", "service %s runs on %s; a new version must too (tear it down to change its target)", svc.Name, svc.Target).
			WithActions(actions.Tool("teardown_service", "agent", map[string]any{"id": svc.ID}))
	}
	if req.QuoteID != "" {
		return nil, apierr.Newf("conflict:quote_mismatch", "%s already runs; a new version of it is not charged again, so launch it without the quote", svc.Name).
			WithActions(actions.Tool("release_quote", "agent", map[string]any{"id": req.QuoteID}))
	}
	if req.Domain != "" && !strings.EqualFold(req.Domain, svc.Domain) {
		d := strings.ToLower(req.Domain)
		return nil, apierr.Newf("conflict:state", "%s already runs; a new version keeps its domain (%s): attach %s to it (attach_domain), then launch again", svc.Name, orNone(svc.Domain), d).
			WithActions(actions.Tool("attach_domain", "agent", map[string]any{"domain": d, "serviceId": svc.ID}))
	}
	if ServiceState(svc.State) == ServiceLaunching || ServiceState(svc.State) == ServiceTearingDown {
		return nil, apierr.Newf("conflict:state", "service %s is %s; wait for its task, then launch again", svc.Name, svc.State).
			WithActions(actions.Retry("get_task", "agent", map[string]any{"id": svc.TaskID}, 2))
	}
	prev, err := s.store.ServiceVersions().Get(ctx, svc.ID, svc.Version)
	if err == nil && slices.Contains(parseVersionSpec(prev.Spec).Addons, "managed_postgres") && !slices.Contains(spec.Addons, "managed_postgres") {
		spec.Addons = append(spec.Addons, "managed_postgres") // the database stays with the service
	}
	if err := s.meter.refuseGrowthWhenExhausted(ctx, svc, parseVersionSpec(prev.Spec), spec); err != nil {
		return nil, err
	}
	return s.deploy(ctx, p, svc, "deploy", func(tx *store.Tx, number int) (store.ServiceVersion, error) {
		sj, _ := json.Marshal(spec)
		return store.ServiceVersion{ServiceID: svc.ID, OrgID: svc.OrgID, Number: number, BundleID: req.BundleID, Spec: string(sj), State: string(VersionStarting)}, nil
	})
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// deployTasks answers the deploy's task.
type deployTasks interface {
	startedView(t store.Task, m Mutated) (*Task, error)
}

// deploy starts a task that puts a version live: a new one made by mk
// (kind deploy) or an earlier one again (kind rollback, mk returns it).
func (s *deployer) deploy(ctx context.Context, p *auth.Principal, svc0 store.Service, kind string, mk func(tx *store.Tx, next int) (store.ServiceVersion, error)) (*Task, error) {
	var view *Task
	var task store.Task
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		now := s.Now()
		svc, err := tx.Services().Lock(ctx, p.OrgID, svc0.ID)
		if err != nil {
			return err
		}
		if ServiceState(svc.State) != ServiceLive && ServiceState(svc.State) != ServiceCrashed {
			return apierr.Newf("conflict:state", "service %s is %s; only a live or crashed service takes a new version", svc.Name, svc.State).
				WithActions(actions.Tool("get_service", "agent", map[string]any{"id": svc.ID}))
		}
		next, err := tx.ServiceVersions().Next(ctx, svc.ID)
		if err != nil {
			return err
		}
		v, err := mk(tx, next)
		if err != nil {
			return err
		}
		task = store.Task{ID: auth.ID("tsk"), OrgID: p.OrgID, ProjectID: svc.ProjectID, Kind: kind, State: "queued", CreatedAt: now.UTC(), UpdatedAt: now.UTC()}
		if v.Number == next {
			v.TaskID, v.CreatedAt = task.ID, now.UTC()
			if err := tx.ServiceVersions().Insert(ctx, v); err != nil {
				return err
			}
		}
		pl := launchPayload{ServiceID: svc.ID, ProjectID: svc.ProjectID, BundleID: v.BundleID, PreviewHost: svc.PreviewHost, placement: placement{Domain: svc.Domain, Target: svc.Target},
			Owned: svc.Domain != "", Actor: actorOf(p), Version: v.Number, Previous: svc.Version}
		steps := []TaskStep{}
		if pl.runs() {
			steps = append(steps, TaskStep{Name: StepStart, State: "pending"})
		}
		steps = append(steps, TaskStep{Name: StepDeploy, State: "pending"})
		if pl.runs() && pl.Previous > 0 {
			steps = append(steps, TaskStep{Name: StepDrain, State: "pending"})
		}
		action := "launch_service"
		if TaskKind(kind) == TaskKindRollback {
			action = "rollback_service"
		}
		var undo *Reversal
		if svc.Version > 0 {
			undo = reverse("rollback_service", map[string]any{"id": svc.ID, "version": svc.Version})
		}
		proj, err := tx.Projects().Lock(ctx, p.OrgID, svc.ProjectID)
		if err != nil {
			return err
		}
		m := s.mutated(action, nil, []Resource{{Type: "service", ID: svc.ID, URL: s.hostURL("https", svc.PreviewHost)}, {Type: "task", ID: task.ID}},
			undo, remaining(proj))
		pl.Receipt, pl.Undo = &m.Receipt, &m.Undo
		sj, _ := json.Marshal(steps)
		pj, _ := json.Marshal(pl)
		task.Steps, task.Payload = string(sj), string(pj)
		if err := tx.Tasks().Insert(ctx, task); err != nil {
			return err
		}
		// The service keeps its state and serving version until the new
		// one takes the traffic; it points at the task acting on it.
		if err := tx.Services().SetTask(ctx, svc.ID, task.ID, svc.State, now); err != nil {
			return err
		}
		if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: action, ObjectType: "service", ObjectID: svc.ID,
			Details: map[string]any{"taskId": task.ID, "version": v.Number, "previous": svc.Version, "bundleId": v.BundleID}}, now); err != nil {
			return err
		}
		hv, err := s.tasks.startedView(task, m)
		if err != nil {
			return err
		}
		view = hv
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.enqueue(ctx, task.ID, kind)
	return view, nil
}

// runDeploy carries a deploy or rollback task: start the version (a
// process until healthy), switch traffic to it, stop the one before once
// drained. A version that never gets healthy fails the task and the
// serving version keeps serving.
func (s *Launches) runDeploy(ctx context.Context, t store.Task) error {
	var pl launchPayload
	rt, err := s.loadRunning(t, &pl)
	if err != nil {
		return err
	}
	err = rt.do(ctx, &pl, StepStart, func() (string, error) { return s.runs.startStep(ctx, &pl) })
	if err == nil {
		err = rt.do(ctx, &pl, StepDeploy, func() (string, error) { return s.runs.switchTo(ctx, &pl) })
	}
	if err == nil {
		err = rt.do(ctx, &pl, StepDrain, func() (string, error) {
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(s.drain):
			}
			if err := s.runtime.Stop(ctx, pl.ServiceID, pl.Previous); err != nil {
				return "", err
			}
			return fmt.Sprintf("version %d stopped after %s of draining", pl.Previous, s.drain), nil
		})
	}
	if err != nil {
		var e *apierr.Error
		if errors.As(err, &e) && !e.Retryable() && ctx.Err() == nil {
			return s.failDeploy(context.WithoutCancel(ctx), rt, &pl, e)
		}
		return err
	}
	result := map[string]any{"serviceId": pl.ServiceID, "version": pl.Version, "previewUrl": s.hostURL("https", pl.PreviewHost)}
	if pl.Previous > 0 {
		result["previous"] = pl.Previous
	}
	rj, _ := json.Marshal(result)
	rt.t.State, rt.t.Result = "succeeded", string(rj)
	return rt.save(ctx, &pl)
}

// failDeploy ends a deploy or rollback that cannot succeed: its version is
// failed and stopped, and the service goes on serving what it served.
func (s *Launches) failDeploy(ctx context.Context, rt *runningTask, pl *launchPayload, cause *apierr.Error) error {
	if pl.runs() {
		s.runtime.Stop(ctx, pl.ServiceID, pl.Version)
	}
	if TaskKind(rt.t.Kind) == TaskKindDeploy {
		s.store.ServiceVersions().SetState(ctx, pl.ServiceID, pl.Version, string(VersionFailed), firstLine(cause.Message))
	}
	now := s.Now().UTC()
	for i := range rt.steps {
		switch rt.steps[i].State {
		case StepStateRunning:
			rt.steps[i].State, rt.steps[i].CompletedAt, rt.steps[i].Detail = "failed", &now, cause.Message
		case StepStatePending:
			rt.steps[i].State = "skipped"
		}
	}
	result := map[string]any{"serviceId": pl.ServiceID, "version": pl.Version, "blockedBy": string(cause.Code), "message": cause.Message, "retryable": false,
		"chargedUsd": 0, "refundedUsd": 0}
	if pl.Previous > 0 {
		result["serving"] = pl.Previous
	}
	if len(cause.Actions) > 0 {
		result["actions"] = cause.Actions
	}
	rj, _ := json.Marshal(result)
	rt.t.State, rt.t.Result = "failed", string(rj)
	if err := rt.save(ctx, pl); err != nil {
		return err
	}
	_, err := s.store.Ledger().Append(ctx, store.LedgerRecord{OrgID: rt.t.OrgID, Actor: "system", Action: rt.t.Kind + "_failed", ObjectType: "task", ObjectID: rt.t.ID,
		Details: map[string]any{"serviceId": pl.ServiceID, "version": pl.Version, "blockedBy": string(cause.Code)}}, s.Now())
	return err
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// startStep starts the task's version and records where it answers.
func (s *Runs) startStep(ctx context.Context, pl *launchPayload) (string, error) {
	svc, err := s.store.Services().GetAnyOrg(ctx, pl.ServiceID)
	if err != nil {
		return "", err
	}
	v, err := s.store.ServiceVersions().Get(ctx, pl.ServiceID, pl.Version)
	if err != nil {
		return "", err
	}
	addr, err := s.start(ctx, svc, v)
	// The lines the version wrote while starting are readable before the
	// step ends, so a launch that waits on the task can print them.
	s.FlushNow(context.WithoutCancel(ctx))
	if err != nil {
		return "", err
	}
	pl.Addr = addr
	if addr == "" {
		return fmt.Sprintf("version %d running", v.Number), nil
	}
	return fmt.Sprintf("version %d healthy at %s", v.Number, addr), nil
}

// switchTo puts the task's version live: the edge serves its bundle or
// proxies to its process from now on.
func (s *Runs) switchTo(ctx context.Context, pl *launchPayload) (string, error) {
	runner := ""
	if pl.runs() && s.runtime != nil {
		runner = s.runtime.ID()
	}
	if err := s.store.ServiceRuns().Serve(ctx, pl.ServiceID, pl.Version, pl.BundleID, pl.Addr, runner, s.Now()); err != nil {
		return "", err
	}
	if pl.runs() {
		// The version passed its check in the start step: it is healthy.
		hj, _ := json.Marshal(Health{State: "healthy", At: s.Now().UTC()})
		if err := s.store.ServiceRuns().SetHealth(ctx, pl.ServiceID, string(hj), "", s.Now()); err != nil {
			return "", err
		}
		s.invalidate(pl.PreviewHost, pl.Domain)
		return fmt.Sprintf("version %d serves", pl.Version), nil
	}
	s.invalidate(pl.PreviewHost, pl.Domain)
	return fmt.Sprintf("version %d live: bundle %s", pl.Version, pl.BundleID), nil
}

// createDatabase makes the service's database and role: recorded first, so
// a retry creates the same ones.
func (s *Runs) createDatabase(ctx context.Context, orgID, serviceID string) (string, error) {
	if s.databases == nil {
		return "", addonUnavailable()
	}
	sum := sha256.Sum256([]byte(serviceID))
	d := store.ServiceDatabase{ServiceID: serviceID, OrgID: orgID, Name: "pier_" + hex.EncodeToString(sum[:8]), Password: auth.Token(24), State: "creating", CreatedAt: s.Now().UTC()}
	if err := s.store.Services().InsertDatabase(ctx, d); err != nil {
		return "", err
	}
	d, err := s.store.Services().Database(ctx, serviceID)
	if err != nil {
		return "", err
	}
	if err := s.databases.Create(ctx, d.Name, d.Password); err != nil {
		return "", fmt.Errorf("creating the database: %w", err)
	}
	if err := s.store.Services().SetDatabaseState(ctx, serviceID, "ready", ""); err != nil {
		return "", err
	}
	return "database " + d.Name + " ready; DATABASE_URL is set", nil
}

// releaseDatabase dumps the service's database into the blob store (the
// leave package carries the dump), then drops it and its role.
func (s *Runs) releaseDatabase(ctx context.Context, serviceID string) (string, error) {
	d, err := s.store.Services().Database(ctx, serviceID)
	if errors.Is(err, store.ErrNotFound) {
		return "no database", nil
	}
	if err != nil {
		return "", err
	}
	if DatabaseState(d.State) == DatabaseDropped {
		return "database dropped; its dump is in the leave package", nil
	}
	if s.databases == nil {
		return "", addonUnavailable()
	}
	sha := d.DumpSHA
	if sha == "" {
		dump, err := s.databases.Dump(ctx, d.Name)
		if err != nil {
			return "", fmt.Errorf("dumping the database: %w", err)
		}
		sum := sha256.Sum256(dump)
		sha = hex.EncodeToString(sum[:])
		if err := s.store.Bundles().PutBlob(ctx, sha, dump, s.Now()); err != nil {
			return "", err
		}
		if err := s.store.Services().SetDatabaseState(ctx, serviceID, "dumped", sha); err != nil {
			return "", err
		}
	}
	if err := s.databases.Drop(ctx, d.Name); err != nil {
		return "", fmt.Errorf("dropping the database: %w", err)
	}
	if err := s.store.Services().SetDatabaseState(ctx, serviceID, "dropped", sha); err != nil {
		return "", err
	}
	return "database dumped (sha256 " + sha[:12] + "…, in the leave package) and dropped", nil
}

// stopAll stops every version of a service that runs here.
func (s *Runs) stopAll(ctx context.Context, serviceID string) error {
	if s.runtime == nil {
		return nil
	}
	for _, rv := range s.runtime.Running() {
		if rv.ServiceID == serviceID {
			if err := s.runtime.Stop(ctx, serviceID, rv.Version); err != nil {
				return err
			}
		}
	}
	return nil
}

// EnvChange is what set_service_env changes: variables to set, secrets
// to set, and names to unset, whether variables or secrets.
type EnvChange struct {
	Set, Secrets map[string]string
	Unset        []string
}

// SetEnv rolls out a new version with the variables changed.
func (s *Runs) SetEnv(ctx context.Context, p *auth.Principal, id string, req EnvChange) (*Task, error) {
	svc, cur, err := s.currentVersion(ctx, p.OrgID, id)
	if err != nil {
		return nil, err
	}
	if !runsProcesses(svc.Target) {
		return nil, apierr.Newf("conflict:state", "service %s serves static files on %s and runs no process to give variables to", svc.Name, svc.Target)
	}
	spec := parseVersionSpec(cur.Spec)
	spec.Env, spec.Secrets = maps.Clone(spec.Env), maps.Clone(spec.Secrets)
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	if spec.Secrets == nil {
		spec.Secrets = map[string]string{}
	}
	if req.Set != nil {
		if err := checkEnvNames("body.set", req.Set); err != nil {
			return nil, err
		}
		for k, v := range req.Set {
			spec.Env[k] = v
			delete(spec.Secrets, k)
		}
	}
	if req.Secrets != nil {
		if err := checkEnvNames("body.secrets", req.Secrets); err != nil {
			return nil, err
		}
		for k, v := range req.Secrets {
			spec.Secrets[k] = v
			delete(spec.Env, k)
		}
	}
	for _, k := range req.Unset {
		delete(spec.Env, k)
		delete(spec.Secrets, k)
	}
	if len(spec.Env)+len(spec.Secrets) > 200 {
		return nil, apierr.New("input:invalid", "a service has at most 200 variables")
	}
	return s.deploy(ctx, p, svc, "deploy", func(tx *store.Tx, number int) (store.ServiceVersion, error) {
		sj, _ := json.Marshal(spec)
		return store.ServiceVersion{ServiceID: svc.ID, OrgID: svc.OrgID, Number: number, BundleID: cur.BundleID, Spec: string(sj), State: "starting"}, nil
	})
}

// Rollback serves an earlier version again: by default the newest one
// before the serving version that was ever live, or the version given.
func (s *Runs) Rollback(ctx context.Context, p *auth.Principal, id string, version *int) (*Task, error) {
	svc, err := s.store.Services().Get(ctx, p.OrgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierr.Newf("not_found:resource", "no service %s in your organisation", id).WithActions(actions.Tool("list_services", "agent", nil))
	}
	if err != nil {
		return nil, apierr.Internal(err)
	}
	vs, err := s.store.ServiceVersions().List(ctx, svc.ID, 100)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	var target *store.ServiceVersion
	for i := range vs {
		v := &vs[i]
		if version != nil {
			if v.Number == *version {
				target = v
			}
			continue
		}
		if v.Number < svc.Version && VersionState(v.State) == VersionSuperseded {
			target = v
			break
		}
	}
	if target == nil {
		if version != nil {
			return nil, apierr.Newf("not_found:resource", "service %s has no version %d", svc.Name, *version).
				WithActions(actions.Tool("get_service", "agent", map[string]any{"id": svc.ID}))
		}
		return nil, apierr.Newf("conflict:state", "service %s has no earlier version that served to roll back to", svc.Name).
			WithActions(actions.Tool("get_service", "agent", map[string]any{"id": svc.ID}))
	}
	if target.Number == svc.Version {
		return nil, apierr.Newf("conflict:state", "version %d already serves", target.Number).
			WithActions(actions.Tool("get_service", "agent", map[string]any{"id": svc.ID}))
	}
	if VersionState(target.State) == VersionFailed || VersionState(target.State) == VersionStarting {
		return nil, apierr.Newf("conflict:state", "version %d never served (%s); pick one that did", target.Number, target.State).
			WithActions(actions.Tool("get_service", "agent", map[string]any{"id": svc.ID}))
	}
	tv := *target
	return s.deploy(ctx, p, svc, "rollback", func(*store.Tx, int) (store.ServiceVersion, error) { return tv, nil })
}

// versionsView is a service's versions for reads: never a variable's value.
func versionsView(vs []store.ServiceVersion) []Version {
	out := make([]Version, 0, len(vs))
	for _, v := range vs {
		spec := parseVersionSpec(v.Spec)
		out = append(out, Version{Number: v.Number, State: VersionState(v.State), CreatedAt: v.CreatedAt, BundleID: v.BundleID,
			Run: spec.Run, EnvNames: spec.envNames(), TaskID: v.TaskID, Detail: v.Detail})
	}
	return out
}
