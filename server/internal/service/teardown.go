package service

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/store"
)

type teardownPayload struct {
	ServiceID   string `json:"serviceId"`
	PreviewHost string `json:"previewHost"`
	Domain      string `json:"domain,omitempty"`
	Actor       string `json:"actor"`
	// LaunchTaskID is the task that launched the service, whose domain
	// claim the teardown gives back.
	LaunchTaskID string `json:"launchTaskId,omitempty"`
	Target       string `json:"target,omitempty"`
	// MailKept: the domain's zone has mail records of its email setup,
	// which the teardown keeps.
	MailKept bool     `json:"mailKept,omitempty"`
	Receipt  *Receipt `json:"receipt,omitempty"`
	Undo     *Undoing `json:"undo,omitempty"`
}

// teardowns are the steps of a teardown request and task.
type teardowns struct{ *Launches }

// launchTasks answers the tasks of launches and teardowns.
type launchTasks interface {
	startedView(t store.Task, m Mutated) (*Task, error)
	taskView(t store.Task) (*Task, error)
}

// TeardownService stops serving a service as a durable task. What cannot be
// reversed is named in the receipt: a registered domain stays registered.
// What is kept on purpose is named too: the zone's mail records belong to
// the domain's email setup, not to the service, and stay.
// A service already torn down (or tearing down) answers its teardown task
// again, replayed, so a script that tears down twice sees success. A
// failed service is torn down too, which retires it.
func (s *Launches) Teardown(ctx context.Context, p *auth.Principal, serviceID string) (*Task, bool, error) {
	var view *Task
	var task store.Task
	replayed := false
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		svc, err := tx.Services().Lock(ctx, p.OrgID, serviceID)
		if errors.Is(err, store.ErrNotFound) {
			return notInOrg("service", serviceID, "list_services")
		}
		if err != nil {
			return err
		}
		if prev, ok := (teardowns{s}).teardownUnderWay(ctx, tx, p, svc); ok {
			view, task, replayed = prev, store.Task{ID: svc.TaskID, State: string(prev.State)}, true
			return nil
		}
		tearing, err := teardowns{s}.teardownFrom(ctx, tx, p, &svc)
		if err != nil {
			return err
		}
		view, task, err = teardowns{s}.insertTeardown(ctx, tx, p, svc, tearing)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if !replayed {
		s.enqueue(ctx, task.ID, "teardown")
	}
	return view, replayed, nil
}

// teardownUnderWay is the teardown task of a service already torn down,
// tearing down or failed after a teardown.
func (s teardowns) teardownUnderWay(ctx context.Context, tx *store.Tx, p *auth.Principal, svc store.Service) (*Task, bool) {
	if !ServiceState(svc.State).Gone() {
		return nil, false
	}
	prev, err := tx.Tasks().Lock(ctx, p.OrgID, svc.TaskID)
	if err != nil || TaskKind(prev.Kind) != TaskKindTeardown {
		return nil, false
	}
	v, err := s.tasks.taskView(prev)
	if err != nil {
		return nil, false
	}
	if v.BudgetRemaining, err = budgetLeftMicro(ctx, tx, p.OrgID, prev.ProjectID); err != nil {
		return nil, false
	}
	return v, true
}

// teardownFrom checks the service's state and says which state it takes
// while tearing down; it clears svc.Domain when the service never served
// its domain.
func (s teardowns) teardownFrom(ctx context.Context, tx *store.Tx, p *auth.Principal, svc *store.Service) (string, error) {
	switch ServiceState(svc.State) {
	case ServiceTornDown, ServiceTearingDown:
		return "", apierr.Newf("conflict:state", "service %s is already %s", svc.ID, svc.State).
			WithActions(actions.Tool("get_task", "agent", map[string]any{"id": svc.TaskID}))
	case ServiceFailed:
		// A failed service stays failed until its teardown retires it:
		// tearing_down would claim its name again, which a relaunch may
		// hold. It holds no name, host or budget; tearing it down stops
		// what a failed process launch may have left and retires it. Its
		// domain, if any, was never served, so its zone is left.
		svc.Domain = ""
		return "failed", nil
	case ServiceLaunching:
		return "tearing_down", s.cancelWaitingLaunch(ctx, tx, p, svc)
	}
	return "tearing_down", nil
}

// cancelWaitingLaunch gives up a launch waiting for a human: it ends
// canceled, refunded, and the teardown finds nothing served. A launch at
// work must finish first.
func (s teardowns) cancelWaitingLaunch(ctx context.Context, tx *store.Tx, p *auth.Principal, svc *store.Service) error {
	lt, err := tx.Tasks().Lock(ctx, p.OrgID, svc.TaskID)
	if err != nil {
		return err
	}
	if TaskState(lt.State) != TaskInputRequired {
		return apierr.Newf("conflict:state", "service %s is still launching; wait for its task, then tear it down", svc.ID).
			WithActions(actions.Retry("get_task", "agent", map[string]any{"id": svc.TaskID}, 2))
	}
	var lpl launchPayload
	if err := s.endLaunchTx(ctx, tx, p.OrgID, lt.ID, "canceled", apierr.New("conflict:state", "the service was torn down while its launch waited for a human"), &lpl); err != nil {
		return err
	}
	if !lpl.Owned {
		svc.Domain = "" // never bought, so nothing to keep
	}
	if lt.GateID != "" && !lpl.AwaitQuote {
		// Its own registration gate is moot now.
		if err := tx.Gates().Decide(ctx, p.OrgID, lt.GateID, "denied", actorOf(p), s.Now()); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return nil
}

// teardownSteps are the steps of a service's teardown.
func teardownSteps(ctx context.Context, tx *store.Tx, svc store.Service) []TaskStep {
	zone := StepStateSkipped
	if svc.Domain != "" {
		zone = StepStatePending
	}
	steps := []TaskStep{{Name: StepUndeploy, State: "pending"}}
	if runsProcesses(svc.Target) {
		database := StepStateSkipped
		if _, err := tx.Services().Database(ctx, svc.ID); err == nil {
			database = StepStatePending
		}
		steps = append(steps, TaskStep{Name: StepStop, State: "pending"}, TaskStep{Name: StepDropDatabase, State: database})
	}
	return append(steps, TaskStep{Name: StepRemoveZone, State: zone})
}

// insertTeardown records the teardown task with its receipt: the domain
// registration is not reversed, and the zone's mail records are kept.
func (s teardowns) insertTeardown(ctx context.Context, tx *store.Tx, p *auth.Principal, svc store.Service, tearing string) (*Task, store.Task, error) {
	now := s.Now()
	proj, err := tx.Projects().Lock(ctx, p.OrgID, svc.ProjectID)
	if err != nil {
		return nil, store.Task{}, err
	}
	mailKept, err := s.mailSetUp(ctx, p.OrgID, svc.Domain)
	if err != nil {
		return nil, store.Task{}, err
	}
	pl := teardownPayload{ServiceID: svc.ID, PreviewHost: svc.PreviewHost, Domain: svc.Domain, Actor: actorOf(p), LaunchTaskID: svc.TaskID, Target: svc.Target, MailKept: mailKept}
	task := store.Task{ID: auth.ID("tsk"), OrgID: p.OrgID, ProjectID: svc.ProjectID, Kind: "teardown", State: "queued", CreatedAt: now.UTC(), UpdatedAt: now.UTC()}
	var costs []Cost
	if svc.Domain != "" {
		costs = append(costs, Cost{Item: "irreversible:domain_registration:" + svc.Domain, Amount: 0})
	}
	m := s.mutated("teardown_service", costs, []Resource{{Type: "task", ID: task.ID}}, nil, remaining(proj))
	if mailKept {
		m.Receipt.Kept = []string{"mail_records:" + svc.Domain}
	}
	pl.Receipt, pl.Undo = &m.Receipt, &m.Undo
	sj, _ := json.Marshal(teardownSteps(ctx, tx, svc))
	pj, _ := json.Marshal(pl)
	task.Steps, task.Payload = string(sj), string(pj)
	if err := tx.Tasks().Insert(ctx, task); err != nil {
		return nil, task, err
	}
	if err := tx.Services().SetTask(ctx, svc.ID, task.ID, tearing, now); err != nil {
		return nil, task, err
	}
	if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: "teardown_service", ObjectType: "service", ObjectID: svc.ID,
		Details: map[string]any{"taskId": task.ID, "domainKept": svc.Domain, "mailRecordsKept": mailKept}}, now); err != nil {
		return nil, task, err
	}
	v, err := s.tasks.startedView(task, m)
	if err != nil {
		return nil, task, err
	}
	return v, task, nil
}

func (s *Launches) runTeardown(ctx context.Context, t store.Task) error {
	var pl teardownPayload
	rt, err := s.loadRunning(t, &pl)
	if err != nil {
		return err
	}
	if err := rt.do(ctx, &pl, StepUndeploy, func() (string, error) { return teardowns{s}.undeploy(ctx, &pl) }); err != nil {
		return err
	}
	if err := rt.do(ctx, &pl, StepStop, func() (string, error) {
		if err := s.runs.stopAll(ctx, pl.ServiceID); err != nil {
			return "", err
		}
		return "processes stopped (SIGTERM, then SIGKILL after the grace period) and their files removed", nil
	}); err != nil {
		return err
	}
	if err := rt.do(ctx, &pl, StepDropDatabase, func() (string, error) { return s.runs.releaseDatabase(ctx, pl.ServiceID) }); err != nil {
		return err
	}
	if err := rt.do(ctx, &pl, StepRemoveZone, func() (string, error) {
		mail, _, err := s.syncZone(ctx, t.OrgID, pl.Domain, false)
		if err != nil {
			return "", err
		}
		pl.MailKept = mail
		if mail {
			return "web records removed; the mail records stay, as they belong to the domain's email setup; the domain stays registered to you", nil
		}
		return "zone removed; the domain stays registered to you", nil
	}); err != nil {
		return err
	}
	rj, _ := json.Marshal(teardownResult(&pl))
	rt.t.State, rt.t.Result = "succeeded", string(rj)
	return rt.save(ctx, &pl)
}

// undeploy retires the service: the name, the hosts and any domain claim
// are free again.
func (s teardowns) undeploy(ctx context.Context, pl *teardownPayload) (string, error) {
	if err := s.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.Services().Retire(ctx, pl.ServiceID, "torn_down", s.Now()); err != nil {
			return err
		}
		if pl.LaunchTaskID == "" {
			return nil
		}
		return tx.Domains().ReleaseClaims(ctx, pl.LaunchTaskID)
	}); err != nil {
		return "", err
	}
	s.invalidate(pl.PreviewHost, pl.Domain)
	return "no longer served; its name and hosts are free", nil
}

// teardownResult says what the teardown reversed, what it cannot and
// what it kept.
func teardownResult(pl *teardownPayload) map[string]any {
	reversed := []string{"serving", "dns"}
	if runsProcesses(pl.Target) {
		reversed = append(reversed, "processes")
	}
	result := map[string]any{"serviceId": pl.ServiceID, "reversed": reversed}
	if pl.Domain != "" {
		result["notReversed"] = []map[string]any{{"what": "domain_registration", "domain": pl.Domain, "why": "a registered domain cannot be unbought; transfer it out from the human pages"}}
	}
	if pl.MailKept {
		result["kept"] = []map[string]any{{"what": "mail_records", "domain": pl.Domain, "why": "MX, SPF, DMARC and DKIM belong to the domain's email setup, not to the service; mail to the domain is still delivered (remove_email takes them out)"}}
	}
	return result
}
