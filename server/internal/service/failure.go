package service

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/store"
)

// recheckDomain runs right before the purchase: the name must still be
// sellable, held by nobody else, and at the price the quote held. Each
// refusal is permanent and ends the task.
func (s *Service) recheckDomain(ctx context.Context, rt *runningTask, pl *launchPayload) error {
	if pl.PurchaseRef != "" {
		// A retry after the registrar already sold it to us is no conflict.
		if pu, err := s.Store.Domains().PurchaseByRef(ctx, pl.PurchaseRef); err == nil && pu.Domain == pl.Domain {
			return nil
		}
	}
	org, sold, err := s.Store.Domains().Holder(ctx, pl.Domain)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if err == nil && (sold || org != rt.t.OrgID) {
		return apierr.Newf("plan:domain_unavailable", "%s was registered by someone else before this launch could buy it", pl.Domain)
	}
	years := max(pl.Years, 1)
	current, err := priceItems([]sdk.QuoteItem{{Kind: sdk.Domain, Domain: &pl.Domain, Years: &years}})
	if err != nil {
		return err
	}
	if pl.DomainMicro > 0 && current[0].AmountMicro != pl.DomainMicro {
		return apierr.Newf("price:changed", "%s now costs %.2f USD, not the %.2f USD quoted", pl.Domain, usd(current[0].AmountMicro), usd(pl.DomainMicro))
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
func (s *Service) failLaunch(ctx context.Context, taskID string, cause *apierr.Error) error {
	return s.endLaunch(ctx, taskID, "failed", cause)
}

func (s *Service) endLaunch(ctx context.Context, taskID, state string, cause *apierr.Error) error {
	t0, err := s.Store.Tasks().GetAnyOrg(ctx, taskID)
	if err != nil {
		return err
	}
	var pl launchPayload
	err = s.Store.InTx(ctx, func(tx *store.Tx) error {
		return s.endLaunchTx(ctx, tx, t0.OrgID, taskID, state, cause, &pl)
	})
	if err != nil {
		return err
	}
	s.invalidate(pl.PreviewHost, pl.Domain)
	return nil
}

func (s *Service) endLaunchTx(ctx context.Context, tx *store.Tx, orgID, taskID, state string, cause *apierr.Error, pl *launchPayload) error {
	now := s.Now()
	t, err := tx.Tasks().Lock(ctx, orgID, taskID)
	if err != nil {
		return err
	}
	switch t.State {
	case "succeeded", "failed", "canceled":
		return nil
	}
	if err := json.Unmarshal([]byte(t.Payload), pl); err != nil {
		return err
	}
	var steps []taskStep
	if err := json.Unmarshal([]byte(t.Steps), &steps); err != nil {
		return err
	}
	bought := false
	if pl.PurchaseRef != "" {
		if pu, err := s.Store.Domains().PurchaseByRef(ctx, pl.PurchaseRef); err == nil && pu.OrgID == t.OrgID && pu.Domain == pl.Domain {
			bought = true
		}
	}
	refund := pl.ChargedMicro - pl.RefundedMicro
	if bought && pl.Approval != "denied" {
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
		var kept int64
		for i, c := range pl.Receipt.Costs {
			if bought && c.Item == "domain:"+pl.Domain {
				kept += microUSD(c.AmountUsd)
				continue
			}
			pl.Receipt.Costs[i].AmountUsd = 0
		}
		pl.Receipt.TotalUsd = usd(kept)
	}
	if !bought && pl.Undo != nil {
		pl.Undo.Irreversible, pl.Undo.NotReversed = false, nil
	}
	if err := tx.Services().Retire(ctx, pl.ServiceID, "failed", now); err != nil {
		return err
	}
	if err := tx.Domains().ReleaseClaims(ctx, t.ID); err != nil {
		return err
	}
	for i := range steps {
		switch steps[i].State {
		case "running", "input_required":
			steps[i].State, steps[i].CompletedAt, steps[i].Detail = "failed", ptr(now.UTC()), cause.Message
		case "pending":
			steps[i].State = "skipped"
		}
	}
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

// gaveUp is the cause recorded when a transient error outlasted the
// runner's bounded retries.
func gaveUp(cause error) *apierr.Error {
	return apierr.Newf("provider:failed", "the launch kept failing and was stopped after its retries: %v", cause)
}
