package service

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

var serviceNameRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)
})

// launchPayload is what a launch task carries between its steps.
type launchPayload struct {
	ServiceID   string `json:"serviceId"`
	ProjectID   string `json:"projectId"`
	BundleID    string `json:"bundleId"`
	PreviewHost string `json:"previewHost"`
	// The domain, the years it is bought for, and the target.
	placement
	// Gated: the key lacked buy_domain, so registration waits for a human.
	Gated bool `json:"gated,omitempty"`
	// Approval is "", "approved" or "denied".
	Approval string `json:"approval,omitempty"`
	// Owned: the organisation already bought Domain; the launch attaches
	// it without buying.
	Owned bool `json:"owned,omitempty"`
	// AwaitQuote: the launch waits for a human to approve its quote; the
	// approval consumes the quote and queues the task.
	AwaitQuote    bool           `json:"awaitQuote,omitempty"`
	DomainMicro   money.MicroUSD `json:"domainMicroUsd,omitempty"`
	ChargedMicro  money.MicroUSD `json:"chargedMicroUsd"`
	RefundedMicro money.MicroUSD `json:"refundedMicroUsd,omitempty"`
	QuoteID       string         `json:"quoteId,omitempty"`
	Actor         string         `json:"actor"`
	// PurchaseRef is recorded before the registrar is called.
	PurchaseRef string   `json:"purchaseRef,omitempty"`
	Receipt     *Receipt `json:"receipt,omitempty"`
	Undo        *Undoing `json:"undo,omitempty"`
	// Version is the version this task puts live, and Previous the one
	// serving before it (0 for none).
	Version  int `json:"version,omitempty"`
	Previous int `json:"previous,omitempty"`
	// Addr is where the started version answers.
	Addr string `json:"addr,omitempty"`
}

// runs reports whether the launch starts processes.
func (pl *launchPayload) runs() bool { return runsProcesses(pl.Target) }

// buys reports whether the launch buys its domain.
func (pl *launchPayload) buys() bool { return pl.Domain != "" && !pl.Owned }

// serves reports whether the launch attaches its domain.
func (pl *launchPayload) serves() bool {
	return pl.Domain != "" && GateState(pl.Approval) != GateDenied
}

type runningTask struct {
	s     *stepRunner
	t     store.Task
	steps []TaskStep
}

func (rt *runningTask) step(name string) *TaskStep {
	for i := range rt.steps {
		if rt.steps[i].Name == name {
			return &rt.steps[i]
		}
	}
	return nil
}

// save persists the task, its steps and payload.
func (rt *runningTask) save(ctx context.Context, payload any) error {
	sj, _ := json.Marshal(rt.steps)
	pj, _ := json.Marshal(payload)
	rt.t.Steps, rt.t.Payload, rt.t.UpdatedAt = string(sj), string(pj), rt.s.Now().UTC()
	return rt.s.store.Tasks().Update(context.WithoutCancel(ctx), rt.t)
}

// boundary is a test hook: Pause.After names a step after whose save the
// runner stops, so a test can kill the process exactly at a step boundary.
func (rt *runningTask) boundary(ctx context.Context, name string) {
	if rt.s.pause.After == name {
		rt.s.log.Warn("paused at step boundary", "task", rt.t.ID, "step", name)
		<-ctx.Done()
	}
}

// do runs one step unless it is already done, persisting its state around
// the call.
func (rt *runningTask) do(ctx context.Context, payload any, name string, fn func() (string, error)) error {
	st := rt.step(name)
	if st == nil || st.State == StepStateSucceeded || st.State == StepStateSkipped || st.State == StepStateDenied {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	now := rt.s.Now().UTC()
	st.State, st.StartedAt, st.Detail = "running", &now, ""
	rt.t.State = "running"
	if err := rt.save(ctx, payload); err != nil {
		return err
	}
	detail, err := fn()
	if errors.Is(err, errInputRequired) {
		return err
	}
	if err == nil && rt.s.pause.Inside == name {
		// The provider acted but the step is not saved: the worst moment to die.
		rt.s.log.Warn("paused inside step", "task", rt.t.ID, "step", name)
		<-ctx.Done()
		return ctx.Err()
	}
	done := rt.s.Now().UTC()
	if err != nil {
		st.Detail = err.Error()
		rt.save(ctx, payload)
		return err
	}
	st.State, st.CompletedAt, st.Detail = "succeeded", &done, detail
	if err := rt.save(ctx, payload); err != nil {
		return err
	}
	rt.boundary(ctx, name)
	return ctx.Err()
}

var errInputRequired = errors.New("task waits for a human")

// gaveUp is the cause recorded when a transient error outlasted the
// runner's bounded retries.
func gaveUp(cause error) *apierr.Error {
	return apierr.Newf("provider:failed", "the launch kept failing and was stopped after its retries: %v", cause)
}

// domainFree refuses a domain the store says is held: bought by anyone
// (the caller's own organisation included: it needs no second purchase), or
// claimed by a launch in flight.
func (s *Domains) domainFree(ctx context.Context, p *auth.Principal, projectID, domain string) error {
	org, sold, err := s.store.Domains().Holder(ctx, domain)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return apierr.Internal(err)
	}
	if sold && org == p.OrgID {
		return apierr.Newf("plan:domain_unavailable", "your organisation already owns %s; no quote or purchase needed: launch with it or attach it to a service", domain).
			WithActions(actions.Tool("get_domain", "agent", map[string]any{"domain": domain}),
				actions.ToolNeeding("attach_domain", "agent", map[string]any{"domain": domain}, "serviceId"))
	}
	return domainTaken(domain)
}

// ServiceView is a service as the domain shows it: where it serves, what
// runs it and how it is.
type ServiceView struct {
	ID, ProjectID, Name, Target string
	State                       ServiceState
	PreviewURL                  string
	// TaskID is the task that last acted on the service.
	TaskID               string
	CreatedAt, UpdatedAt time.Time
	// Domain and DomainURL are empty for a service with no domain.
	Domain, DomainURL string
	BundleID          string
	// Version is the serving version's number, 0 before the first.
	Version int
	// Health is a process's last health check; nil for edge services.
	Health *Health
	// Sandbox is the isolation a process runs in; nil for edge services.
	Sandbox *Sandbox
	// Versions and Addons are read for one service, not for lists.
	Versions []Version
	Addons   []string
}

// RunsProcesses says the service runs a process or a worker, not files on
// the edge.
func (v ServiceView) RunsProcesses() bool { return runsProcesses(v.Target) }

// Version is one version of a service; it never carries a variable's value.
type Version struct {
	Number    int
	State     VersionState
	CreatedAt time.Time
	BundleID  string
	Run       string
	EnvNames  []string
	TaskID    string
	Detail    string
}

func (s *Launches) serviceView(v store.Service) ServiceView {
	out := ServiceView{
		ID: v.ID, ProjectID: v.ProjectID, Name: v.Name, Target: v.Target, State: ServiceState(v.State),
		PreviewURL: s.hostURL("https", v.PreviewHost), TaskID: v.TaskID, CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt,
		Domain: v.Domain, BundleID: v.BundleID, Version: v.Version,
	}
	if v.Domain != "" {
		out.DomainURL = s.hostURL("https", v.Domain)
	}
	if v.Health != "" && runsProcesses(v.Target) {
		var h Health
		if json.Unmarshal([]byte(v.Health), &h) == nil {
			out.Health = &h
		}
	}
	if runsProcesses(v.Target) && s.runtime != nil {
		if sb, err := s.runtime.Sandbox(); err == nil {
			out.Sandbox = &sb
		}
	}
	return out
}

// serviceDetail is serviceView with the versions and add-ons, for reads
// of one service.
func (s *Launches) serviceDetail(ctx context.Context, v store.Service) (ServiceView, error) {
	out := s.serviceView(v)
	vs, err := s.store.ServiceVersions().List(ctx, v.ID, 20)
	if err != nil {
		return out, err
	}
	out.Versions = versionsView(vs)
	for _, x := range vs {
		if x.Number == v.Version || v.Version == 0 {
			out.Addons = parseVersionSpec(x.Spec).Addons
			break
		}
	}
	return out, nil
}

// ListServices lists the organisation's services.
func (s *Launches) ListServices(ctx context.Context, orgID string, f store.Filter) (*Page[ServiceView], error) {
	vs, err := s.store.Services().List(ctx, orgID, f)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	out := &Page[ServiceView]{Items: []ServiceView{}, Args: f.Args()}
	for _, v := range vs {
		out.Items = append(out.Items, s.serviceView(v))
	}
	if len(vs) > 0 {
		last := vs[len(vs)-1]
		out.NextCursor = nextCursor(f, len(vs), last.CreatedAt, last.ID)
	}
	return out, nil
}

// GetService reads one service.
func (s *Launches) GetService(ctx context.Context, orgID, id string) (*ServiceView, error) {
	v, err := s.store.Services().Get(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierr.Newf("not_found:resource", "no service %s in your organisation", id).
			WithActions(actions.Tool("list_services", "agent", nil))
	}
	if err != nil {
		return nil, apierr.Internal(err)
	}
	out, err := s.serviceDetail(ctx, v)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	return &out, nil
}

// newLaunch are the steps of a request that launches a new service.
type newLaunch struct{ *Launches }

// LaunchRequest asks for a service to be launched, or, when the name runs
// already, for its next version.
type LaunchRequest struct {
	Name, Target string
	// BundleID is the content to serve or run.
	BundleID string
	// Domain is a domain to buy (with the quote) or to attach; empty for
	// none. Years registers a bought one; zero means one.
	Domain string
	Years  int
	// QuoteID prices the launch; empty for none.
	QuoteID string
	// Run, Env, Secrets, HealthCheck and Addons describe a process. An edge
	// launch refuses any of them given, even empty, so nil means absent.
	Run          *string
	Env, Secrets map[string]string
	HealthCheck  *HealthCheck
	Addons       []string
}

// HealthCheck is how a process's health is read; zero fields take the
// defaults (/, 60 seconds, 3 seconds' grace).
type HealthCheck struct {
	Path                         string
	TimeoutSeconds, GraceSeconds int
}

// LaunchService creates the named service and its launch task. A quote, when
// given, is consumed here under the project's lock, in the same transaction
// that records the task: the charge happens exactly once, with the task.
func (s *Launches) Launch(ctx context.Context, p *auth.Principal, projectID string, req LaunchRequest) (*Task, error) {
	bundle, err := newLaunch{s}.checkLaunchRequest(ctx, p, projectID, req)
	if err != nil {
		return nil, err
	}
	spec, err := s.launchSpec(ctx, projectID, req, bundle)
	if err != nil {
		return nil, err
	}
	if existing, err := s.store.Services().ByName(ctx, p.OrgID, projectID, req.Name); err == nil {
		// The name runs already: this launch is its next version.
		return s.relaunch(ctx, p, existing, req, spec)
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, apierr.Internal(err)
	}
	if err := s.projects.checkServiceQuota(ctx, p.OrgID); err != nil {
		return nil, err
	}
	if err := processNeedsQuote(projectID, req, spec); err != nil {
		return nil, err
	}
	domain, owned, err := newLaunch{s}.launchDomain(ctx, p, projectID, req)
	if err != nil {
		return nil, err
	}
	pl := launchPayload{ProjectID: projectID, BundleID: req.BundleID, placement: placement{Domain: domain, Years: max(req.Years, 1), Target: req.Target},
		Owned: owned, Actor: actorOf(p), Gated: domain != "" && !owned && !p.HasScope("buy_domain"), Version: 1}
	var view *Task
	var task store.Task
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		view, task, err = newLaunch{s}.insertLaunch(ctx, tx, p, req, spec, &pl)
		return err
	})
	if e := apierr.As(err); err != nil && e.Code == "plan:domain_unavailable" {
		s.quotes.releaseRefusedQuote(ctx, p, req.QuoteID)
	}
	if err != nil {
		return nil, err
	}
	s.enqueue(ctx, task.ID, "launch")
	return view, nil
}

// checkLaunchRequest checks the name, the target and the bundle, and
// reads the bundle, whose content must all be stored.
func (s newLaunch) checkLaunchRequest(ctx context.Context, p *auth.Principal, projectID string, req LaunchRequest) (store.Bundle, error) {
	if !serviceNameRE().MatchString(req.Name) {
		return store.Bundle{}, apierr.New("input:invalid", "name must be a lowercase label such as site").WithField("body.name", "not a label")
	}
	switch req.Target {
	case "edge":
	case "process", "worker":
		if s.runtime == nil {
			return store.Bundle{}, apierr.Newf("plan:not_implemented", "this deployment runs no processes; use edge for static sites").
				WithActions(actions.Tool("estimate", "agent", map[string]any{"workload": "static_site"}))
		}
		if _, err := s.runtime.Sandbox(); err != nil {
			return store.Bundle{}, sandboxUnavailable(err)
		}
	default:
		return store.Bundle{}, apierr.Newf("plan:unknown_target", "target %q is not launchable; use edge for static sites", req.Target).
			WithField("body.target", "unknown target")
	}
	if req.BundleID == "" {
		return store.Bundle{}, apierr.New("input:invalid", "an edge launch needs bundleId; upload the site first",
			actions.Tool("upload_assets", "agent", map[string]any{"projectId": projectID})).
			WithField("body.bundleId", "missing")
	}
	bundle, err := s.store.Bundles().Root(ctx, p.OrgID, req.BundleID)
	if errors.Is(err, store.ErrNotFound) {
		return bundle, notInOrg("bundle", req.BundleID, "list_bundles").WithField("body.bundleId", "no such bundle")
	} else if err != nil {
		return bundle, apierr.Internal(err)
	}
	return bundle, checkStored(ctx, s.store, p, projectID, bundle)
}

// processNeedsQuote refuses a first process or worker launch without a
// quote: it runs for a price by the month.
func processNeedsQuote(projectID string, req LaunchRequest, spec versionSpec) error {
	if !runsProcesses(req.Target) || req.QuoteID != "" {
		return nil
	}
	workload := "dynamic_service"
	switch {
	case req.Target == "worker":
		workload = "worker"
	case slices.Contains(spec.Addons, "managed_postgres"):
		workload = "database_backed_app"
	}
	items := []any{map[string]any{"kind": "service", "workload": workload, "target": req.Target, "name": req.Name, "months": 1}}
	if req.Domain != "" {
		items = append(items, map[string]any{"kind": "domain", "domain": req.Domain, "years": 1})
	}
	return apierr.Newf("budget:insufficient", "a %s launch runs for a price by the month: quote it first, then launch with the quote", req.Target).
		WithActions(actions.Tool("create_quote", "agent", map[string]any{"projectId": projectID, "items": items}))
}

// launchDomain is the launch's domain and whether the organisation owns it
// already (then the launch attaches it, no quote or purchase needed). A
// domain someone else holds is refused; one to buy needs a quote.
func (s newLaunch) launchDomain(ctx context.Context, p *auth.Principal, projectID string, req LaunchRequest) (string, bool, error) {
	if req.Domain == "" {
		return "", false, nil
	}
	domain := strings.ToLower(req.Domain)
	org, sold, err := s.store.Domains().Holder(ctx, domain)
	switch {
	case err == nil && sold && org == p.OrgID:
		return domain, true, nil
	case err == nil:
		s.quotes.releaseRefusedQuote(ctx, p, req.QuoteID)
		return "", false, domainTaken(domain)
	case !errors.Is(err, store.ErrNotFound):
		return "", false, apierr.Internal(err)
	}
	if req.QuoteID == "" {
		return "", false, apierr.New("budget:insufficient", "a launch that registers a domain needs a quote that holds its price",
			actions.Tool("create_quote", "agent", map[string]any{"projectId": projectID,
				"items": []any{map[string]any{"kind": "domain", "domain": domain, "years": 1}}}))
	}
	return domain, false, nil
}

// chargeLaunch consumes the launch's quote, if any, and says what it
// costs and what budget remains; wait is the quote's gate when a human
// must approve it first.
func (s newLaunch) chargeLaunch(ctx context.Context, tx *store.Tx, p *auth.Principal, req LaunchRequest, spec versionSpec, pl *launchPayload) (costs []Cost, remainingMicro money.MicroUSD, wait *awaitApproval, err error) {
	if req.QuoteID == "" {
		proj, err := tx.Projects().Lock(ctx, p.OrgID, pl.ProjectID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, 0, nil, projectNotFound(pl.ProjectID)
		}
		if err != nil {
			return nil, 0, nil, err
		}
		return nil, remaining(proj), nil, nil
	}
	c, err := s.quotes.Consume(ctx, tx, p, pl.ProjectID, req.QuoteID)
	if errors.As(err, &wait) {
		c, err = s.quotes.awaitedQuote(ctx, tx, p, pl.ProjectID, req.QuoteID)
	}
	if err != nil {
		return nil, 0, nil, err
	}
	asked := quotedLaunch{Target: req.Target, Name: req.Name, BundleID: req.BundleID, Years: req.Years}
	if err := matchQuote(pl.ProjectID, c, asked, pl.Domain, pl.Owned, spec.Addons); err != nil {
		return nil, 0, nil, err
	}
	for _, it := range c.Items {
		costs = append(costs, Cost{Item: it.label(), Amount: it.AmountMicro})
		if it.Kind == ItemDomain && it.Domain == pl.Domain {
			pl.DomainMicro, pl.Years = it.AmountMicro, it.Years
		}
	}
	pl.ChargedMicro, pl.QuoteID = c.AmountMicro, c.QuoteID
	if wait != nil {
		pl.ChargedMicro, pl.AwaitQuote = 0, true
	}
	return costs, c.RemainingMicro, wait, nil
}

// claimLaunchHosts gives the new service its hosts: one owner per host,
// the preview host, and the domain with www. under it, from now until it
// fails or is torn down. A domain to buy is claimed for the launch too.
func (s newLaunch) claimLaunchHosts(ctx context.Context, tx *store.Tx, p *auth.Principal, svc store.Service, pl *launchPayload, taskID string) error {
	now := s.Now()
	if err := tx.Services().ClaimHost(ctx, svc.PreviewHost, svc.ID, p.OrgID, now); errors.Is(err, store.ErrConflict) {
		return apierr.Newf("conflict:state", "another service answers for %s; tear it down or pick another name", svc.PreviewHost)
	} else if err != nil {
		return err
	}
	if pl.Domain == "" {
		return nil
	}
	for _, h := range []string{pl.Domain, "www." + pl.Domain} {
		err := tx.Services().ClaimHost(ctx, h, svc.ID, p.OrgID, now)
		if errors.Is(err, store.ErrConflict) && pl.Owned {
			relaunch := map[string]any{"id": pl.ProjectID, "name": svc.Name, "target": svc.Target, "bundleId": pl.BundleID, "domain": pl.Domain}
			return s.domainHeldBy(ctx, tx, p.OrgID, pl.Domain, "launch_service", relaunch)
		}
		if errors.Is(err, store.ErrConflict) {
			return domainTaken(pl.Domain)
		}
		if err != nil {
			return err
		}
	}
	if pl.Owned {
		return nil
	}
	if err := tx.Domains().Claim(ctx, pl.Domain, p.OrgID, taskID, now); errors.Is(err, store.ErrConflict) {
		return domainTaken(pl.Domain)
	} else {
		return err
	}
}

// launchStepList is a new service's launch steps.
func launchStepList(pl *launchPayload, spec versionSpec, wait *awaitApproval, now time.Time) []TaskStep {
	steps := []TaskStep{{Name: StepCharge, State: "succeeded", CompletedAt: ptr(now.UTC()), Detail: fmt.Sprintf("%.2f USD", usd(pl.ChargedMicro))}}
	if wait != nil {
		steps[0] = TaskStep{Name: StepCharge, State: "input_required", StartedAt: ptr(now.UTC()),
			Detail: fmt.Sprintf("a human must approve quote %s (%.2f USD) before it is charged", wait.QuoteID, usd(wait.AmountMicro))}
	}
	register, dns := StepStatePending, StepStatePending
	switch {
	case pl.Domain == "":
		register, dns = StepStateSkipped, StepStateSkipped
	case pl.Owned:
		register = StepStateSkipped
	}
	steps = append(steps, TaskStep{Name: StepRegister, State: register}, TaskStep{Name: StepDNS, State: dns})
	if pl.Owned {
		steps[1].Detail = pl.Domain + " is already yours; nothing bought"
	}
	if pl.runs() {
		database := StepStateSkipped
		if slices.Contains(spec.Addons, "managed_postgres") {
			database = StepStatePending
		}
		steps = append(steps, TaskStep{Name: StepDatabase, State: database}, TaskStep{Name: StepStart, State: "pending"})
	}
	return append(steps, TaskStep{Name: StepDeploy, State: "pending"}, TaskStep{Name: StepTLS, State: "pending"})
}

// insertLaunch charges the launch and records its service, first
// version, task and ledger entry, in the caller's transaction.
func (s newLaunch) insertLaunch(ctx context.Context, tx *store.Tx, p *auth.Principal, req LaunchRequest, spec versionSpec, pl *launchPayload) (*Task, store.Task, error) {
	now := s.Now()
	costs, remainingMicro, wait, err := s.chargeLaunch(ctx, tx, p, req, spec, pl)
	if err != nil {
		return nil, store.Task{}, err
	}
	svc := store.Service{ID: auth.ID("svc"), OrgID: p.OrgID, ProjectID: pl.ProjectID, Name: req.Name, Target: req.Target,
		PreviewHost: s.PreviewHost(req.Name, pl.ProjectID), Domain: pl.Domain, BundleID: pl.BundleID, State: "launching",
		CreatedAt: now.UTC(), UpdatedAt: now.UTC()}
	pl.ServiceID, pl.PreviewHost = svc.ID, svc.PreviewHost
	task := store.Task{ID: auth.ID("tsk"), OrgID: p.OrgID, ProjectID: pl.ProjectID, Kind: "launch", State: "queued", CreatedAt: now.UTC(), UpdatedAt: now.UTC()}
	svc.TaskID = task.ID
	if err := tx.Services().Insert(ctx, svc); errors.Is(err, store.ErrConflict) {
		return nil, task, apierr.Newf("conflict:state", "the project already has a service named %s; tear it down or pick another name", req.Name)
	} else if err != nil {
		return nil, task, err
	}
	if err := s.claimLaunchHosts(ctx, tx, p, svc, pl, task.ID); err != nil {
		return nil, task, err
	}
	if wait != nil {
		task.State, task.GateID = "input_required", wait.GateID
	}
	sj, _ := json.Marshal(spec)
	if err := tx.ServiceVersions().Insert(ctx, store.ServiceVersion{ServiceID: svc.ID, OrgID: p.OrgID, Number: 1, BundleID: pl.BundleID,
		Spec: string(sj), State: "starting", TaskID: task.ID, CreatedAt: now.UTC()}); err != nil {
		return nil, task, err
	}
	m := s.mutated("launch_service", costs, []Resource{
		{Type: "service", ID: svc.ID, URL: s.hostURL("https", svc.PreviewHost)}, {Type: "task", ID: task.ID},
	}, reverse("teardown_service", map[string]any{"id": svc.ID}), remainingMicro)
	if pl.buys() {
		// Teardown stops serving; it cannot unbuy the domain.
		m.Undo.Irreversible = true
		m.Undo.NotReversed = []string{"domain_registration:" + pl.Domain}
	}
	pl.Receipt, pl.Undo = &m.Receipt, &m.Undo
	stj, _ := json.Marshal(launchStepList(pl, spec, wait, now))
	pj, _ := json.Marshal(pl)
	task.Steps, task.Payload = string(stj), string(pj)
	if err := tx.Tasks().Insert(ctx, task); err != nil {
		return nil, task, err
	}
	if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: "launch_service", ObjectType: "service", ObjectID: svc.ID,
		Details: map[string]any{"taskId": task.ID, "name": req.Name, "projectId": pl.ProjectID, "bundleId": pl.BundleID, "domain": pl.Domain,
			"chargedMicroUsd": pl.ChargedMicro, "quoteId": pl.QuoteID, "awaitingApproval": pl.AwaitQuote}}, now); err != nil {
		return nil, task, err
	}
	v, err := s.tasks.startedView(task, m)
	if err != nil {
		return nil, task, err
	}
	return v, task, nil
}

// RunTask carries a task forward; the durable runner calls it, and calls it
// again after a crash. Every step is safe to repeat.
func (s *Launches) RunTask(ctx context.Context, taskID string) error {
	t, err := s.store.Tasks().GetAnyOrg(ctx, taskID)
	if err != nil {
		return err
	}
	switch TaskState(t.State) {
	case TaskSucceeded, TaskFailed, TaskCanceled, TaskInputRequired:
		return nil
	}
	switch TaskKind(t.Kind) {
	case TaskKindLaunch:
		return s.runLaunch(ctx, t)
	case TaskKindDeploy, TaskKindRollback:
		return s.runDeploy(ctx, t)
	case TaskKindTeardown:
		return s.runTeardown(ctx, t)
	case TaskKindEmailSetup:
		return s.mail.runSetup(ctx, t)
	}
	return fmt.Errorf("task %s: kind %q has no runner", t.ID, t.Kind)
}

func (s *stepRunner) loadRunning(t store.Task, payload any) (*runningTask, error) {
	rt := &runningTask{s: s, t: t}
	if err := json.Unmarshal([]byte(t.Steps), &rt.steps); err != nil {
		return nil, err
	}
	return rt, json.Unmarshal([]byte(t.Payload), payload)
}

func (s *Launches) runLaunch(ctx context.Context, t store.Task) error {
	var pl launchPayload
	rt, err := s.loadRunning(t, &pl)
	if err != nil {
		return err
	}
	rt.boundary(ctx, StepCharge)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	err = rt.do(ctx, &pl, StepRegister, func() (string, error) { return s.registerDomain(ctx, rt, &pl) })
	if errors.Is(err, errInputRequired) {
		return nil
	}
	if err == nil {
		err = rt.do(ctx, &pl, StepDNS, func() (string, error) { return s.publishZone(ctx, rt.t.OrgID, pl.Domain) })
	}
	if err == nil && pl.runs() {
		err = rt.do(ctx, &pl, StepDatabase, func() (string, error) { return s.runs.createDatabase(ctx, rt.t.OrgID, pl.ServiceID) })
		if err == nil {
			err = rt.do(ctx, &pl, StepStart, func() (string, error) { return s.runs.startStep(ctx, &pl) })
		}
	}
	if err == nil {
		err = rt.do(ctx, &pl, StepDeploy, func() (string, error) { return s.runs.switchTo(ctx, &pl) })
	}
	if err == nil {
		err = rt.do(ctx, &pl, StepTLS, func() (string, error) { return s.makeHTTPSReady(ctx, &pl) })
	}
	if err != nil {
		// A typed error that retrying cannot mend ends the task now; anything
		// else is transient and the runner retries it with bounded backoff.
		var e *apierr.Error
		if errors.As(err, &e) && !e.Retryable() && ctx.Err() == nil {
			if ferr := s.failLaunch(context.WithoutCancel(ctx), rt.t.ID, e); ferr != nil {
				return ferr
			}
			rt.boundary(ctx, "failed")
			return nil
		}
		return err
	}
	result := map[string]any{"serviceId": pl.ServiceID, "previewUrl": s.hostURL("https", pl.PreviewHost),
		"httpsReady": map[string]any{"preview": true, "domain": pl.serves()}}
	if pl.serves() {
		result["domainUrl"] = s.hostURL("https", pl.Domain)
	}
	if GateState(pl.Approval) == GateDenied {
		result["domain"] = "registration of " + pl.Domain + " denied by a human: not bought, not attached, its price refunded"
	}
	rj, _ := json.Marshal(result)
	rt.t.State, rt.t.Result = "succeeded", string(rj)
	if err := rt.save(ctx, &pl); err != nil {
		return err
	}
	return s.store.InTx(context.WithoutCancel(ctx), func(tx *store.Tx) error {
		if err := tx.Domains().ReleaseClaims(ctx, rt.t.ID); err != nil {
			return err
		}
		_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: rt.t.OrgID, Actor: "system", Action: "launch_succeeded", ObjectType: "task", ObjectID: rt.t.ID,
			Details: map[string]any{"serviceId": pl.ServiceID, "previewHost": pl.PreviewHost, "domain": pl.Domain}}, s.Now())
		return err
	})
}

// registerDomain buys the domain once. Without buy_domain it first waits for
// a human: the step and task go to input_required on a gate, and the
// decision re-enqueues the task.
func (s *Launches) registerDomain(ctx context.Context, rt *runningTask, pl *launchPayload) (string, error) {
	if pl.Gated && pl.Approval == "" {
		if rt.t.GateID == "" {
			err := s.store.InTx(ctx, func(tx *store.Tx) error {
				p := &auth.Principal{Kind: "system", OrgID: rt.t.OrgID}
				now := s.Now()
				body, _ := json.Marshal(map[string]any{"taskId": rt.t.ID, "domain": pl.Domain, "years": pl.Years,
					"projectId": pl.ProjectID, "amountMicroUsd": pl.DomainMicro, "requestedBy": pl.Actor})
				gateID := auth.ID("gat")
				if err := tx.Gates().Insert(ctx, store.Gate{ID: gateID, OrgID: rt.t.OrgID, TaskID: rt.t.ID, Kind: "domain_registration", Payload: string(body), CreatedAt: now.UTC()}); err != nil {
					return err
				}
				rt.t.GateID = gateID
				_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: "system", Action: "open_gate", ObjectType: "gate", ObjectID: gateID,
					Details: map[string]any{"kind": "domain_registration", "taskId": rt.t.ID, "domain": pl.Domain}}, now)
				return err
			})
			if err != nil {
				return "", err
			}
		}
		st := rt.step(StepRegister)
		st.State, st.Detail = "input_required", "a human must approve buying "+pl.Domain
		rt.t.State = "input_required"
		if err := rt.save(ctx, pl); err != nil {
			return "", err
		}
		return "", errInputRequired
	}
	if GateState(pl.Approval) == GateDenied {
		return "denied by a human; not bought", nil
	}
	if err := s.recheckDomain(ctx, rt, pl); err != nil {
		return "", err
	}
	if pl.PurchaseRef == "" {
		// Record the reference before calling the registrar, so that a
		// retry asks for the same purchase instead of making another.
		pl.PurchaseRef = rt.t.ID
		if err := rt.save(ctx, pl); err != nil {
			return "", err
		}
	}
	purchase, err := s.store.Domains().RecordPurchase(ctx, store.Purchase{Ref: pl.PurchaseRef, Domain: pl.Domain, OrgID: rt.t.OrgID, Years: pl.Years,
		AmountMicro: pl.DomainMicro, AuthCode: auth.Token(12), CreatedAt: s.Now().UTC()})
	if errors.Is(err, store.ErrConflict) {
		return "", apierr.Newf("plan:domain_unavailable", "%s was sold to someone else before this launch could buy it", pl.Domain)
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("registered %s for %d year(s) (ref %s)", purchase.Domain, purchase.Years, purchase.Ref), nil
}

// publishZone points the domain's web names at the edge; the zone's mail
// records, the email setup's, stay (and come back if a teardown before
// had lost them).
func (s *Launches) publishZone(ctx context.Context, orgID, domain string) (string, error) {
	mail, n, err := s.syncZone(ctx, orgID, domain, true)
	if err != nil {
		return "", err
	}
	if mail {
		return fmt.Sprintf("zone %s with %d records, its mail records kept", domain, n), nil
	}
	return fmt.Sprintf("zone %s with %d records", domain, n), nil
}

func (s *Launches) makeHTTPSReady(ctx context.Context, pl *launchPayload) (string, error) {
	// Certificates only for the hosts this service holds: a host another
	// service owns, or a denied domain, gets none.
	hosts, err := s.store.Services().Hosts(ctx, pl.ServiceID)
	if err != nil {
		return "", err
	}
	if !slices.Contains(hosts, pl.PreviewHost) {
		s.log.Warn("service does not hold its preview host", "service", pl.ServiceID, "host", pl.PreviewHost, "held", hosts)
		return "", fmt.Errorf("service %s does not hold %s yet", pl.ServiceID, pl.PreviewHost)
	}
	slices.SortFunc(hosts, func(a, b string) int { return cmp.Compare(len(a), len(b)) })
	for _, h := range hosts {
		if err := s.platform.Certificate(h); err != nil {
			return "", fmt.Errorf("certificate for %s: %w", h, err)
		}
		if pl.Target == "worker" {
			continue // a worker answers no HTTP; its hosts get certificates all the same
		}
		vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := s.platform.VerifyHTTPS(vctx, h)
		cancel()
		if err != nil {
			return "", fmt.Errorf("https://%s not served yet: %w", h, err)
		}
	}
	return "HTTPS ready: " + strings.Join(hosts, ", "), nil
}

// FailTask marks a task failed after its runner gave up on it. A launch
// ends as any permanent failure does: refunded, its service retired.
func (s *Launches) FailTask(ctx context.Context, taskID string, cause error) {
	t, err := s.store.Tasks().GetAnyOrg(ctx, taskID)
	if err != nil {
		s.log.Error("failing task", "task", taskID, "err", err)
		return
	}
	if TaskKind(t.Kind) == TaskKindLaunch {
		if err := s.failLaunch(ctx, taskID, gaveUp(cause)); err != nil {
			s.log.Error("failing task", "task", taskID, "err", err)
		}
		return
	}
	rj, _ := json.Marshal(map[string]any{"error": cause.Error(), "blockedBy": "provider:failed", "retryable": false})
	t.State, t.Result, t.UpdatedAt = "failed", string(rj), s.Now().UTC()
	if err := s.store.Tasks().Update(ctx, t); err != nil {
		s.log.Error("failing task", "task", taskID, "err", err)
	}
}

// recheckDomain runs right before the purchase: the name must still be
// sellable, held by nobody else, and at the price the quote held. Each
// refusal is permanent and ends the task.
func (s *Launches) recheckDomain(ctx context.Context, rt *runningTask, pl *launchPayload) error {
	if pl.PurchaseRef != "" {
		// A retry after the registrar already sold it to us is no conflict.
		if pu, err := s.store.Domains().PurchaseByRef(ctx, pl.PurchaseRef); err == nil && pu.Domain == pl.Domain {
			return nil
		}
	}
	org, sold, err := s.store.Domains().Holder(ctx, pl.Domain)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if err == nil && (sold || org != rt.t.OrgID) {
		return apierr.Newf("plan:domain_unavailable", "%s was registered by someone else before this launch could buy it", pl.Domain)
	}
	current, err := priceDomain(s.prices, strings.ToLower(pl.Domain), max(pl.Years, 1))
	if err != nil {
		return err
	}
	if pl.DomainMicro > 0 && current.AmountMicro != pl.DomainMicro {
		return apierr.Newf("plan:price_changed", "%s now costs %s USD, not the %s USD quoted", pl.Domain, current.AmountMicro.Decimal(), pl.DomainMicro.Decimal())
	}
	return nil
}

// failLaunch ends a launch task for good (state failed, or canceled when
// its service was torn down while it waited): in one transaction it
// refunds everything charged except a domain already bought, retires the
// service (its name and hosts are free again), drops its domain claim, and
// records the typed cause with a receipt of what was charged and refunded.
// A task already finished is left alone, so a retry after a crash refunds
// nothing twice.
func (s *Launches) failLaunch(ctx context.Context, taskID string, cause *apierr.Error) error {
	return s.endLaunch(ctx, taskID, "failed", cause)
}

func (s *Launches) endLaunch(ctx context.Context, taskID, state string, cause *apierr.Error) error {
	t0, err := s.store.Tasks().GetAnyOrg(ctx, taskID)
	if err != nil {
		return err
	}
	var pl launchPayload
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		return s.endLaunchTx(ctx, tx, t0.OrgID, taskID, state, cause, &pl)
	})
	if err != nil {
		return err
	}
	s.invalidate(pl.PreviewHost, pl.Domain)
	if pl.runs() {
		// Nothing of a failed launch keeps running or holds a database.
		if err := s.runs.stopAll(ctx, pl.ServiceID); err != nil {
			s.log.Warn("stopping a failed launch", "service", pl.ServiceID, "err", err)
		}
		s.store.ServiceVersions().SetState(ctx, pl.ServiceID, pl.Version, "failed", firstLine(cause.Message))
		if _, err := s.runs.releaseDatabase(ctx, pl.ServiceID); err != nil {
			s.log.Warn("dropping a failed launch's database", "service", pl.ServiceID, "err", err)
		}
	}
	return nil
}

func (s *Launches) endLaunchTx(ctx context.Context, tx *store.Tx, orgID, taskID, state string, cause *apierr.Error, pl *launchPayload) error {
	now := s.Now()
	t, err := tx.Tasks().Lock(ctx, orgID, taskID)
	if err != nil {
		return err
	}
	switch TaskState(t.State) {
	case TaskSucceeded, TaskFailed, TaskCanceled:
		return nil
	}
	if err := json.Unmarshal([]byte(t.Payload), pl); err != nil {
		return err
	}
	var steps []TaskStep
	if err := json.Unmarshal([]byte(t.Steps), &steps); err != nil {
		return err
	}
	bought := false
	if pl.PurchaseRef != "" {
		if pu, err := s.store.Domains().PurchaseByRef(ctx, pl.PurchaseRef); err == nil && pu.OrgID == t.OrgID && pu.Domain == pl.Domain {
			bought = true
		}
	}
	if err := refundLaunch(ctx, tx, t, pl, bought, state, cause, now); err != nil {
		return err
	}
	if err := tx.Services().Retire(ctx, pl.ServiceID, "failed", now); err != nil {
		return err
	}
	if err := tx.Domains().ReleaseClaims(ctx, t.ID); err != nil {
		return err
	}
	endSteps(steps, cause, now)
	result := failedLaunchResult(pl, cause, bought)
	sj, _ := json.Marshal(steps)
	pj, _ := json.Marshal(pl)
	rj, _ := json.Marshal(result)
	t.State, t.Steps, t.Payload, t.Result, t.UpdatedAt = state, string(sj), string(pj), string(rj), now.UTC()
	if err := tx.Tasks().Update(ctx, t); err != nil {
		return err
	}
	_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: t.OrgID, Actor: "system", Action: "launch_" + state, ObjectType: "task", ObjectID: t.ID,
		Details: map[string]any{"serviceId": pl.ServiceID, "blockedBy": string(cause.Code), "refundedMicroUsd": pl.RefundedMicro, "domain": pl.Domain}}, now)
	return err
}

// refundLaunch gives back what a launch that ended without serving
// charged, but for a domain the registrar sold, and makes its receipt say
// what was kept.
func refundLaunch(ctx context.Context, tx *store.Tx, t store.Task, pl *launchPayload, bought bool, state string, cause *apierr.Error, now time.Time) error {
	refund := pl.ChargedMicro - pl.RefundedMicro
	if bought && GateState(pl.Approval) != GateDenied {
		refund -= pl.DomainMicro
	}
	if refund > 0 {
		if _, err := tx.Projects().Lock(ctx, t.OrgID, pl.ProjectID); err != nil {
			return err
		}
		if err := tx.Projects().MoveMoney(ctx, pl.ProjectID, 0, -refund); err != nil {
			return err
		}
		if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: t.OrgID, Actor: "system", Action: "refund", ObjectType: "task", ObjectID: t.ID,
			Details: map[string]any{"projectId": pl.ProjectID, "amountMicroUsd": refund, "reason": "launch " + state + ": " + string(cause.Code)}}, now); err != nil {
			return err
		}
		pl.RefundedMicro += refund
	}
	if pl.Receipt != nil {
		// The receipt says what was kept: a bought domain, nothing else.
		var kept money.MicroUSD
		for i, c := range pl.Receipt.Costs {
			if bought && c.Item == "domain:"+pl.Domain {
				kept += c.Amount
				continue
			}
			pl.Receipt.Costs[i].Amount = 0
		}
		pl.Receipt.Total = kept
	}
	if !bought && pl.Undo != nil {
		pl.Undo.Irreversible, pl.Undo.NotReversed = false, nil
	}
	return nil
}

// endSteps fails the step at work and skips those not reached.
func endSteps(steps []TaskStep, cause *apierr.Error, now time.Time) {
	for i := range steps {
		switch steps[i].State {
		case StepStateRunning, StepStateInputRequired:
			steps[i].State, steps[i].CompletedAt, steps[i].Detail = "failed", ptr(now.UTC()), cause.Message
		case StepStatePending:
			steps[i].State = "skipped"
		}
	}
}

// failedLaunchResult is a failed or canceled launch task's result.
func failedLaunchResult(pl *launchPayload, cause *apierr.Error, bought bool) map[string]any {
	result := map[string]any{
		"serviceId": pl.ServiceID, "blockedBy": string(cause.Code), "message": cause.Message, "retryable": false,
		"chargedUsd": usd(pl.ChargedMicro - pl.RefundedMicro), "refundedUsd": usd(pl.RefundedMicro),
	}
	if len(cause.Actions) > 0 {
		result["actions"] = cause.Actions
	}
	if bought {
		result["notReversed"] = []map[string]any{{"what": "domain_registration", "domain": pl.Domain, "why": "the registrar sold it before the launch failed; it stays yours"}}
	}
	return result
}

// Launch step names, in order. A process or worker launch runs database
// (for the managed_postgres add-on) and start (until healthy) before
// deploy switches traffic to it.
const (
	StepCharge   = "charge"
	StepRegister = "register_domain"
	StepDNS      = "dns"
	StepDatabase = "database"
	StepStart    = "start"
	StepDeploy   = "deploy"
	StepTLS      = "tls"
	// StepDrain stops the version that served before, once its requests
	// drained.
	StepDrain = "drain"
)

// Teardown step names.
const (
	StepUndeploy     = "undeploy"
	StepStop         = "stop"
	StepDropDatabase = "drop_database"
	StepRemoveZone   = "remove_zone"
)

// checkStored refuses a bundle whose content is not all stored: a launch
// that would serve 503s for lost content is refused before anything
// starts. Content is lost only by deletion from blobs, which the store
// counts (Losses): a bundle checked at the count there is now, when it
// was made (its own content, or its base's and its changes') or at an
// earlier launch, names nothing lost, and its manifest is not read again.
// Otherwise every content is looked up, in one query, and the bundle
// marked checked at the count read before.
func checkStored(ctx context.Context, st bundlesStore, p *auth.Principal, projectID string, bundle store.Bundle) error {
	losses, err := st.Bundles().Losses(ctx)
	if err != nil {
		return apierr.Internal(err)
	}
	if bundle.Checked && bundle.CheckedLosses == losses {
		return nil
	}
	missing, err := st.Bundles().BundleMissingBlobs(ctx, p.OrgID, bundle.ID)
	if err != nil {
		return apierr.Internal(err)
	}
	if len(missing) > 0 {
		return blobsMissing(projectID, "body.bundleId", missing, fmt.Sprintf("%d of bundle %s's contents are no longer stored; upload them again with upload_blob (find_missing_blobs with the bundle's manifest lists them), then launch again",
			len(missing), bundle.ID))
	}
	if err := st.Bundles().MarkChecked(ctx, p.OrgID, bundle.ID, losses); err != nil {
		return apierr.Internal(err)
	}
	return nil
}
