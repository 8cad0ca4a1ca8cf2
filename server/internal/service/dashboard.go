package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pierhq/pier/ledger"
	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/payments"
	"github.com/pierhq/pier/server/internal/registrar"
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
	if d.Org, err = s.Store.Accounts().Organization(ctx, h.OrgID); err != nil {
		return nil, err
	}
	pl, _, err := s.ListProjects(ctx, h.OrgID)
	if err != nil {
		return nil, err
	}
	d.Projects = pl.Projects
	if d.Tasks, err = s.Store.Tasks().List(ctx, h.OrgID, 20); err != nil {
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
	if d.Ledger, err = s.Store.Ledger().Tail(ctx, h.OrgID, 20); err != nil {
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
		page, err := s.Store.Ledger().Entries(ctx, h.OrgID, after, 1000)
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
	// Title names what is being approved in words, such as "Buy the
	// domain acme.dev for 1 year".
	Title string
	// Domain, Years and RenewalMicro describe a domain purchase: the
	// renewal is what each later year costs.
	Domain       string
	Years        int
	RenewalMicro int64
	HasRenewal   bool
	// Items describe a quote's lines in words.
	Items []string
	// RequestedBy is the name of the key (or grant) that asked.
	RequestedBy string
	// The project's remaining budget now, and what approving (or, for a
	// purchase already taken from it, denying) would leave.
	RemainingMicro, IfApprovedMicro, IfDeniedMicro int64
	HasBudget                                      bool
}

func (s *Service) gateView(ctx context.Context, g store.Gate) GateView {
	v := GateView{ID: g.ID, Kind: g.Kind, State: g.State, TaskID: g.TaskID, DecidedBy: g.DecidedBy, DecidedAt: g.DecidedAt, CreatedAt: g.CreatedAt}
	var payload struct {
		ProjectID    string       `json:"projectId"`
		Amount       int64        `json:"amountMicroUsd"`
		Reason       string       `json:"reason"`
		QuoteID      string       `json:"quoteId"`
		CurrentLimit *int64       `json:"currentLimitMicroUsd"`
		Domain       string       `json:"domain"`
		Years        int          `json:"years"`
		RequestedBy  string       `json:"requestedBy"`
		Items        []pricedItem `json:"items"`
	}
	if err := json.Unmarshal([]byte(g.Payload), &payload); err == nil {
		v.ProjectID, v.AmountMicro, v.Reason, v.QuoteID = payload.ProjectID, payload.Amount, payload.Reason, payload.QuoteID
		v.Domain, v.Years = payload.Domain, max(payload.Years, 1)
		v.RequestedBy = s.requesterName(ctx, g.OrgID, payload.RequestedBy)
		for _, it := range payload.Items {
			v.Items = append(v.Items, itemWords(it))
		}
		if v.Domain != "" {
			if label, tldName, ok := strings.Cut(v.Domain, "."); ok && label != "" {
				if tld, ok := registrar.Lookup(tldName); ok {
					if r := tld.AnnualizedRenewal(); r != nil {
						v.RenewalMicro, v.HasRenewal = int64(*r), true
					}
				}
			}
		}
		if payload.CurrentLimit != nil {
			v.CurrentLimitMicro, v.HasCurrentLimit = *payload.CurrentLimit, true
		}
	}
	if p, err := s.Store.Projects().Get(ctx, g.OrgID, v.ProjectID); err == nil {
		v.ProjectName = p.Name
		v.RemainingMicro, v.HasBudget = p.LimitMicro-p.SpentMicro-p.HeldMicro, true
		switch v.Kind {
		case "budget_raise":
			v.IfApprovedMicro, v.IfDeniedMicro = v.RemainingMicro+v.AmountMicro, v.RemainingMicro
		case "domain_registration":
			// The launch took the price when it started: approving keeps it
			// spent, denying gives it back.
			v.IfApprovedMicro, v.IfDeniedMicro = v.RemainingMicro, v.RemainingMicro+v.AmountMicro
			if g.State != "pending" {
				v.IfApprovedMicro, v.IfDeniedMicro = v.RemainingMicro, v.RemainingMicro
			}
		default:
			v.IfApprovedMicro, v.IfDeniedMicro = v.RemainingMicro-v.AmountMicro, v.RemainingMicro
		}
	}
	v.Title = gateTitle(v)
	return v
}

// gateTitle says what approving does, in words.
func gateTitle(v GateView) string {
	switch v.Kind {
	case "domain_registration":
		years := "1 year"
		if v.Years > 1 {
			years = fmt.Sprintf("%d years", v.Years)
		}
		return fmt.Sprintf("Buy the domain %s for %s", v.Domain, years)
	case "budget_raise":
		return fmt.Sprintf("Raise the budget of %s by %s", orName(v.ProjectName, "the project"), FormatUSD(v.AmountMicro))
	case "quote_approval":
		return fmt.Sprintf("Approve spending %s from %s's budget", FormatUSD(v.AmountMicro), orName(v.ProjectName, "the project"))
	}
	return "Approve " + strings.ReplaceAll(v.Kind, "_", " ")
}

func orName(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// itemWords describes one priced quote line.
func itemWords(it pricedItem) string {
	if it.Kind == "domain" {
		return fmt.Sprintf("the domain %s for %d year(s): %s", it.Domain, max(it.Years, 1), FormatUSD(it.AmountMicro))
	}
	name := it.Name
	if name == "" {
		name = "a service"
	}
	return fmt.Sprintf("%s on %s (%s) for %d month(s): %s", name, it.Target, it.Workload, max(it.Months, 1), FormatUSD(it.AmountMicro))
}

// requesterName names the key or grant behind an actor string such as
// key:key_123.
func (s *Service) requesterName(ctx context.Context, orgID, actor string) string {
	id, ok := strings.CutPrefix(actor, "key:")
	if !ok {
		return actor
	}
	keys, err := s.Store.Keys().List(ctx, orgID)
	if err != nil {
		return actor
	}
	for _, k := range keys {
		if k.ID == id {
			return fmt.Sprintf("the key “%s” (%s)", k.Name, k.ID)
		}
	}
	return actor
}

// GateFor reads a gate of the human's organisation.
func (s *Service) GateFor(ctx context.Context, h Human, gateID string) (GateView, error) {
	g, err := s.Store.Gates().Get(ctx, h.OrgID, gateID)
	if errors.Is(err, store.ErrNotFound) {
		return GateView{}, apierr.Newf("not_found:resource", "no approval %s in your organisation", gateID)
	}
	if err != nil {
		return GateView{}, apierr.Internal(err)
	}
	return s.gateView(ctx, g), nil
}
