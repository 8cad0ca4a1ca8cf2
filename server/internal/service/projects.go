package service

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/store"
)

// HoldDuration is how long an ALLOW quote reserves budget (SPEC §3).
const HoldDuration = 15 * time.Minute

// DefaultPolicy lets every TLD through, sets no price ceilings, and sends
// every domain purchase to a human unless the key holds buy_domain.
func DefaultPolicy() sdk.ProjectPolicy {
	return sdk.ProjectPolicy{
		TldAllowlist:  []string{},
		TldDenylist:   []string{},
		ApprovalRules: sdk.ApprovalRules{DomainPurchases: sdk.HumanGate},
	}
}

func decodePolicy(s string) (sdk.ProjectPolicy, error) {
	var p sdk.ProjectPolicy
	err := json.Unmarshal([]byte(s), &p)
	if p.TldAllowlist == nil {
		p.TldAllowlist = []string{}
	}
	if p.TldDenylist == nil {
		p.TldDenylist = []string{}
	}
	return p, err
}

// NewProject describes a project a human creates.
type NewProject struct {
	OrgID      string
	Name       string
	LimitMicro int64
	Policy     sdk.ProjectPolicy
	CreatedBy  string // ledger actor, such as "human:usr_…"
}

// CreateProject creates a project with a budget and policy.
func (s *Service) CreateProject(ctx context.Context, np NewProject) (store.Project, error) {
	pol, err := json.Marshal(np.Policy)
	if err != nil {
		return store.Project{}, err
	}
	p := store.Project{ID: auth.ID("prj"), OrgID: np.OrgID, Name: np.Name, LimitMicro: np.LimitMicro, Policy: string(pol), CreatedAt: s.Now().UTC()}
	err = s.Store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.Projects().Create(ctx, p); err != nil {
			return err
		}
		_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: np.OrgID, Actor: np.CreatedBy, Action: "create_project", ObjectType: "project", ObjectID: p.ID,
			Details: map[string]any{"name": np.Name, "budgetLimitMicroUsd": np.LimitMicro, "policy": json.RawMessage(pol)}}, s.Now())
		return err
	})
	return p, err
}

// expireHolds releases a locked project's holds whose time ran out, with a
// ledger entry each, so that every read and write sees current books.
func (s *Service) expireHolds(ctx context.Context, tx *store.Tx, p *store.Project, now time.Time) error {
	expired, err := tx.Quotes().ExpiredHolds(ctx, p.ID, now)
	if err != nil {
		return err
	}
	for _, q := range expired {
		if err := tx.Quotes().Settle(ctx, q.ID, "expired", now); err != nil {
			return err
		}
		if err := tx.Projects().MoveMoney(ctx, p.ID, -q.AmountMicro, 0); err != nil {
			return err
		}
		p.HeldMicro -= q.AmountMicro
		if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: "system", Action: "hold_expired", ObjectType: "quote", ObjectID: q.ID,
			Details: map[string]any{"projectId": p.ID, "amountMicroUsd": q.AmountMicro}}, now); err != nil {
			return err
		}
	}
	return nil
}

// projectView renders a project with its active holds.
func (s *Service) projectView(ctx context.Context, p store.Project) (sdk.Project, error) {
	now := s.Now()
	holds, err := s.Store.Quotes().ActiveHolds(ctx, p.ID, now)
	if err != nil {
		return sdk.Project{}, err
	}
	// Holds past their time count as released even before a write expires them.
	var held int64
	view := sdk.Project{
		Id: p.ID, Name: p.Name, BudgetLimitUsd: usd(p.LimitMicro), SpentUsd: usd(p.SpentMicro),
		ActiveHolds: []sdk.Hold{}, CreatedAt: p.CreatedAt,
	}
	for _, h := range holds {
		held += h.AmountMicro
		view.ActiveHolds = append(view.ActiveHolds, sdk.Hold{QuoteId: h.ID, AmountUsd: usd(h.AmountMicro), ExpiresAt: h.ExpiresAt})
	}
	view.HeldUsd = usd(held)
	view.RemainingUsd = usd(p.LimitMicro - p.SpentMicro - held)
	if view.Policy, err = decodePolicy(p.Policy); err != nil {
		return view, err
	}
	return view, nil
}

func projectNotFound(id string) *apierr.Error {
	return apierr.Newf("not_found:resource", "no project %s in your organisation", id).
		WithActions(actions.Tool("list_projects", "agent", nil))
}

// GetProject reads a project of the caller's organisation.
func (s *Service) GetProject(ctx context.Context, orgID, id string) (*sdk.Project, []sdk.Action, error) {
	p, err := s.Store.Projects().Get(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, projectNotFound(id)
	}
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	v, err := s.projectView(ctx, p)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	svcs, err := s.Store.Services().List(ctx, orgID, store.Filter{ProjectID: p.ID, Limit: 500})
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	list := []sdk.ServiceInfo{}
	for _, sv := range svcs {
		list = append(list, s.serviceView(sv))
	}
	v.Services = &list
	return &v, []sdk.Action{
		actions.Tool("create_quote", "agent", map[string]any{"projectId": p.ID}),
		actions.Tool("list_services", "agent", map[string]any{"projectId": p.ID}),
		actions.Stop("done"),
	}, nil
}

// ListProjects lists the caller's organisation's projects.
func (s *Service) ListProjects(ctx context.Context, orgID string) (*sdk.ProjectList, []sdk.Action, error) {
	ps, err := s.Store.Projects().List(ctx, orgID)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	out := &sdk.ProjectList{Projects: []sdk.Project{}}
	for _, p := range ps {
		v, err := s.projectView(ctx, p)
		if err != nil {
			return nil, nil, apierr.Internal(err)
		}
		out.Projects = append(out.Projects, v)
	}
	return out, []sdk.Action{actions.Stop("done")}, nil
}

// remaining is limit − spent − held for a locked project.
func remaining(p store.Project) int64 { return p.LimitMicro - p.SpentMicro - p.HeldMicro }
