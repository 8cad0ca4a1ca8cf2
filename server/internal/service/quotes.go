package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/pricing"
	"github.com/pierhq/pier/server/internal/registrar"
	"github.com/pierhq/pier/server/internal/store"
)

// matchQuote refuses a launch its quote does not price: another target or
// service name, a domain the launch does not buy, no price for the domain
// it does buy, mail, which a launch never sets up (setup_email does), or a
// database add-on the launch does not ask for (or the reverse). A launch
// never pays for what it does not get.
func matchQuote(projectID string, c Consumed, req models.LaunchRequest, domain string, owned bool, addons []string) error {
	var why []string
	postgres := slices.Contains(addons, "managed_postgres")
	buys := domain != "" && !owned
	priced := false
	for _, it := range c.Items {
		switch it.Kind {
		case "email":
			why = append(why, "it prices mail for "+it.Domain+", which a launch does not set up (setup_email does)")
		case "domain":
			if buys && it.Domain == domain {
				priced = true
				continue
			}
			why = append(why, "it prices the domain "+it.Domain+", which this launch does not buy")
		case "service":
			if it.Target != string(req.Target) {
				why = append(why, fmt.Sprintf("it prices target %s, and the launch is %s", it.Target, req.Target))
			}
			if it.Name != "" && it.Name != req.Name {
				why = append(why, fmt.Sprintf("it prices the service %s, and the launch is %s", it.Name, req.Name))
			}
			if priced := it.Workload == "database_backed_app"; priced != postgres {
				if postgres {
					why = append(why, "it does not price the managed_postgres add-on the launch asks for (quote workload database_backed_app)")
				} else {
					why = append(why, "it prices the managed_postgres add-on, and the launch asks for no database")
				}
			}
		}
	}
	if buys && !priced {
		why = append(why, "it does not price the domain "+domain)
	}
	if len(why) == 0 {
		return nil
	}
	items := []any{}
	if buys {
		years := 1
		if req.Years != nil {
			years = *req.Years
		}
		items = append(items, map[string]any{"kind": "domain", "domain": domain, "years": years})
	}
	for _, it := range c.Items {
		if it.Kind == "service" {
			items = append(items, map[string]any{"kind": "service", "workload": it.Workload, "target": req.Target, "name": req.Name, "months": max(it.Months, 1)})
		}
	}
	acts := []models.Action{actions.Tool("release_quote", "agent", map[string]any{"id": c.QuoteID})}
	if len(items) > 0 {
		acts = append([]models.Action{actions.Tool("create_quote", "agent", map[string]any{"projectId": projectID, "items": items})}, acts...)
	} else {
		// Nothing of this launch costs anything: launch without a quote.
		args := map[string]any{"id": projectID, "name": req.Name, "target": req.Target}
		if req.BundleId != nil {
			args["bundleId"] = *req.BundleId
		}
		if domain != "" {
			args["domain"] = domain
		}
		acts = append([]models.Action{actions.Tool("launch_service", "agent", args)}, acts...)
	}
	return apierr.Newf("conflict:quote_mismatch", "quote %s does not match this launch: %s; quote again for what this launch does", c.QuoteID, strings.Join(why, "; ")).
		WithActions(acts...)
}

// quoteView reads a held quote whose hold has lapsed at now as expired,
// whether or not a write has marked it so yet.
func quoteView(q store.Quote, now time.Time) (models.QuoteInfo, error) {
	if QuoteState(q.State) == QuoteHeld && !q.ExpiresAt.After(now) {
		q.State = "expired"
	}
	var items []pricedItem
	if err := json.Unmarshal([]byte(q.Items), &items); err != nil {
		return models.QuoteInfo{}, err
	}
	out := models.QuoteInfo{Id: &q.ID, QuoteId: q.ID, ProjectId: q.ProjectID, Decision: models.QuoteDecision(q.Decision), State: models.QuoteState(q.State),
		AmountUsd: money.MicroUSD(q.AmountMicro).USD(), CreatedAt: q.CreatedAt, Items: []models.QuoteItem{}}
	if QuoteState(q.State) == QuoteHeld {
		e := q.ExpiresAt
		out.HoldExpiresAt = &e
	}
	for _, it := range items {
		qi := models.QuoteItem{Kind: models.QuoteItemKind(it.Kind)}
		if it.Domain != "" {
			d := models.DomainName(it.Domain)
			qi.Domain = &d
		}
		if it.Years > 0 {
			y := it.Years
			qi.Years = &y
		}
		if it.Target != "" {
			t := models.TargetName(it.Target)
			qi.Target = &t
		}
		if it.Workload != "" {
			w := models.Workload(it.Workload)
			qi.Workload = &w
		}
		if it.Months > 0 {
			m := it.Months
			qi.Months = &m
		}
		if it.Name != "" {
			n := it.Name
			qi.Name = &n
		}
		out.Items = append(out.Items, qi)
	}
	return out, nil
}

func targetOption(t pricing.Target, capable bool, missing []string, lines []pricing.Line, total pricing.MicroUSD, reason models.TargetOptionReason) models.TargetOption {
	opt := models.TargetOption{
		Target:       t.Name,
		Kind:         models.TargetOptionKind(t.Kind),
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
		ls := make([]models.CostLine, 0, len(lines))
		for _, l := range lines {
			ls = append(ls, models.CostLine{Item: l.Item, AmountUsd: usd(l.Amount)})
		}
		opt.Lines = &ls
	}
	return opt
}

func ptr[T any](v T) *T { return &v }

// pricedItem is one quote item with its price, as stored with the quote so
// that consume can recheck it.
type pricedItem struct {
	Kind     string `json:"kind"`
	Domain   string `json:"domain,omitempty"`
	Years    int    `json:"years,omitempty"`
	Target   string `json:"target,omitempty"`
	Workload string `json:"workload,omitempty"`
	Months   int    `json:"months,omitempty"`
	// Name is the service a service item prices; empty on older quotes.
	Name        string         `json:"name,omitempty"`
	AmountMicro money.MicroUSD `json:"amountMicroUsd"`
	// FirstYear and AnnualRenewal are what the policy ceilings compare.
	FirstYearMicro     money.MicroUSD `json:"firstYearMicroUsd,omitempty"`
	AnnualRenewalMicro money.MicroUSD `json:"annualRenewalMicroUsd,omitempty"`
}

func (it pricedItem) label() string {
	switch it.Kind {
	case "domain":
		return "domain:" + it.Domain
	case "email":
		return fmt.Sprintf("email:%s:%dmo", it.Domain, it.Months)
	}
	return fmt.Sprintf("service:%s:%dmo", it.Target, it.Months)
}

// priceItems prices quote items from the catalogs. Errors here are about
// the request itself (an unsellable name, an incapable target); what the
// policy or the budget thinks comes after.
func priceItems(prices registrar.PriceList, items []models.QuoteItem) ([]pricedItem, error) {
	var out []pricedItem
	for i, it := range items {
		field := fmt.Sprintf("body.items.%d", i)
		switch it.Kind {
		case models.Domain:
			if it.Domain == nil {
				return nil, apierr.New("input:invalid", "a domain item needs domain").WithDetails(models.FieldProblem{Field: field + ".domain", Problem: "missing"})
			}
			name := strings.ToLower(*it.Domain)
			label, tldName, _ := strings.Cut(name, ".")
			tld, ok := prices.Lookup(tldName)
			if !ok || strings.Contains(tldName, ".") {
				return nil, apierr.Newf("plan:domain_unavailable", "%s: the registrar does not sell .%s", name, tldName).
					WithActions(actions.Tool("search_domains", "agent", map[string]any{"q": label, "includeExotic": true}))
			}
			q := registrar.Check(label, tld)
			if !q.Available {
				return nil, apierr.Newf("plan:domain_unavailable", "%s is already registered", name).
					WithActions(actions.Tool("search_domains", "agent", map[string]any{"q": label}))
			}
			years := 1
			if it.Years != nil {
				years = *it.Years
			}
			annual := tld.AnnualizedRenewal()
			if q.FirstYear == nil || (years > 1 && annual == nil) {
				return nil, apierr.Newf("price:unavailable", "%s has no published price; it cannot be bought here", name).
					WithActions(actions.Tool("search_domains", "agent", map[string]any{"q": label, "maxFirstYearPriceUsd": 1000}))
			}
			amount := *q.FirstYear
			var annualMicro money.MicroUSD
			if annual != nil {
				annualMicro = *annual
				amount += money.MicroUSD(years-1) * annualMicro
			}
			out = append(out, pricedItem{Kind: "domain", Domain: name, Years: years, AmountMicro: amount,
				FirstYearMicro: *q.FirstYear, AnnualRenewalMicro: annualMicro})
		case models.Service:
			if it.Workload == nil {
				return nil, apierr.New("input:invalid", "a service item needs workload").WithDetails(models.FieldProblem{Field: field + ".workload", Problem: "missing"})
			}
			target := ""
			if it.Target != nil {
				target = string(*it.Target)
			}
			monthly, chosen, err := priceService(string(*it.Workload), target)
			if err != nil {
				return nil, err
			}
			months := 1
			if it.Months != nil {
				months = *it.Months
			}
			name := ""
			if it.Name != nil {
				name = *it.Name
			}
			out = append(out, pricedItem{Kind: "service", Target: chosen, Workload: string(*it.Workload), Months: months, Name: name, AmountMicro: monthly * money.MicroUSD(months)})
		case models.Email:
			if it.Domain == nil {
				return nil, apierr.New("input:invalid", "an email item needs the domain whose mail it sets up").WithDetails(models.FieldProblem{Field: field + ".domain", Problem: "missing"})
			}
			addon, _ := pricing.AddonFor("mail")
			months := 1
			if it.Months != nil {
				months = *it.Months
			}
			out = append(out, pricedItem{Kind: "email", Domain: strings.ToLower(*it.Domain), Months: months, AmountMicro: addon.Base * money.MicroUSD(months)})
		default:
			return nil, apierr.Newf("input:invalid", "item kind %q is not domain, service or email", it.Kind)
		}
	}
	return out, nil
}

// priceService is the monthly price of a workload on a target (the
// cheapest capable one when target is empty), with default usage.
func priceService(workload, target string) (money.MicroUSD, string, error) {
	need, ok := pricing.Needs[workload]
	if !ok {
		return 0, "", apierr.Newf("input:invalid", "workload %q is unknown", workload)
	}
	usage := pricing.Usage{Requests: defaultMonthlyRequests, EgressMicroGB: defaultEgressMicroGB}
	var addons pricing.MicroUSD
	for _, c := range need.Addons {
		a, _ := pricing.AddonFor(c)
		addons += pricing.Total(pricing.Monthly(a, usage))
	}
	best, bestName := pricing.MicroUSD(-1), ""
	for _, t := range pricing.Targets {
		if t.Kind != "compute" || !t.Has(need.Compute) || (target != "" && t.Name != target) {
			continue
		}
		if total := pricing.Total(pricing.Monthly(t, usage)) + addons; best < 0 || total < best {
			best, bestName = total, t.Name
		}
	}
	if best < 0 {
		return 0, "", apierr.Newf("plan:target_incapable", "target %q cannot run a %s", target, workload).
			WithActions(actions.Tool("estimate", "agent", map[string]any{"workload": workload}))
	}
	return best, bestName, nil
}

// policyReasons lists what the project's policy refuses about the items.
func policyReasons(pol models.ProjectPolicy, items []pricedItem) []models.BlockedBy {
	var out []models.BlockedBy
	add := func(r models.BlockedBy) {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	for _, it := range items {
		if it.Kind != "domain" {
			continue
		}
		_, tld, _ := strings.Cut(it.Domain, ".")
		if (len(pol.TldAllowlist) > 0 && !slices.Contains(pol.TldAllowlist, tld)) || slices.Contains(pol.TldDenylist, tld) {
			add("policy:tld_denied")
		}
		if pol.MaxFirstYearPriceUsd != nil && it.FirstYearMicro > money.FromUSD(*pol.MaxFirstYearPriceUsd) {
			add("policy:price_ceiling")
		}
		if pol.MaxRenewalPriceUsd != nil && (it.AnnualRenewalMicro == 0 || it.AnnualRenewalMicro > money.FromUSD(*pol.MaxRenewalPriceUsd)) {
			add("policy:price_ceiling")
		}
	}
	return out
}

func needsApproval(pol models.ProjectPolicy, amount money.MicroUSD) bool {
	return pol.ApprovalRules.ApprovalAboveUsd != nil && amount > money.FromUSD(*pol.ApprovalRules.ApprovalAboveUsd)
}

func total(items []pricedItem) money.MicroUSD {
	var t money.MicroUSD
	for _, it := range items {
		t += it.AmountMicro
	}
	return t
}

func gatedSteps(items []pricedItem, p *auth.Principal, pol models.ProjectPolicy) []models.QuoteGatedSteps {
	if p.HasScope("buy_domain") {
		return []models.QuoteGatedSteps{}
	}
	for _, it := range items {
		if it.Kind == "domain" {
			return []models.QuoteGatedSteps{models.DomainRegistration}
		}
	}
	return []models.QuoteGatedSteps{}
}

func actorOf(p *auth.Principal) string {
	if p.KeyID != "" {
		return "key:" + p.KeyID
	}
	if p.GrantID != "" {
		return "oauth:" + p.GrantID
	}
	return p.Kind
}

// Consumed is what ConsumeQuote spent.
type Consumed struct {
	QuoteID, ProjectID string
	AmountMicro        money.MicroUSD
	RemainingMicro     money.MicroUSD
	Items              []pricedItem
}

// quoteArgs are create_quote's arguments for items: the same things
// priced again.
// launchFromQuote is the launch a quote prices: its service's name and
// target and its domain, carried from the quote's items. An edge launch
// also needs the bundle, which the agent uploads.
func launchFromQuote(projectID, quoteID string, items []pricedItem) models.Action {
	args := map[string]any{"id": projectID, "quoteId": quoteID}
	target := "edge"
	for _, it := range items {
		switch it.Kind {
		case "domain":
			args["domain"], args["years"] = it.Domain, max(it.Years, 1)
		case "service":
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

// quoteNext is what a held quote offers next: the call that consumes it.
// A launch consumes a quote for a service and its domain; setup_email
// consumes a quote for one domain's mail. A launch never sets up mail, so a
// quote that holds mail is never offered to launch_service: a quote mixing
// both, which no single call consumes, is offered as separate quotes.
func quoteNext(projectID, quoteID string, items []pricedItem) []models.Action {
	var launch, mail []pricedItem
	for _, it := range items {
		if it.Kind == "email" {
			mail = append(mail, it)
		} else {
			launch = append(launch, it)
		}
	}
	release := actions.Tool("release_quote", "agent", map[string]any{"id": quoteID})
	switch {
	case len(mail) == 0:
		return []models.Action{launchFromQuote(projectID, quoteID, items), release}
	case len(launch) == 0 && len(mail) == 1:
		return []models.Action{actions.Tool("setup_email", "agent", map[string]any{"domain": mail[0].Domain, "quoteId": quoteID}), release}
	}
	var out []models.Action
	if len(launch) > 0 {
		out = append(out, actions.Tool("create_quote", "agent", quoteArgs(projectID, launch)))
	}
	for _, m := range mail {
		out = append(out, actions.Tool("create_quote", "agent", quoteArgs(projectID, []pricedItem{m})))
	}
	return append(out, release)
}

func quoteArgs(projectID string, items []pricedItem) map[string]any {
	list := []any{}
	for _, it := range items {
		m := map[string]any{"kind": it.Kind}
		switch it.Kind {
		case "domain":
			m["domain"], m["years"] = it.Domain, max(it.Years, 1)
		case "email":
			m["domain"], m["months"] = it.Domain, max(it.Months, 1)
		default:
			m["workload"], m["target"], m["months"] = it.Workload, it.Target, max(it.Months, 1)
			if it.Name != "" {
				m["name"] = it.Name
			}
		}
		list = append(list, m)
	}
	return map[string]any{"projectId": projectID, "items": list}
}

// awaitApproval is ConsumeQuote's answer for a quote still waiting for a
// human: the launch waits on the quote's gate.
type awaitApproval struct {
	GateID, QuoteID string
	AmountMicro     money.MicroUSD
}

func (a *awaitApproval) Error() string {
	return "quote " + a.QuoteID + " waits for a human on " + a.GateID
}

// CreateQuote prices the items, checks policy, approval rules and budget
// under the project's lock, and on ALLOW holds the amount for 15 minutes.
func (s *Quotes) Create(ctx context.Context, p *auth.Principal, req models.QuoteRequest) (*models.Quote, []models.Action, error) {
	items, err := priceItems(s.prices, req.Items)
	if err != nil {
		return nil, nil, err
	}
	if err := s.offered(items); err != nil {
		return nil, nil, err
	}
	for _, it := range items {
		if it.Kind == "domain" {
			if err := s.launches.domainFree(ctx, p, req.ProjectId, it.Domain); err != nil {
				return nil, nil, err
			}
		}
	}
	var out *models.Quote
	var next []models.Action
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		out, next, err = s.createLocked(ctx, tx, p, req.ProjectId, items)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return out, next, nil
}

// createLocked decides and records a quote under the project's lock.
func (s *Quotes) createLocked(ctx context.Context, tx *store.Tx, p *auth.Principal, projectID string, items []pricedItem) (*models.Quote, []models.Action, error) {
	now := s.Now()
	proj, err := tx.Projects().Lock(ctx, p.OrgID, projectID)
	if errors.Is(err, store.ErrNotFound) || err == nil && proj.DeletedAt != nil {
		return nil, nil, projectNotFound(projectID)
	}
	if err != nil {
		return nil, nil, err
	}
	if err := s.projects.expireHolds(ctx, tx, &proj, now); err != nil {
		return nil, nil, err
	}
	pol, err := decodePolicy(proj.Policy)
	if err != nil {
		return nil, nil, err
	}
	amount := total(items)
	if amount > 0 && exhausted(proj) {
		return nil, nil, budgetExhausted(proj, pol, s.baseURL())
	}
	if err := s.checkKeyCap(ctx, tx, p, amount, now); err != nil {
		return nil, nil, err
	}
	itemsJSON, _ := json.Marshal(items)
	q := store.Quote{ID: auth.ID("quo"), OrgID: p.OrgID, ProjectID: proj.ID, KeyID: p.KeyID, AmountMicro: amount,
		Items: string(itemsJSON), CreatedAt: now.UTC(), ExpiresAt: now.Add(HoldDuration).UTC(), State: "not_held"}
	reasons, next, err := s.decide(ctx, tx, p, &proj, &q, pol, items, now)
	if err != nil {
		return nil, nil, err
	}
	if reasons == nil {
		reasons = []models.BlockedBy{}
	}
	rj, _ := json.Marshal(reasons)
	q.Reasons = string(rj)
	if err := tx.Quotes().Insert(ctx, q); err != nil {
		return nil, nil, err
	}
	if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: "create_quote", ObjectType: "quote", ObjectID: q.ID,
		Details: map[string]any{"projectId": proj.ID, "decision": q.Decision, "amountMicroUsd": amount, "held": QuoteState(q.State) == QuoteHeld, "reasons": reasons}}, now); err != nil {
		return nil, nil, err
	}
	out := s.quoteView(q, proj, items, reasons)
	gs := gatedSteps(items, p, pol)
	out.GatedSteps = &gs
	return out, next, nil
}

// decide sets a new quote's decision: DENY by policy or budget,
// REQUIRES_APPROVAL with a gate open for a human, or ALLOW with the amount
// held. It returns the reasons and what to do next.
func (s *Quotes) decide(ctx context.Context, tx *store.Tx, p *auth.Principal, proj *store.Project, q *store.Quote, pol models.ProjectPolicy, items []pricedItem, now time.Time) ([]models.BlockedBy, []models.Action, error) {
	amount := q.AmountMicro
	reasons := policyReasons(pol, items)
	switch {
	case len(reasons) > 0:
		q.Decision = "DENY"
		return reasons, []models.Action{actions.Manual("change_policy", "human"), actions.Stop("denied")}, nil
	case amount > remaining(*proj):
		q.Decision = "DENY"
		short := amount - remaining(*proj)
		return []models.BlockedBy{"budget:insufficient"}, []models.Action{
			actions.Tool("request_budget_raise", "agent", map[string]any{"id": proj.ID, "amountUsd": usd(short), "reason": "quote " + q.ID}),
			actions.Stop("denied"),
		}, nil
	case needsApproval(pol, amount):
		q.Decision = "REQUIRES_APPROVAL"
		task, err := s.approvals.openGate(ctx, tx, p, proj.ID, "quote_approval", map[string]any{
			"quoteId": q.ID, "projectId": proj.ID, "amountMicroUsd": amount, "items": items,
		}, now)
		if err != nil {
			return nil, nil, err
		}
		return []models.BlockedBy{"policy:approval_required"}, s.approvals.gateActions(task), nil
	default:
		q.Decision = "ALLOW"
		q.State = "held"
		if err := tx.Projects().MoveMoney(ctx, proj.ID, amount, 0); err != nil {
			if errors.Is(err, store.ErrBudget) {
				return nil, nil, apierr.New("budget:insufficient", "the budget cannot cover this quote")
			}
			return nil, nil, err
		}
		proj.HeldMicro += amount
		return reasons, quoteNext(proj.ID, q.ID, items), nil
	}
}

// quoteView is a new quote as the API answers it, with its cost lines and,
// when it holds budget, the undo that releases it.
func (s *Quotes) quoteView(q store.Quote, proj store.Project, items []pricedItem, reasons []models.BlockedBy) *models.Quote {
	var undo *models.ToolAction
	if QuoteState(q.State) == QuoteHeld {
		undo = UndoCall("release_quote", map[string]any{"id": q.ID})
	}
	m := s.Mutation("create_quote", nil, []models.ResourceRef{{Type: "quote", Id: q.ID}}, undo, remaining(proj))
	lines := make([]models.CostLine, 0, len(items))
	for _, it := range items {
		lines = append(lines, models.CostLine{Item: it.label(), AmountUsd: usd(it.AmountMicro)})
	}
	out := &models.Quote{
		QuoteId: q.ID, ProjectId: proj.ID, Decision: models.QuoteDecision(q.Decision), State: ptr(models.QuoteState(q.State)),
		AmountUsd: usd(q.AmountMicro), Reasons: reasons, Lines: &lines,
		Receipt: m.Receipt, Undo: m.Undo, BudgetRemainingUsd: m.BudgetRemainingUsd,
	}
	if QuoteState(q.State) == QuoteHeld {
		t := q.ExpiresAt
		out.HoldExpiresAt = &t
	}
	return out
}

// ReleaseQuote gives a held quote's budget back before it expires.
func (s *Quotes) Release(ctx context.Context, p *auth.Principal, id string) (*models.Quote, []models.Action, error) {
	var out *models.Quote
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		now := s.Now()
		q, err := tx.Quotes().Lock(ctx, p.OrgID, id)
		if errors.Is(err, store.ErrNotFound) {
			return apierr.Newf("not_found:resource", "no quote %s in your organisation", id)
		}
		if err != nil {
			return err
		}
		proj, err := tx.Projects().Lock(ctx, p.OrgID, q.ProjectID)
		if err != nil {
			return err
		}
		if err := s.projects.expireHolds(ctx, tx, &proj, now); err != nil {
			return err
		}
		if q, err = tx.Quotes().Lock(ctx, p.OrgID, id); err != nil {
			return err
		}
		if QuoteState(q.State) != QuoteHeld {
			return apierr.Newf("conflict:state", "quote %s is %s, not held", id, q.State).WithActions(actions.Stop("done"))
		}
		if err := tx.Quotes().Settle(ctx, q.ID, "released", now); err != nil {
			return err
		}
		if err := tx.Projects().MoveMoney(ctx, proj.ID, -q.AmountMicro, 0); err != nil {
			return err
		}
		proj.HeldMicro -= q.AmountMicro
		if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: "release_quote", ObjectType: "quote", ObjectID: q.ID,
			Details: map[string]any{"projectId": proj.ID, "amountMicroUsd": q.AmountMicro}}, now); err != nil {
			return err
		}
		var reasons []models.BlockedBy
		json.Unmarshal([]byte(q.Reasons), &reasons)
		if reasons == nil {
			reasons = []models.BlockedBy{}
		}
		m := s.Mutation("release_quote", nil, nil, nil, remaining(proj))
		out = &models.Quote{QuoteId: q.ID, ProjectId: proj.ID, Decision: models.QuoteDecision(q.Decision), State: ptr(models.QuoteStateReleased),
			AmountUsd: usd(q.AmountMicro), Reasons: reasons, Receipt: m.Receipt, Undo: m.Undo, BudgetRemainingUsd: m.BudgetRemainingUsd}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, []models.Action{actions.Stop("done")}, nil
}

// ConsumeQuote turns a hold into spending: the step launch takes. Under the
// project's lock it rechecks the current budget, policy, price and approval
// rules, and fails with budget:*, policy:*, plan:price_changed or approval:*.
func (s *Quotes) Consume(ctx context.Context, tx *store.Tx, p *auth.Principal, projectID, quoteID string) (Consumed, error) {
	now := s.Now()
	proj, err := tx.Projects().Lock(ctx, p.OrgID, projectID)
	if errors.Is(err, store.ErrNotFound) {
		return Consumed{}, projectNotFound(projectID)
	}
	if err != nil {
		return Consumed{}, err
	}
	if err := s.projects.expireHolds(ctx, tx, &proj, now); err != nil {
		return Consumed{}, err
	}
	q, err := tx.Quotes().Lock(ctx, p.OrgID, quoteID)
	if errors.Is(err, store.ErrNotFound) || err == nil && q.ProjectID != projectID {
		return Consumed{}, apierr.Newf("not_found:resource", "no quote %s for project %s", quoteID, projectID)
	}
	if err != nil {
		return Consumed{}, err
	}
	var items []pricedItem
	if err := json.Unmarshal([]byte(q.Items), &items); err != nil {
		return Consumed{}, err
	}
	requote := actions.Tool("create_quote", "agent", quoteArgs(projectID, items))
	if err := unheldQuote(ctx, tx, p, q, requote); err != nil {
		return Consumed{}, err
	}
	if err := s.recheck(ctx, tx, proj, q, items, requote); err != nil {
		return Consumed{}, err
	}
	if err := tx.Quotes().Settle(ctx, q.ID, "consumed", now); err != nil {
		return Consumed{}, apierr.Newf("conflict:state", "quote %s changed while consuming it", q.ID)
	}
	if err := tx.Projects().MoveMoney(ctx, proj.ID, -q.AmountMicro, q.AmountMicro); err != nil {
		if errors.Is(err, store.ErrBudget) {
			return Consumed{}, apierr.New("budget:insufficient", "the budget no longer covers this quote", actions.Manual("raise_budget", "human"))
		}
		return Consumed{}, err
	}
	proj.HeldMicro -= q.AmountMicro
	proj.SpentMicro += q.AmountMicro
	if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: "consume_quote", ObjectType: "quote", ObjectID: q.ID,
		Details: map[string]any{"projectId": proj.ID, "amountMicroUsd": q.AmountMicro}}, now); err != nil {
		return Consumed{}, err
	}
	return Consumed{QuoteID: q.ID, ProjectID: proj.ID, AmountMicro: q.AmountMicro, RemainingMicro: remaining(proj), Items: items}, nil
}

// unheldQuote is why a quote holds no budget to consume: its hold expired,
// it was used or released, or it was never held (denied, or waiting for a
// human, whose approval then carries the launch on). It is nil for a held
// quote.
func unheldQuote(ctx context.Context, tx *store.Tx, p *auth.Principal, q store.Quote, requote models.Action) error {
	switch QuoteState(q.State) {
	case QuoteExpired:
		return apierr.New("budget:hold_expired", "the quote's 15-minute hold expired; quote again", requote)
	case QuoteConsumed, QuoteReleased:
		return apierr.Newf("conflict:state", "quote %s is already %s", q.ID, q.State).WithActions(requote)
	case QuoteNotHeld:
		if q.Decision == "REQUIRES_APPROVAL" {
			g, err := tx.Quotes().Gate(ctx, p.OrgID, q.ID)
			if err == nil && GateState(g.State) == GatePending {
				// The launch waits on the same gate; the human's approval
				// consumes the quote and carries the launch on.
				return &awaitApproval{GateID: g.ID, QuoteID: q.ID, AmountMicro: q.AmountMicro}
			}
			if err == nil && GateState(g.State) == GateDenied {
				return apierr.Newf("approval:denied", "a human denied quote %s", q.ID).WithActions(requote, actions.Stop("denied"))
			}
		}
		return apierr.Newf("conflict:state", "quote %s was %s and holds no budget", q.ID, q.Decision).WithActions(requote)
	}
	return nil
}

// recheck holds a quote to the project's current policy, prices and
// approval rules: any that moved since the quote voids it.
func (s *Quotes) recheck(ctx context.Context, tx *store.Tx, proj store.Project, q store.Quote, items []pricedItem, requote models.Action) error {
	pol, err := decodePolicy(proj.Policy)
	if err != nil {
		return err
	}
	if reasons := policyReasons(pol, items); len(reasons) > 0 {
		return apierr.Newf(reasons[0], "the project's policy changed since the quote and now refuses it (%v)", reasons).
			WithActions(actions.Manual("change_policy", "human"), requote)
	}
	// Re-price from the catalogs: a moved price voids the quote.
	current, err := priceItems(s.prices, quoteItems(items))
	if err != nil {
		return err
	}
	if total(current) != q.AmountMicro {
		return apierr.Newf("plan:price_changed", "the price moved from %.2f to %.2f USD since the quote", usd(q.AmountMicro), usd(total(current))).WithActions(requote)
	}
	approved, err := tx.Quotes().Approved(ctx, q.ID)
	if err != nil {
		return err
	}
	if needsApproval(pol, q.AmountMicro) && !approved {
		// The policy tightened after an ALLOW quote: a new quote asks the
		// human, and a launch with it waits for the answer.
		return apierr.Newf("policy:approval_required", "the project now needs a human approval for %.2f USD; quote again and launch with the new quote to get an approval URL", usd(q.AmountMicro)).
			WithActions(requote)
	}
	return nil
}

// quoteItems turns priced items back into the request that priced them.
func quoteItems(items []pricedItem) []models.QuoteItem {
	var reqItems []models.QuoteItem
	for _, it := range items {
		ri := models.QuoteItem{Kind: models.QuoteItemKind(it.Kind)}
		switch it.Kind {
		case "domain":
			d, y := it.Domain, it.Years
			ri.Domain, ri.Years = &d, &y
		case "email":
			d, m := it.Domain, it.Months
			ri.Domain, ri.Months = &d, &m
		default:
			w, t, m := models.Workload(it.Workload), models.TargetName(it.Target), it.Months
			ri.Workload, ri.Target, ri.Months = &w, &t, &m
		}
		reqItems = append(reqItems, ri)
	}
	return reqItems
}

// releaseRefusedQuote gives back the hold of a quote whose launch was
// refused because the domain is taken: the launch bought nothing, so the
// hold serves nothing. A quote that is not held is left alone.
func (s *Quotes) releaseRefusedQuote(ctx context.Context, p *auth.Principal, quoteID *string) {
	if quoteID == nil || *quoteID == "" {
		return
	}
	if _, _, err := s.Release(ctx, p, *quoteID); err != nil {
		s.log.Debug("release refused quote", "quote", *quoteID, "err", err)
	}
}

// awaitedQuote reads a quote that waits for a human without consuming it:
// what it prices, for matching against the launch.
func (s *Quotes) awaitedQuote(ctx context.Context, tx *store.Tx, p *auth.Principal, projectID, quoteID string) (Consumed, error) {
	q, err := tx.Quotes().Lock(ctx, p.OrgID, quoteID)
	if err != nil {
		return Consumed{}, err
	}
	proj, err := tx.Projects().Lock(ctx, p.OrgID, projectID)
	if err != nil {
		return Consumed{}, err
	}
	var items []pricedItem
	if err := json.Unmarshal([]byte(q.Items), &items); err != nil {
		return Consumed{}, err
	}
	return Consumed{QuoteID: q.ID, ProjectID: projectID, AmountMicro: q.AmountMicro, RemainingMicro: remaining(proj), Items: items}, nil
}

// ListQuotes lists the organisation's quotes.
func (s *Quotes) List(ctx context.Context, orgID string, f store.Filter) (*models.QuoteInfoList, []models.Action, error) {
	qs, err := s.store.Quotes().List(ctx, orgID, f)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	out := &models.QuoteInfoList{Quotes: []models.QuoteInfo{}}
	for _, q := range qs {
		v, err := quoteView(q, s.Now())
		if err != nil {
			return nil, nil, apierr.Internal(err)
		}
		out.Quotes = append(out.Quotes, v)
	}
	if len(qs) > 0 {
		last := qs[len(qs)-1]
		out.NextCursor = nextCursor(f, len(qs), last.CreatedAt, last.ID)
	}
	return out, pageActions("list_quotes", out.NextCursor, f.Args()), nil
}

// GetQuote reads one quote.
func (s *Quotes) Get(ctx context.Context, orgID, id string) (*models.QuoteInfo, []models.Action, error) {
	q, err := s.store.Quotes().Get(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, notInOrg("quote", id, "list_quotes")
	}
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	v, err := quoteView(q, s.Now())
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	var next []models.Action
	var items []pricedItem
	_ = json.Unmarshal([]byte(q.Items), &items)
	switch v.State {
	case models.QuoteStateHeld:
		next = append(next, quoteNext(q.ProjectID, q.ID, items)...)
	case models.QuoteStateExpired:
		next = append(next, actions.Tool("create_quote", "agent", quoteArgs(q.ProjectID, items)))
	}
	return &v, append(next, actions.Stop("done")), nil
}

// Estimate prices a workload over the target catalog (SPEC §2.6).
func (s *Quotes) Estimate(ctx context.Context, req models.EstimateRequest) (*models.EstimateResult, []models.Action, error) {
	need, ok := pricing.Needs[string(req.Workload)]
	if !ok {
		return nil, nil, apierr.Newf("input:invalid", "workload %q is not one of static_site, dynamic_service, worker, database_backed_app, mail_enabled_app", req.Workload).
			WithActions(actions.Manual("fix_input", "agent"))
	}
	usage := pricing.Usage{Requests: defaultMonthlyRequests, EgressMicroGB: defaultEgressMicroGB}
	reqSource, egressSource := models.PricingAssumptionSourceDefault, models.PricingAssumptionSourceDefault
	if req.MonthlyRequests != nil {
		usage.Requests = int64(*req.MonthlyRequests)
		reqSource = models.PricingAssumptionSourceRequest
	}
	if req.MonthlyEgressGb != nil {
		usage.EgressMicroGB = int64(money.FromUSD(*req.MonthlyEgressGb)) // same fixed-point scale
		egressSource = models.PricingAssumptionSourceRequest
	}
	addons, addonTotal, evidence, err := priceAddons(need, usage)
	if err != nil {
		return nil, nil, err
	}
	tp := priceTargets(need, usage, addonTotal)
	if len(tp.capable) == 0 {
		return nil, nil, apierr.Internal(fmt.Errorf("no target can run %s", req.Workload))
	}
	selected, reason, evidence, err := tp.selectTarget(req, need, evidence)
	if err != nil {
		return nil, nil, err
	}
	res := &models.EstimateResult{
		Workload:        req.Workload,
		SelectedTarget:  selected.t.Name,
		MonthlyUsd:      usd(selected.total),
		SelectionReason: reason,
		Addons:          addons,
		Evidence:        evidence,
		CatalogVersion:  pricing.CatalogVersion,
		Assumptions: []models.PricingAssumption{
			{Name: "monthlyRequests", Value: float64(usage.Requests), Unit: "requests/month", Source: &reqSource},
			{Name: "monthlyEgressGb", Value: float64(usage.EgressMicroGB) / 1e6, Unit: "GB/month", Source: &egressSource},
			{Name: "billingPeriod", Value: 730, Unit: "hours/month", Source: ptr(models.PricingAssumptionSourceCatalog)},
			{Name: "currency", Value: 1, Unit: "USD (fake money in the sandbox)", Source: ptr(models.PricingAssumptionSourceCatalog)},
		},
	}
	if res.Addons == nil {
		res.Addons = []models.TargetOption{}
	}
	for _, name := range tp.order {
		res.Considered = append(res.Considered, *tp.considered[name])
	}
	next := []models.Action{
		actions.Tool("create_quote", "agent", map[string]any{
			"items": []any{map[string]any{"kind": "service", "target": selected.t.Name, "workload": string(req.Workload), "months": 1}},
		}),
		actions.Stop("done"),
	}
	return res, next, nil
}

// priceAddons prices the add-ons every capable option carries.
func priceAddons(need pricing.Need, usage pricing.Usage) ([]models.TargetOption, pricing.MicroUSD, []models.Evidence, error) {
	var addons []models.TargetOption
	var addonTotal pricing.MicroUSD
	var evidence []models.Evidence
	for _, c := range need.Addons {
		a, ok := pricing.AddonFor(c)
		if !ok {
			return nil, 0, nil, apierr.Internal(fmt.Errorf("no add-on provides %q", c))
		}
		lines := pricing.Monthly(a, usage)
		total := pricing.Total(lines)
		addonTotal += total
		addons = append(addons, targetOption(a, true, nil, lines, total, models.TargetOptionReasonAddonRequired))
		name := a.Name
		evidence = append(evidence, models.Evidence{Code: models.EvidenceCodeAddonAttached, Target: &name})
	}
	return addons, addonTotal, evidence, nil
}

// pricedTarget is a compute target able to run the workload, priced with
// its add-ons.
type pricedTarget struct {
	t     pricing.Target
	total pricing.MicroUSD
	lines []pricing.Line
}

// targetPrices is every compute target an estimate considered, in the
// catalog's order, and the capable ones, cheapest first.
type targetPrices struct {
	capable    []pricedTarget
	considered map[string]*models.TargetOption
	order      []string
}

// priceTargets prices each compute target for the workload, with its add-ons.
func priceTargets(need pricing.Need, usage pricing.Usage, addonTotal pricing.MicroUSD) targetPrices {
	tp := targetPrices{considered: map[string]*models.TargetOption{}}
	for _, t := range pricing.Targets {
		if t.Kind != "compute" {
			continue
		}
		tp.order = append(tp.order, t.Name)
		if !t.Has(need.Compute) {
			opt := targetOption(t, false, []string{need.Compute}, nil, 0, models.TargetOptionReasonMissingCapability)
			tp.considered[t.Name] = &opt
			continue
		}
		lines := pricing.Monthly(t, usage)
		total := pricing.Total(lines) + addonTotal
		tp.capable = append(tp.capable, pricedTarget{t, total, lines})
		opt := targetOption(t, true, nil, lines, total, models.TargetOptionReasonCapableNotCheapest)
		tp.considered[t.Name] = &opt
	}
	sort.SliceStable(tp.capable, func(i, j int) bool { return tp.capable[i].total < tp.capable[j].total })
	return tp
}

// selectTarget picks the target the request names, refusing one that
// cannot run the workload and saying when a cheaper one could, or else the
// cheapest capable one; the evidence leads with why.
func (tp targetPrices) selectTarget(req models.EstimateRequest, need pricing.Need, evidence []models.Evidence) (pricedTarget, models.EstimateResultSelectionReason, []models.Evidence, error) {
	cheapest := tp.capable[0]
	selected := cheapest
	if req.Target == nil {
		name := selected.t.Name
		evidence = append([]models.Evidence{{Code: models.EvidenceCodeCheapestCapableSelected, Target: &name}}, evidence...)
		tp.considered[selected.t.Name].Reason = models.TargetOptionReasonCheapestCapable
		return selected, models.EstimateResultSelectionReasonCheapestCapable, evidence, nil
	}
	t, ok := pricing.Lookup(string(*req.Target))
	switch {
	case !ok:
		return selected, "", nil, apierr.Newf("plan:unknown_target", "target %q is not in the catalog; omit target to get the cheapest capable one", *req.Target).
			WithActions(actions.Tool("estimate", "agent", map[string]any{"workload": string(req.Workload)})).
			WithDetails(models.FieldProblem{Field: "body.target", Problem: "unknown target"})
	case t.Kind != "compute":
		return selected, "", nil, apierr.Newf("plan:target_incapable", "%s is an add-on that comes with the workload, not a target to run it on", t.Name).
			WithActions(actions.Tool("estimate", "agent", map[string]any{"workload": string(req.Workload)})).
			WithDetails(models.FieldProblem{Field: "body.target", Problem: "add-on, not a compute target"})
	case !t.Has(need.Compute):
		return selected, "", nil, apierr.Newf("plan:target_incapable", "target %s cannot run a %s (it lacks %s); %s can", t.Name, req.Workload, need.Compute, cheapest.t.Name).
			WithActions(actions.Tool("estimate", "agent", map[string]any{"workload": string(req.Workload), "target": cheapest.t.Name})).
			WithDetails(models.FieldProblem{Field: "body.target", Problem: "missing capability " + need.Compute})
	}
	for _, c := range tp.capable {
		if c.t.Name == t.Name {
			selected = c
		}
	}
	name := t.Name
	evidence = append([]models.Evidence{{Code: models.EvidenceCodeExplicitTarget, Target: &name}}, evidence...)
	if cheapest.total < selected.total {
		cn := cheapest.t.Name
		detail := fmt.Sprintf("%s costs %.2f USD a month less", cn, usd(selected.total-cheapest.total))
		evidence = append(evidence, models.Evidence{Code: models.EvidenceCodeCheaperCapableExists, Target: &cn, Detail: &detail})
	}
	tp.considered[selected.t.Name].Reason = models.TargetOptionReasonExplicitTarget
	return selected, models.EstimateResultSelectionReasonExplicitTarget, evidence, nil
}

const (
	defaultMonthlyRequests = 100_000
	defaultEgressMicroGB   = 10 * 1_000_000
)

// offered refuses items this deployment cannot deliver: a database-backed
// service without a PostgreSQL for the managed_postgres add-on.
func (s *Quotes) offered(items []pricedItem) error {
	for _, it := range items {
		if it.Kind == "service" && it.Workload == "database_backed_app" && s.databases == nil {
			return addonUnavailable()
		}
	}
	return nil
}
