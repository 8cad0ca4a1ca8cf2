package service

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/pierhq/pier/ledger"
	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/payments"
	"github.com/pierhq/pier/server/internal/store"
)

// What the human pages read. These take the organisation from the human's
// session, never from the request, so another organisation's objects are
// simply not found.

// Dashboard is the organisation at a glance.
type Dashboard struct {
	Org         store.Organization
	Projects    []sdk.Project
	Tasks       []store.Task
	Pending     []GateView
	Keys        []store.APIKey
	Ledger      []ledger.Entry // newest first
	Card        *store.PaymentMethod
	CardExpired bool
}

// DashboardFor reads the human's organisation.
func (s *Service) DashboardFor(ctx context.Context, h Human) (*Dashboard, error) {
	d := &Dashboard{}
	var err error
	if d.Org, err = s.Store.GetOrganization(ctx, h.OrgID); err != nil {
		return nil, err
	}
	pl, _, err := s.ListProjects(ctx, h.OrgID)
	if err != nil {
		return nil, err
	}
	d.Projects = pl.Projects
	if d.Tasks, err = s.Store.ListTasks(ctx, h.OrgID, 20); err != nil {
		return nil, err
	}
	gates, err := s.PendingApprovals(ctx, h.OrgID)
	if err != nil {
		return nil, err
	}
	for _, g := range gates {
		d.Pending = append(d.Pending, s.gateView(ctx, g))
	}
	if d.Keys, err = s.ListKeys(ctx, h.OrgID); err != nil {
		return nil, err
	}
	if d.Ledger, err = s.Store.LedgerTail(ctx, h.OrgID, 20); err != nil {
		return nil, err
	}
	if d.Card, err = s.PaymentMethodFor(ctx, h.OrgID); err != nil {
		return nil, err
	}
	if d.Card != nil {
		d.CardExpired = payments.Expired(d.Card.ExpMonth, d.Card.ExpYear, s.Now())
	}
	return d, nil
}

// LedgerFor reads the human's organisation's whole chain, for download.
func (s *Service) LedgerFor(ctx context.Context, h Human) ([]ledger.Entry, error) {
	var out []ledger.Entry
	var after int64
	for {
		page, err := s.Store.LedgerEntries(ctx, h.OrgID, after, 1000)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < 1000 {
			return out, nil
		}
		after = page[len(page)-1].Seq
	}
}

// GateView is a gate as the approval page shows it.
type GateView struct {
	ID, Kind, State, TaskID string
	ProjectID, ProjectName  string
	Reason, QuoteID         string
	AmountMicro             int64
	CurrentLimitMicro       int64
	HasCurrentLimit         bool
	DecidedBy               string
	DecidedAt               *time.Time
	CreatedAt               time.Time
}

func (s *Service) gateView(ctx context.Context, g store.Gate) GateView {
	v := GateView{ID: g.ID, Kind: g.Kind, State: g.State, TaskID: g.TaskID, DecidedBy: g.DecidedBy, DecidedAt: g.DecidedAt, CreatedAt: g.CreatedAt}
	var payload struct {
		ProjectID    string `json:"projectId"`
		Amount       int64  `json:"amountMicroUsd"`
		Reason       string `json:"reason"`
		QuoteID      string `json:"quoteId"`
		CurrentLimit *int64 `json:"currentLimitMicroUsd"`
	}
	if err := json.Unmarshal([]byte(g.Payload), &payload); err == nil {
		v.ProjectID, v.AmountMicro, v.Reason, v.QuoteID = payload.ProjectID, payload.Amount, payload.Reason, payload.QuoteID
		if payload.CurrentLimit != nil {
			v.CurrentLimitMicro, v.HasCurrentLimit = *payload.CurrentLimit, true
		}
	}
	if p, err := s.Store.GetProject(ctx, g.OrgID, v.ProjectID); err == nil {
		v.ProjectName = p.Name
	}
	return v
}

// GateFor reads a gate of the human's organisation.
func (s *Service) GateFor(ctx context.Context, h Human, gateID string) (GateView, error) {
	g, err := s.Store.GetGate(ctx, h.OrgID, gateID)
	if errors.Is(err, store.ErrNotFound) {
		return GateView{}, apierr.Newf("not_found:resource", "no approval %s in your organisation", gateID)
	}
	if err != nil {
		return GateView{}, apierr.Internal(err)
	}
	return s.gateView(ctx, g), nil
}
