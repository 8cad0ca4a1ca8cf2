package service

import (
	"context"
	"fmt"
	"sort"

	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/pricing"
)

const (
	defaultMonthlyRequests = 100_000
	defaultEgressMicroGB   = 10 * 1_000_000
)

// Estimate prices a workload over the target catalog (SPEC §2.6).
func (s *Service) Estimate(ctx context.Context, req sdk.EstimateRequest) (*sdk.EstimateResult, []sdk.Action, error) {
	need, ok := pricing.Needs[string(req.Workload)]
	if !ok {
		return nil, nil, apierr.Newf("input:invalid", "workload %q is not one of static_site, dynamic_service, worker, database_backed_app, mail_enabled_app", req.Workload).
			WithActions(actions.Manual("fix_input", "agent"))
	}
	usage := pricing.Usage{Requests: defaultMonthlyRequests, EgressMicroGB: defaultEgressMicroGB}
	reqSource, egressSource := sdk.PricingAssumptionSourceDefault, sdk.PricingAssumptionSourceDefault
	if req.MonthlyRequests != nil {
		usage.Requests = int64(*req.MonthlyRequests)
		reqSource = sdk.PricingAssumptionSourceRequest
	}
	if req.MonthlyEgressGb != nil {
		usage.EgressMicroGB = microUSD(*req.MonthlyEgressGb) // same fixed-point scale
		egressSource = sdk.PricingAssumptionSourceRequest
	}

	// Add-ons every capable option carries.
	var addons []sdk.TargetOption
	var addonTotal pricing.MicroUSD
	var evidence []sdk.Evidence
	for _, c := range need.Addons {
		a, ok := pricing.AddonFor(c)
		if !ok {
			return nil, nil, apierr.Internal(fmt.Errorf("no add-on provides %q", c))
		}
		lines := pricing.Monthly(a, usage)
		total := pricing.Total(lines)
		addonTotal += total
		addons = append(addons, targetOption(a, true, nil, lines, total, sdk.TargetOptionReasonAddonRequired))
		name := a.Name
		evidence = append(evidence, sdk.Evidence{Code: sdk.EvidenceCodeAddonAttached, Target: &name})
	}

	type priced struct {
		t     pricing.Target
		total pricing.MicroUSD
		lines []pricing.Line
	}
	var capable []priced
	considered := map[string]*sdk.TargetOption{}
	var order []string
	for _, t := range pricing.Targets {
		if t.Kind != "compute" {
			continue
		}
		order = append(order, t.Name)
		if !t.Has(need.Compute) {
			opt := targetOption(t, false, []string{need.Compute}, nil, 0, sdk.TargetOptionReasonMissingCapability)
			considered[t.Name] = &opt
			continue
		}
		lines := pricing.Monthly(t, usage)
		total := pricing.Total(lines) + addonTotal
		capable = append(capable, priced{t, total, lines})
		opt := targetOption(t, true, nil, lines, total, sdk.TargetOptionReasonCapableNotCheapest)
		considered[t.Name] = &opt
	}
	sort.SliceStable(capable, func(i, j int) bool { return capable[i].total < capable[j].total })
	if len(capable) == 0 {
		return nil, nil, apierr.Internal(fmt.Errorf("no target can run %s", req.Workload))
	}
	cheapest := capable[0]

	selected := cheapest
	reason := sdk.EstimateResultSelectionReasonCheapestCapable
	if req.Target != nil {
		t, ok := pricing.Lookup(string(*req.Target))
		switch {
		case !ok:
			return nil, nil, apierr.Newf("plan:unknown_target", "target %q is not in the catalog; omit target to get the cheapest capable one", *req.Target).
				WithActions(actions.Tool("estimate", "agent", map[string]any{"workload": string(req.Workload)})).
				WithDetails(sdk.FieldProblem{Field: "body.target", Problem: "unknown target"})
		case t.Kind != "compute":
			return nil, nil, apierr.Newf("plan:target_incapable", "%s is an add-on that comes with the workload, not a target to run it on", t.Name).
				WithActions(actions.Tool("estimate", "agent", map[string]any{"workload": string(req.Workload)})).
				WithDetails(sdk.FieldProblem{Field: "body.target", Problem: "add-on, not a compute target"})
		case !t.Has(need.Compute):
			return nil, nil, apierr.Newf("plan:target_incapable", "target %s cannot run a %s (it lacks %s); %s can", t.Name, req.Workload, need.Compute, cheapest.t.Name).
				WithActions(actions.Tool("estimate", "agent", map[string]any{"workload": string(req.Workload), "target": cheapest.t.Name})).
				WithDetails(sdk.FieldProblem{Field: "body.target", Problem: "missing capability " + need.Compute})
		}
		for _, c := range capable {
			if c.t.Name == t.Name {
				selected = c
			}
		}
		reason = sdk.EstimateResultSelectionReasonExplicitTarget
		name := t.Name
		evidence = append([]sdk.Evidence{{Code: sdk.EvidenceCodeExplicitTarget, Target: &name}}, evidence...)
		if cheapest.total < selected.total {
			cn := cheapest.t.Name
			detail := fmt.Sprintf("%s costs %.2f USD a month less", cn, usd(selected.total-cheapest.total))
			evidence = append(evidence, sdk.Evidence{Code: sdk.EvidenceCodeCheaperCapableExists, Target: &cn, Detail: &detail})
		}
		considered[selected.t.Name].Reason = sdk.TargetOptionReasonExplicitTarget
	} else {
		name := selected.t.Name
		evidence = append([]sdk.Evidence{{Code: sdk.EvidenceCodeCheapestCapableSelected, Target: &name}}, evidence...)
		considered[selected.t.Name].Reason = sdk.TargetOptionReasonCheapestCapable
	}

	res := &sdk.EstimateResult{
		Workload:        req.Workload,
		SelectedTarget:  selected.t.Name,
		MonthlyUsd:      usd(selected.total),
		SelectionReason: reason,
		Addons:          addons,
		Evidence:        evidence,
		CatalogVersion:  pricing.CatalogVersion,
		Assumptions: []sdk.PricingAssumption{
			{Name: "monthlyRequests", Value: float64(usage.Requests), Unit: "requests/month", Source: &reqSource},
			{Name: "monthlyEgressGb", Value: float64(usage.EgressMicroGB) / 1e6, Unit: "GB/month", Source: &egressSource},
			{Name: "billingPeriod", Value: 730, Unit: "hours/month", Source: ptr(sdk.PricingAssumptionSourceCatalog)},
			{Name: "currency", Value: 1, Unit: "USD (fake money in the sandbox)", Source: ptr(sdk.PricingAssumptionSourceCatalog)},
		},
	}
	if res.Addons == nil {
		res.Addons = []sdk.TargetOption{}
	}
	for _, name := range order {
		res.Considered = append(res.Considered, *considered[name])
	}
	next := []sdk.Action{
		actions.Tool("create_quote", "agent", map[string]any{
			"items": []any{map[string]any{"kind": "service", "target": selected.t.Name, "workload": string(req.Workload), "months": 1}},
		}),
		actions.Stop("done"),
	}
	return res, next, nil
}

func targetOption(t pricing.Target, capable bool, missing []string, lines []pricing.Line, total pricing.MicroUSD, reason sdk.TargetOptionReason) sdk.TargetOption {
	opt := sdk.TargetOption{
		Target:       t.Name,
		Kind:         sdk.TargetOptionKind(t.Kind),
		Capable:      capable,
		Capabilities: append([]string{}, t.Capabilities...),
		Reason:       reason,
	}
	if len(missing) > 0 {
		opt.MissingCapabilities = &missing
	}
	if capable {
		v := usd(total)
		opt.MonthlyUsd = &v
		ls := make([]sdk.CostLine, 0, len(lines))
		for _, l := range lines {
			ls = append(ls, sdk.CostLine{Item: l.Item, AmountUsd: usd(l.Amount)})
		}
		opt.Lines = &ls
	}
	return opt
}

func ptr[T any](v T) *T { return &v }
