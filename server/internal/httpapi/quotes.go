package httpapi

import (
	"context"
	"slices"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/service"
)

func (o quoteRoutes) ListQuotes(ctx context.Context, req api.ListQuotesRequestObject) (api.ListQuotesResponseObject, error) {
	l, err := listed(ctx, req.Params.Cursor, req.Params.Limit, byProjectAndState(req.Params.ProjectId, req.Params.State), o.svc.Quotes.List, quoteInfo, nil, "list_quotes", "")
	if err != nil {
		return nil, err
	}
	return api.ListQuotes200JSONResponse{Data: models.QuoteInfoList{Quotes: l.Items, NextCursor: l.NextCursor}, Actions: l.Actions, FormatVersion: FormatVersion}, nil
}

func (o quoteRoutes) GetQuote(ctx context.Context, req api.GetQuoteRequestObject) (api.GetQuoteResponseObject, error) {
	q, err := o.svc.Quotes.Get(ctx, auth.FromContext(ctx).OrgID, req.Id)
	if err != nil {
		return nil, err
	}
	var next []models.Action
	switch q.State {
	case service.QuoteHeld:
		next = quoteNext(q)
	case service.QuoteExpired:
		next = append(next, actions.Tool("create_quote", "agent", service.QuoteArgs(q.ProjectID, q.Items)))
	}
	return api.GetQuote200JSONResponse{Data: quoteInfo(*q), Actions: append(next, actions.Stop("done")), FormatVersion: FormatVersion}, nil
}

func (o quoteRoutes) Estimate(ctx context.Context, req api.EstimateRequestObject) (api.EstimateResponseObject, error) {
	b := req.Body
	res, err := o.svc.Quotes.Estimate(ctx, service.EstimateRequest{Workload: string(b.Workload), Target: deref(b.Target),
		MonthlyRequests: b.MonthlyRequests, MonthlyEgressGB: b.MonthlyEgressGb})
	if err != nil {
		return nil, err
	}
	next := []models.Action{
		actions.Tool("create_quote", "agent", map[string]any{
			"items": []any{map[string]any{"kind": "service", "target": res.Selected, "workload": res.Workload, "months": 1}},
		}),
		actions.Stop("done"),
	}
	return api.Estimate200JSONResponse{Data: estimateResult(res), Actions: next, FormatVersion: FormatVersion}, nil
}

func (o quoteRoutes) CreateQuote(ctx context.Context, req api.CreateQuoteRequestObject) (api.CreateQuoteResponseObject, error) {
	res, err := o.createQuote(ctx, service.QuoteRequest{ProjectID: req.Body.ProjectId, Items: QuoteItems(req.Body.Items)})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// createQuote is create_quote's answer to req, for the generated handler
// and for the listener's fast path (AnswerCreateQuote).
func (o quoteRoutes) createQuote(ctx context.Context, req service.QuoteRequest) (api.CreateQuote201JSONResponse, error) {
	q, err := o.svc.Quotes.Create(ctx, auth.FromContext(ctx), req)
	if err != nil {
		return api.CreateQuote201JSONResponse{}, err
	}
	var undo *models.ToolAction
	if q.State == service.QuoteHeld {
		undo = undoCall("release_quote", map[string]any{"id": q.ID})
	}
	m := mutation(o.svc.Now(), "create_quote", nil, []models.ResourceRef{{Type: "quote", Id: q.ID}}, undo, q.BudgetRemaining)
	return api.CreateQuote201JSONResponse{Data: quoteWire(q, m), Actions: createdNext(q), FormatVersion: FormatVersion}, nil
}

func (o quoteRoutes) ReleaseQuote(ctx context.Context, req api.ReleaseQuoteRequestObject) (api.ReleaseQuoteResponseObject, error) {
	q, err := o.svc.Quotes.Release(ctx, auth.FromContext(ctx), req.Id)
	if err != nil {
		return nil, err
	}
	m := mutation(o.svc.Now(), "release_quote", nil, nil, nil, q.BudgetRemaining)
	return api.ReleaseQuote200JSONResponse{Data: quoteWire(q, m), Actions: []models.Action{actions.Stop("done")}, FormatVersion: FormatVersion}, nil
}

// QuoteItems are the contract's quote items in the domain's terms; the
// workflow door reads a create_quote step's items with it too.
func QuoteItems(items []models.QuoteItem) []service.QuoteItem {
	out := make([]service.QuoteItem, 0, len(items))
	for _, it := range items {
		out = append(out, service.QuoteItem{Kind: service.QuoteItemKind(it.Kind), Domain: deref(it.Domain), Years: orZero(it.Years),
			Months: orZero(it.Months), Workload: deref(it.Workload), Target: deref(it.Target), Name: deref(it.Name)})
	}
	return out
}

// orZero is *p, or zero for nil.
func orZero[T any](p *T) T {
	var v T
	if p != nil {
		v = *p
	}
	return v
}

// quoteWire is the contract's view of a quote just made or released, with
// the mutation's receipt, undo and remaining budget.
func quoteWire(q *service.Quote, m models.MutationResult) models.Quote {
	out := models.Quote{QuoteId: q.ID, ProjectId: q.ProjectID, Decision: models.QuoteDecision(q.Decision), State: ptr(models.QuoteState(q.State)),
		AmountUsd: q.Amount.USD(), Reasons: q.Reasons, HoldExpiresAt: q.HoldExpiresAt,
		Receipt: m.Receipt, Undo: m.Undo, BudgetRemainingUsd: m.BudgetRemainingUsd}
	if q.Lines != nil {
		out.Lines = ptr(costLines(q.Lines))
	}
	if q.GatedSteps != nil {
		gated := make([]models.QuoteGatedSteps, 0, len(q.GatedSteps))
		for _, g := range q.GatedSteps {
			gated = append(gated, models.QuoteGatedSteps(g))
		}
		out.GatedSteps = &gated
	}
	return out
}

// costLines are cost lines as the contract writes them.
func costLines(cs []service.Cost) []models.CostLine {
	out := make([]models.CostLine, 0, len(cs))
	for _, c := range cs {
		out = append(out, models.CostLine{Item: c.Item, AmountUsd: c.Amount.USD()})
	}
	return out
}

// quoteInfo is the contract's view of a stored quote.
func quoteInfo(q service.Quote) models.QuoteInfo {
	out := models.QuoteInfo{Id: ptr(q.ID), QuoteId: q.ID, ProjectId: q.ProjectID, Decision: models.QuoteDecision(q.Decision), State: models.QuoteState(q.State),
		AmountUsd: q.Amount.USD(), CreatedAt: q.CreatedAt, HoldExpiresAt: q.HoldExpiresAt, Items: make([]models.QuoteItem, 0, len(q.Items))}
	for _, it := range q.Items {
		qi := models.QuoteItem{Kind: models.QuoteItemKind(it.Kind), Domain: optional(it.Domain), Name: optional(it.Name)}
		if it.Years > 0 {
			qi.Years = ptr(it.Years)
		}
		if it.Months > 0 {
			qi.Months = ptr(it.Months)
		}
		if it.Target != "" {
			qi.Target = ptr(models.TargetName(it.Target))
		}
		if it.Workload != "" {
			qi.Workload = ptr(models.Workload(it.Workload))
		}
		out.Items = append(out.Items, qi)
	}
	return out
}

// createdNext is what a new quote offers: the call that consumes a held
// one; the gate of one that waits for a human; a budget raise or a policy
// change, then stopping, for a denied one.
func createdNext(q *service.Quote) []models.Action {
	switch q.Decision {
	case service.QuoteAllow:
		return quoteNext(q)
	case service.QuoteRequiresApproval:
		return actions.Gate(q.GateTaskID, q.ApprovalURL)
	}
	if slices.Contains(q.Reasons, "budget:insufficient") {
		short := q.Amount - q.BudgetRemaining
		return []models.Action{
			actions.Tool("request_budget_raise", "agent", map[string]any{"id": q.ProjectID, "amountUsd": short.USD(), "reason": "quote " + q.ID}),
			actions.Stop("denied"),
		}
	}
	return []models.Action{actions.Manual("change_policy", "human"), actions.Stop("denied")}
}

// quoteNext is what a held quote offers next: the call that consumes it.
// A launch consumes a quote for a service and its domain; setup_email
// consumes a quote for one domain's mail. A launch never sets up mail, so a
// quote that holds mail is never offered to launch_service: a quote mixing
// both, which no single call consumes, is offered as separate quotes.
func quoteNext(q *service.Quote) []models.Action {
	var launch, mail []service.QuoteItem
	for _, it := range q.Items {
		if it.Kind == service.ItemEmail {
			mail = append(mail, it)
		} else {
			launch = append(launch, it)
		}
	}
	release := actions.Tool("release_quote", "agent", map[string]any{"id": q.ID})
	switch {
	case len(mail) == 0:
		return []models.Action{launchFromQuote(q.ProjectID, q.ID, q.Items), release}
	case len(launch) == 0 && len(mail) == 1:
		return []models.Action{actions.Tool("setup_email", "agent", map[string]any{"domain": mail[0].Domain, "quoteId": q.ID}), release}
	}
	var out []models.Action
	if len(launch) > 0 {
		out = append(out, actions.Tool("create_quote", "agent", service.QuoteArgs(q.ProjectID, launch)))
	}
	for _, m := range mail {
		out = append(out, actions.Tool("create_quote", "agent", service.QuoteArgs(q.ProjectID, []service.QuoteItem{m})))
	}
	return append(out, release)
}

// launchFromQuote is the launch a quote prices: its service's name and
// target and its domain, carried from the quote's items. An edge launch
// also needs the bundle, which the agent uploads.
func launchFromQuote(projectID, quoteID string, items []service.QuoteItem) models.Action {
	args := map[string]any{"id": projectID, "quoteId": quoteID}
	target := "edge"
	for _, it := range items {
		switch it.Kind {
		case service.ItemDomain:
			args["domain"], args["years"] = it.Domain, max(it.Years, 1)
		case service.ItemService:
			if it.Name != "" {
				args["name"] = it.Name
			}
			if it.Target != "" {
				target = it.Target
			}
		}
	}
	args["target"] = target
	if target == "edge" {
		return actions.ToolNeeding("launch_service", "agent", args, "bundleId")
	}
	return actions.Tool("launch_service", "agent", args)
}

// estimateResult is the contract's view of an estimate.
func estimateResult(e *service.Estimate) models.EstimateResult {
	out := models.EstimateResult{Workload: models.Workload(e.Workload), SelectedTarget: e.Selected, MonthlyUsd: e.Monthly.USD(),
		SelectionReason: models.EstimateResultSelectionReason(e.SelectionReason), CatalogVersion: e.CatalogVersion,
		Addons: targetOptions(e.Addons), Considered: targetOptions(e.Considered)}
	for _, ev := range e.Evidence {
		out.Evidence = append(out.Evidence, models.Evidence{Code: models.EvidenceCode(ev.Code), Target: optional(ev.Target), Detail: optional(ev.Detail)})
	}
	for _, a := range e.Assumptions {
		out.Assumptions = append(out.Assumptions, models.PricingAssumption{Name: a.Name, Value: a.Value, Unit: a.Unit,
			Source: ptr(models.PricingAssumptionSource(a.Source))})
	}
	return out
}

// targetOptions are the targets an estimate priced, as the contract
// writes them.
func targetOptions(opts []service.TargetOption) []models.TargetOption {
	out := make([]models.TargetOption, 0, len(opts))
	for _, t := range opts {
		opt := models.TargetOption{Target: t.Target, Kind: models.TargetOptionKind(t.Kind), Capable: t.Capable,
			Capabilities: t.Capabilities, Reason: models.TargetOptionReason(t.Reason)}
		if len(t.Missing) > 0 {
			opt.MissingCapabilities = ptr(t.Missing)
		}
		if t.Capable {
			opt.MonthlyUsd, opt.Lines = ptr(t.Monthly.USD()), ptr(costLines(t.Lines))
		}
		out = append(out, opt)
	}
	return out
}
