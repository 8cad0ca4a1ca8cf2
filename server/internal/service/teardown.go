package service

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/pierhq/pier/sdk"
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
}

// Teardown step names.
const (
	StepUndeploy   = "undeploy"
	StepRemoveZone = "remove_zone"
)

// TeardownService stops serving a service as a durable task. What cannot be
// reversed is named in the receipt: a registered domain stays registered.
func (s *Service) TeardownService(ctx context.Context, p *auth.Principal, serviceID string) (*sdk.TaskHandle, []sdk.Action, error) {
	var view *sdk.TaskHandle
	var task store.Task
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		now := s.Now()
		svc, err := tx.Services().Lock(ctx, p.OrgID, serviceID)
		if errors.Is(err, store.ErrNotFound) {
			return apierr.Newf("not_found:resource", "no service %s in your organisation", serviceID)
		}
		if err != nil {
			return err
		}
		switch svc.State {
		case "torn_down", "tearing_down":
			return apierr.Newf("conflict:state", "service %s is already %s", serviceID, svc.State).
				WithActions(actions.Tool("get_task", "agent", map[string]any{"id": svc.TaskID}))
		case "failed":
			return apierr.Newf("conflict:state", "service %s failed to launch; it holds no name, host or budget", serviceID).
				WithActions(actions.Tool("get_task", "agent", map[string]any{"id": svc.TaskID}))
		case "launching":
			// A launch waiting for a human can be given up: it ends
			// canceled, refunded, and the teardown below finds nothing
			// served. A launch at work must finish first.
			lt, err := tx.Tasks().Lock(ctx, p.OrgID, svc.TaskID)
			if err != nil {
				return err
			}
			if lt.State != "input_required" {
				return apierr.Newf("conflict:state", "service %s is still launching; wait for its task, then tear it down", serviceID).
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
				if err := tx.Gates().Decide(ctx, p.OrgID, lt.GateID, "denied", actorOf(p), now); err != nil && !errors.Is(err, store.ErrConflict) {
					return err
				}
			}
		}
		proj, err := tx.Projects().Lock(ctx, p.OrgID, svc.ProjectID)
		if err != nil {
			return err
		}
		pl := teardownPayload{ServiceID: svc.ID, PreviewHost: svc.PreviewHost, Domain: svc.Domain, Actor: actorOf(p), LaunchTaskID: svc.TaskID}
		zone := "skipped"
		if svc.Domain != "" {
			zone = "pending"
		}
		steps := []taskStep{{Name: StepUndeploy, State: "pending"}, {Name: StepRemoveZone, State: zone}}
		sj, _ := json.Marshal(steps)
		pj, _ := json.Marshal(pl)
		task = store.Task{ID: auth.ID("tsk"), OrgID: p.OrgID, ProjectID: svc.ProjectID, Kind: "teardown", State: "queued",
			Steps: string(sj), Payload: string(pj), CreatedAt: now.UTC(), UpdatedAt: now.UTC()}
		if err := tx.Tasks().Insert(ctx, task); err != nil {
			return err
		}
		if err := tx.Services().SetTask(ctx, svc.ID, task.ID, "tearing_down", now); err != nil {
			return err
		}
		var costs []Cost
		if svc.Domain != "" {
			costs = append(costs, Cost{Item: "irreversible:domain_registration:" + svc.Domain, Amount: 0})
		}
		m := s.Mutation("teardown_service", costs, []sdk.ResourceRef{{Type: "task", Id: task.ID}}, nil, remaining(proj))
		if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: "teardown_service", ObjectType: "service", ObjectID: svc.ID,
			Details: map[string]any{"taskId": task.ID, "domainKept": svc.Domain}}, now); err != nil {
			return err
		}
		v, err := s.taskView(task)
		if err != nil {
			return err
		}
		v.Receipt, v.Undo, v.BudgetRemainingUsd = &m.Receipt, &m.Undo, &m.BudgetRemainingUsd
		view = v
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if s.P.Enqueue != nil {
		if err := s.P.Enqueue(ctx, task.ID); err != nil {
			s.Log.Warn("enqueue teardown", "task", task.ID, "err", err)
		}
	}
	return view, []sdk.Action{actions.Retry("get_task", "agent", map[string]any{"id": task.ID}, 1)}, nil
}

func (s *Service) runTeardown(ctx context.Context, t store.Task) error {
	var pl teardownPayload
	rt, err := s.loadRunning(t, &pl)
	if err != nil {
		return err
	}
	if err := rt.do(ctx, &pl, StepUndeploy, func() (string, error) {
		// The name, the hosts and any domain claim are free again.
		if err := s.Store.InTx(ctx, func(tx *store.Tx) error {
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
	}); err != nil {
		return err
	}
	if err := rt.do(ctx, &pl, StepRemoveZone, func() (string, error) {
		if err := s.Store.Domains().DeleteZone(ctx, pl.Domain); err != nil {
			return "", err
		}
		if s.P.InvalidateDNS != nil {
			s.P.InvalidateDNS(pl.Domain)
		}
		return "zone removed; the domain stays registered to you", nil
	}); err != nil {
		return err
	}
	result := map[string]any{"serviceId": pl.ServiceID, "reversed": []string{"serving", "dns"}}
	if pl.Domain != "" {
		result["notReversed"] = []map[string]any{{"what": "domain_registration", "domain": pl.Domain, "why": "a registered domain cannot be unbought; transfer it out from the human pages"}}
	}
	rj, _ := json.Marshal(result)
	rt.t.State, rt.t.Result = "succeeded", string(rj)
	return rt.save(ctx, &pl)
}
