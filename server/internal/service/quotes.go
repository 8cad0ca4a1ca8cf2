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

	"golang.org/x/net/publicsuffix"

	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/pricing"
	"github.com/pierhq/pier/server/internal/registrar"
	"github.com/pierhq/pier/server/internal/store"
)

// QuoteDecision is what a quote's checks decided: the amount is held, a
// human must approve it, or the policy or the budget refuses it.
type QuoteDecision string

const (
	QuoteAllow            QuoteDecision = "ALLOW"
	QuoteDeny             QuoteDecision = "DENY"
	QuoteRequiresApproval QuoteDecision = "REQUIRES_APPROVAL"
)

// QuoteItemKind is what a quote item prices.
type QuoteItemKind string

const (
	ItemDomain  QuoteItemKind = "domain"
	ItemService QuoteItemKind = "service"
	ItemEmail   QuoteItemKind = "email"
)

// GatedStep is a step of a launch that waits for a human.
type GatedStep string

// GatedDomainRegistration is a domain purchase by a key without the
// buy_domain scope.
const GatedDomainRegistration GatedStep = "domain_registration"

// QuoteItem is one thing a quote prices: a domain for Years, a service
// (Workload on Target, called Name) for Months, or a domain's mail for
// Months. A zero Years or Months means one.
type QuoteItem struct {
	Kind          QuoteItemKind
	Domain        string
	Years, Months int
	Workload      string
	// Target runs the service; empty for the cheapest capable one.
	Target string
	Name   string
}

// QuoteRequest asks for items to be priced and decided for a project.
type QuoteRequest struct {
	ProjectID string
	Items     []QuoteItem
}

// Quote is a priced and decided quote. The doors derive its next steps
// from its decision and state: the call that consumes a held quote, a
// budget raise or a policy change for a denied one, the gate for one that
// waits for a human.
type Quote struct {
	ID, ProjectID string
	Decision      QuoteDecision
	State         QuoteState
	Amount        money.MicroUSD
	// Items are what the quote prices, with their years and months.
	Items []QuoteItem
	// Lines price each item; a quote just made has them.
	Lines []Cost
	// Reasons say why the decision is not ALLOW.
	Reasons []apierr.Code
	// GatedSteps wait for a human at launch; a quote just made has them.
	GatedSteps []GatedStep
	CreatedAt  time.Time
	// HoldExpiresAt is when the hold lapses, while the quote holds budget.
	HoldExpiresAt *time.Time
	// BudgetRemaining is what is left of the project's budget after a
	// create or a release.
	BudgetRemaining money.MicroUSD
	// GateTaskID and ApprovalURL name the human gate a quote that needs
	// an approval waits on.
	GateTaskID, ApprovalURL string
}

// quotedLaunch is what a launch asks that its quote must price.
type quotedLaunch struct {
	Target, Name, BundleID string
	// Years is how long the launch registers its domain; zero for one.
	Years int
}

// matchQuote refuses a launch its quote does not price: another target or
// service name, a domain the launch does not buy, no price for the domain
// it does buy, mail, which a launch never sets up (setup_email does), or a
// database add-on the launch does not ask for (or the reverse). A launch
// never pays for what it does not get.
func matchQuote(projectID string, c Consumed, req quotedLaunch, domain string, owned bool, addons []string) error {
	var why []string
	postgres := slices.Contains(addons, "managed_postgres")
	buys := domain != "" && !owned
	priced := false
	for _, it := range c.Items {
		switch it.Kind {
		case ItemEmail:
			why = append(why, "it prices mail for "+it.Domain+", which a launch does not set up (setup_email does)")
		case ItemDomain:
			if buys && it.Domain == domain {
				priced = true
				continue
			}
			why = append(why, "it prices the domain "+it.Domain+", which this launch does not buy")
		case ItemService:
			if it.Target != req.Target {
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
		items = append(items, map[string]any{"kind": "domain", "domain": domain, "years": max(req.Years, 1)})
	}
	for _, it := range c.Items {
		if it.Kind == ItemService {
			items = append(items, map[string]any{"kind": "service", "workload": it.Workload, "target": req.Target, "name": req.Name, "months": max(it.Months, 1)})
		}
	}
	again := actions.Tool("create_quote", "agent", map[string]any{"projectId": projectID, "items": items})
	if len(items) == 0 {
		// Nothing of this launch costs anything: launch without a quote.
		args := map[string]any{"id": projectID, "name": req.Name, "target": req.Target}
		if req.BundleID != "" {
			args["bundleId"] = req.BundleID
		}
		if domain != "" {
			args["domain"] = domain
		}
		again = actions.Tool("launch_service", "agent", args)
	}
	return apierr.Newf("conflict:quote_mismatch", "quote %s does not match this launch: %s; quote again for what this launch does", c.QuoteID, strings.Join(why, "; ")).
		WithActions(again, actions.Tool("release_quote", "agent", map[string]any{"id": c.QuoteID}))
}

// quoteView reads a held quote whose hold has lapsed at now as expired,
// whether or not a write has marked it so yet.
func quoteView(q store.Quote, now time.Time) (Quote, error) {
	if QuoteState(q.State) == QuoteHeld && !q.ExpiresAt.After(now) {
		q.State = string(QuoteExpired)
	}
	var items []pricedItem
	if err := json.Unmarshal([]byte(q.Items), &items); err != nil {
		return Quote{}, err
	}
	out := Quote{ID: q.ID, ProjectID: q.ProjectID, Decision: QuoteDecision(q.Decision), State: QuoteState(q.State),
		Amount: q.AmountMicro, CreatedAt: q.CreatedAt, Items: quoteItems(items)}
	if out.State == QuoteHeld {
		e := q.ExpiresAt
		out.HoldExpiresAt = &e
	}
	return out, nil
}

// TargetReason is why an estimate chose a target, or how it placed one it
// considered.
type TargetReason string

const (
	TargetCheapestCapable    TargetReason = "cheapest_capable"
	TargetExplicit           TargetReason = "explicit_target"
	TargetCapableNotCheapest TargetReason = "capable_not_cheapest"
	TargetMissingCapability  TargetReason = "missing_capability"
	TargetAddonRequired      TargetReason = "addon_required"
)

// TargetOption is a target or add-on an estimate priced: its monthly
// price and cost lines when it can run the workload, what it lacks when
// it cannot.
type TargetOption struct {
	Target       string
	Kind         string
	Capable      bool
	Capabilities []string
	// Missing are the capabilities the workload needs that it lacks.
	Missing []string
	Reason  TargetReason
	Monthly money.MicroUSD
	Lines   []Cost
}

func targetOption(t pricing.Target, capable bool, missing []string, lines []pricing.Line, total pricing.MicroUSD, reason TargetReason) TargetOption {
	opt := TargetOption{Target: t.Name, Kind: t.Kind, Capable: capable, Capabilities: append([]string{}, t.Capabilities...),
		Missing: missing, Reason: reason}
	if capable {
		opt.Monthly = total
		opt.Lines = make([]Cost, 0, len(lines))
		for _, l := range lines {
			opt.Lines = append(opt.Lines, Cost{Item: l.Item, Amount: l.Amount})
		}
	}
	return opt
}

func ptr[T any](v T) *T { return &v }

// pricedItem is one quote item with its price, as stored with the quote so
// that consume can recheck it.
type pricedItem struct {
	Kind QuoteItemKind `json:"kind"`
	placement
	Workload string `json:"workload,omitempty"`
	Months   int    `json:"months,omitempty"`
	// Name is the service a service item prices; empty on older quotes.
	Name        string         `json:"name,omitempty"`
	AmountMicro money.MicroUSD `json:"amountMicroUsd"`
	// FirstYear and AnnualRenewal are what the policy ceilings compare.
	FirstYearMicro     money.MicroUSD `json:"firstYearMicroUsd,omitempty"`
	AnnualRenewalMicro money.MicroUSD `json:"annualRenewalMicroUsd,omitempty"`
}

// placement is what a quote item and a launch both name: a domain, the
// years it is bought for, and the target a service runs on. Both are
// stored as JSON with these members' names, which embedding keeps.
type placement struct {
	Domain string `json:"domain,omitempty"`
	Years  int    `json:"years,omitempty"`
	Target string `json:"target,omitempty"`
}

func (it pricedItem) label() string {
	switch it.Kind {
	case ItemDomain:
		return "domain:" + it.Domain
	case ItemEmail:
		return fmt.Sprintf("email:%s:%dmo", it.Domain, it.Months)
	}
	return fmt.Sprintf("service:%s:%dmo", it.Target, it.Months)
}

// priceItems prices quote items from the catalogs. Errors here are about
// the request itself (an unsellable name, an incapable target); what the
// policy or the budget thinks comes after.
func priceItems(prices registrar.PriceList, items []QuoteItem) ([]pricedItem, error) {
	var out []pricedItem
	for i, it := range items {
		field := fmt.Sprintf("body.items.%d", i)
		switch it.Kind {
		case ItemDomain:
			if it.Domain == "" {
				return nil, apierr.New("input:invalid", "a domain item needs domain").WithField(field+".domain", "missing")
			}
			d, err := priceDomain(prices, strings.ToLower(it.Domain), max(it.Years, 1))
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		case ItemService:
			if it.Workload == "" {
				return nil, apierr.New("input:invalid", "a service item needs workload").WithField(field+".workload", "missing")
			}
			monthly, chosen, err := priceService(it.Workload, it.Target)
			if err != nil {
				return nil, err
			}
			months := max(it.Months, 1)
			out = append(out, pricedItem{Kind: ItemService, placement: placement{Target: chosen}, Workload: it.Workload, Months: months, Name: it.Name, AmountMicro: monthly * money.MicroUSD(months)})
		case ItemEmail:
			if it.Domain == "" {
				return nil, apierr.New("input:invalid", "an email item needs the domain whose mail it sets up").WithField(field+".domain", "missing")
			}
			addon, _ := pricing.AddonFor("mail")
			months := max(it.Months, 1)
			out = append(out, pricedItem{Kind: ItemEmail, placement: placement{Domain: strings.ToLower(it.Domain)}, Months: months, AmountMicro: addon.Base * money.MicroUSD(months)})
		default:
			return nil, apierr.Newf("input:invalid", "item kind %q is not domain, service or email", it.Kind)
		}
	}
	return out, nil
}

// registrableParent is the name a registrar would sell that name lies
// under (example.com for www.example.com, by the public suffix list),
// when the registrar here sells it: its TLD one label, in the price list.
func registrableParent(prices registrar.PriceList, name string) (string, bool) {
	parent, err := publicsuffix.EffectiveTLDPlusOne(name)
	if err != nil || parent == name {
		return "", false
	}
	_, tld, _ := strings.Cut(parent, ".")
	if _, ok := prices.Lookup(tld); !ok || strings.Contains(tld, ".") {
		return "", false
	}
	return parent, true
}

// priceDomain prices registering a domain for years: the first year, then
// the annualised renewal for each year after.
func priceDomain(prices registrar.PriceList, name string, years int) (pricedItem, error) {
	label, tldName, _ := strings.Cut(name, ".")
	tld, ok := prices.Lookup(tldName)
	if !ok || strings.Contains(tldName, ".") {
		if parent, sold := registrableParent(prices, name); sold {
			// www.example.com: what is bought is example.com, which
			// then serves its www. name too.
			parentLabel, _, _ := strings.Cut(parent, ".")
			return pricedItem{}, apierr.Newf("plan:domain_unavailable", "%s is a name under %s, which is what a registrar sells: quote %s (a domain serves www. under it too), or attach %s to a service if your organisation holds it already", name, parent, parent, parent).
				WithActions(actions.Tool("search_domains", "agent", map[string]any{"q": parentLabel}), actions.Tool("list_domains", "agent", nil))
		}
		return pricedItem{}, apierr.Newf("plan:domain_unavailable", "%s: the registrar does not sell .%s", name, tldName).
			WithActions(actions.Tool("search_domains", "agent", map[string]any{"q": label, "includeExotic": true}))
	}
	q := registrar.Check(label, tld)
	if !q.Available {
		return pricedItem{}, apierr.Newf("plan:domain_unavailable", "%s is already registered", name).
			WithActions(actions.Tool("search_domains", "agent", map[string]any{"q": label}))
	}
	annual := tld.AnnualizedRenewal()
	if q.FirstYear == nil || (years > 1 && annual == nil) {
		return pricedItem{}, apierr.Newf("price:unavailable", "%s has no published price; it cannot be bought here", name).
			WithActions(actions.Tool("search_domains", "agent", map[string]any{"q": label, "maxFirstYearPriceUsd": 1000}))
	}
	amount := *q.FirstYear
	var annualMicro money.MicroUSD
	if annual != nil {
		annualMicro = *annual
		amount += money.MicroUSD(years-1) * annualMicro
	}
	return pricedItem{Kind: ItemDomain, placement: placement{Domain: name, Years: years}, AmountMicro: amount,
		FirstYearMicro: *q.FirstYear, AnnualRenewalMicro: annualMicro}, nil
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

func total(items []pricedItem) money.MicroUSD {
	var t money.MicroUSD
	for _, it := range items {
		t += it.AmountMicro
	}
	return t
}

// gatedSteps are the steps of a launch with these items that wait for a
// human: a domain purchase by a key without the buy_domain scope.
func gatedSteps(items []pricedItem, p *auth.Principal) []GatedStep {
	if p.HasScope("buy_domain") {
		return []GatedStep{}
	}
	for _, it := range items {
		if it.Kind == ItemDomain {
			return []GatedStep{GatedDomainRegistration}
		}
	}
	return []GatedStep{}
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

// QuoteArgs are create_quote's arguments for items: the same things
// priced again, as a refusal and a lapsed quote offer them.
func QuoteArgs(projectID string, items []QuoteItem) map[string]any {
	list := []any{}
	for _, it := range items {
		m := map[string]any{"kind": string(it.Kind)}
		switch it.Kind {
		case ItemDomain:
			m["domain"], m["years"] = it.Domain, max(it.Years, 1)
		case ItemEmail:
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

// Create prices the items, checks policy, approval rules and budget under
// the project's lock, and on ALLOW holds the amount for 15 minutes.
func (s *Quotes) Create(ctx context.Context, p *auth.Principal, req QuoteRequest) (*Quote, error) {
	items, err := priceItems(s.prices, req.Items)
	if err != nil {
		return nil, err
	}
	if err := s.offered(items); err != nil {
		return nil, err
	}
	for _, it := range items {
		if it.Kind == ItemDomain {
			if err := s.launches.domainFree(ctx, p, req.ProjectID, it.Domain); err != nil {
				return nil, err
			}
		}
	}
	var out *Quote
	// Quotes arriving together commit together on SQLite.
	err = s.store.InGroupTx(ctx, func(tx *store.Tx) error {
		var err error
		out, err = s.createLocked(ctx, tx, p, req.ProjectID, items)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// createLocked decides and records a quote under the project's lock.
func (s *Quotes) createLocked(ctx context.Context, tx *store.Tx, p *auth.Principal, projectID string, items []pricedItem) (*Quote, error) {
	now := s.Now()
	// The project, then the caller's key (and on PostgreSQL the ledger's
	// head), in one call.
	locks, err := tx.Quotes().LockForQuote(ctx, p.OrgID, projectID, p.KeyID)
	proj := locks.Project
	if errors.Is(err, store.ErrNotFound) || err == nil && proj.DeletedAt != nil {
		return nil, projectNotFound(projectID)
	}
	if err != nil {
		return nil, err
	}
	if err := s.projects.expireHolds(ctx, tx, &proj, now); err != nil {
		return nil, err
	}
	pol, err := decodePolicy(proj.Policy)
	if err != nil {
		return nil, err
	}
	amount := total(items)
	if amount > 0 && exhausted(proj) {
		return nil, budgetExhausted(proj, pol, s.baseURL())
	}
	capped, err := s.checkKeyCap(ctx, tx, p, locks, amount, now)
	if err != nil {
		return nil, err
	}
	itemsJSON, _ := json.Marshal(items)
	q := store.Quote{ID: auth.ID("quo"), OrgID: p.OrgID, ProjectID: proj.ID, KeyID: p.KeyID, AmountMicro: amount,
		Items: string(itemsJSON), CreatedAt: now.UTC(), ExpiresAt: now.Add(HoldDuration).UTC(), State: string(QuoteNotHeld)}
	out := &Quote{ID: q.ID, ProjectID: proj.ID, Items: quoteItems(items), CreatedAt: q.CreatedAt, GatedSteps: gatedSteps(items, p)}
	if err := s.decide(ctx, tx, p, &proj, &q, out, judge(pol, items), items, now); err != nil {
		return nil, err
	}
	if out.Reasons == nil {
		out.Reasons = []apierr.Code{}
	}
	rj, _ := json.Marshal(out.Reasons)
	q.Reasons = string(rj)
	entry := store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: "create_quote", ObjectType: "quote", ObjectID: q.ID,
		Details: map[string]any{"projectId": proj.ID, "decision": q.Decision, "amountMicroUsd": amount, "held": QuoteState(q.State) == QuoteHeld, "reasons": out.Reasons}}
	// A capped key's running count is written after the quote; else the
	// quote's statement is the transaction's last.
	if err := insertQuote(ctx, tx, q, entry, now, !capped); err != nil {
		return nil, err
	}
	if capped && QuoteState(q.State) == QuoteHeld {
		if err := tx.Keys().AddCapSpent(ctx, p.KeyID, amount, q.CreatedAt); err != nil {
			return nil, err
		}
	}
	out.Decision, out.State, out.Amount, out.BudgetRemaining = QuoteDecision(q.Decision), QuoteState(q.State), q.AmountMicro, remaining(proj)
	for _, it := range items {
		out.Lines = append(out.Lines, Cost{Item: it.label(), Amount: it.AmountMicro})
	}
	if out.State == QuoteHeld {
		t := q.ExpiresAt
		out.HoldExpiresAt = &t
	}
	return out, nil
}

// decide sets a new quote's decision: DENY by policy or budget,
// REQUIRES_APPROVAL with a gate open for a human, or ALLOW with the amount
// held. It fills in out's reasons and, for an approval, its gate.
func (s *Quotes) decide(ctx context.Context, tx *store.Tx, p *auth.Principal, proj *store.Project, q *store.Quote, out *Quote, v policyVerdict, items []pricedItem, now time.Time) error {
	amount := q.AmountMicro
	out.Reasons = v.refused
	switch {
	case len(v.refused) > 0:
		q.Decision = string(QuoteDeny)
	case amount > remaining(*proj):
		q.Decision = string(QuoteDeny)
		out.Reasons = []apierr.Code{"budget:insufficient"}
	case v.approval:
		q.Decision = string(QuoteRequiresApproval)
		task, err := s.approvals.openGate(ctx, tx, p, proj.ID, string(TaskKindQuoteApproval), map[string]any{
			"quoteId": q.ID, "projectId": proj.ID, "amountMicroUsd": amount, "items": items,
		}, now)
		if err != nil {
			return err
		}
		out.Reasons = []apierr.Code{"policy:approval_required"}
		out.GateTaskID, out.ApprovalURL = task.ID, s.ApprovalURL(task.GateID)
	default:
		// The quote's insert moves the money (Quotes.InsertHeld).
		q.Decision = string(QuoteAllow)
		q.State = string(QuoteHeld)
		proj.HeldMicro += amount
	}
	return nil
}

// insertQuote records a new quote and its ledger entry; a held one moves
// its amount into its project's held money with it (on PostgreSQL all in
// one round trip: Quotes.InsertHeldLogged). last: nothing follows it in the
// transaction, whose COMMIT may then go with it on PostgreSQL.
func insertQuote(ctx context.Context, tx *store.Tx, q store.Quote, entry store.LedgerRecord, now time.Time, last bool) error {
	if QuoteState(q.State) != QuoteHeld {
		if err := tx.Quotes().Insert(ctx, q); err != nil {
			return err
		}
		_, err := tx.Ledger().Append(ctx, entry, now)
		return err
	}
	err := tx.Quotes().InsertHeldLogged(ctx, q, entry, now, last)
	if errors.Is(err, store.ErrBudget) {
		return apierr.New("budget:insufficient", "the budget cannot cover this quote")
	}
	return err
}

// Release gives a held quote's budget back before it expires.
func (s *Quotes) Release(ctx context.Context, p *auth.Principal, id string) (*Quote, error) {
	var out *Quote
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		now := s.Now()
		q, err := tx.Quotes().Lock(ctx, p.OrgID, id)
		if errors.Is(err, store.ErrNotFound) {
			return notInOrg("quote", id, "list_quotes")
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
		if err := tx.Quotes().Settle(ctx, q.ID, string(QuoteReleased), now); err != nil {
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
		var reasons []apierr.Code
		json.Unmarshal([]byte(q.Reasons), &reasons)
		if reasons == nil {
			reasons = []apierr.Code{}
		}
		out = &Quote{ID: q.ID, ProjectID: proj.ID, Decision: QuoteDecision(q.Decision), State: QuoteReleased,
			Amount: q.AmountMicro, Reasons: reasons, CreatedAt: q.CreatedAt, BudgetRemaining: remaining(proj)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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
	requote := QuoteArgs(projectID, quoteItems(items))
	if err := unheldQuote(ctx, tx, p, q, requote); err != nil {
		return Consumed{}, err
	}
	if err := s.recheck(ctx, tx, proj, q, items, requote); err != nil {
		return Consumed{}, err
	}
	if err := tx.Quotes().Settle(ctx, q.ID, string(QuoteConsumed), now); err != nil {
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
//
// requote are the arguments of the create_quote call that prices the same
// again.
func unheldQuote(ctx context.Context, tx *store.Tx, p *auth.Principal, q store.Quote, requote map[string]any) error {
	again := actions.Tool("create_quote", "agent", requote)
	switch QuoteState(q.State) {
	case QuoteExpired:
		return apierr.New("budget:hold_expired", "the quote's 15-minute hold expired; quote again", again)
	case QuoteConsumed, QuoteReleased:
		return apierr.Newf("conflict:state", "quote %s is already %s", q.ID, q.State).WithActions(again)
	case QuoteNotHeld:
		if QuoteDecision(q.Decision) == QuoteRequiresApproval {
			g, err := tx.Quotes().Gate(ctx, p.OrgID, q.ID)
			if err == nil && GateState(g.State) == GatePending {
				// The launch waits on the same gate; the human's approval
				// consumes the quote and carries the launch on.
				return &awaitApproval{GateID: g.ID, QuoteID: q.ID, AmountMicro: q.AmountMicro}
			}
			if err == nil && GateState(g.State) == GateDenied {
				return apierr.Newf("approval:denied", "a human denied quote %s", q.ID).WithActions(again, actions.Stop("denied"))
			}
		}
		return apierr.Newf("conflict:state", "quote %s was %s and holds no budget", q.ID, q.Decision).WithActions(again)
	}
	return nil
}

// recheck holds a quote to the project's current policy, prices and
// approval rules: any that moved since the quote voids it. requote are the
// arguments of the create_quote call that prices the same again.
func (s *Quotes) recheck(ctx context.Context, tx *store.Tx, proj store.Project, q store.Quote, items []pricedItem, requote map[string]any) error {
	again := actions.Tool("create_quote", "agent", requote)
	pol, err := decodePolicy(proj.Policy)
	if err != nil {
		return err
	}
	verdict := judge(pol, items)
	if reasons := verdict.refused; len(reasons) > 0 {
		return apierr.Newf(reasons[0], "the project's policy changed since the quote and now refuses it (%v)", reasons).
			WithActions(actions.Manual("change_policy", "human"), again)
	}
	// Re-price from the catalogs: a moved price voids the quote.
	current, err := priceItems(s.prices, quoteItems(items))
	if err != nil {
		return err
	}
	if total(current) != q.AmountMicro {
		return apierr.Newf("plan:price_changed", "the price moved from %.2f to %.2f USD since the quote", usd(q.AmountMicro), usd(total(current))).WithActions(again)
	}
	approved, err := tx.Quotes().Approved(ctx, q.ID)
	if err != nil {
		return err
	}
	if verdict.approval && !approved {
		// The policy tightened after an ALLOW quote: a new quote asks the
		// human, and a launch with it waits for the answer.
		return apierr.Newf("policy:approval_required", "the project now needs a human approval for %.2f USD; quote again and launch with the new quote to get an approval URL", usd(q.AmountMicro)).
			WithActions(again)
	}
	return nil
}

// item is the request that priced it.
func (it pricedItem) item() QuoteItem {
	return QuoteItem{Kind: it.Kind, Domain: it.Domain, Years: it.Years, Months: it.Months, Workload: it.Workload, Target: it.Target, Name: it.Name}
}

// quoteItems turns priced items back into the request that priced them.
func quoteItems(items []pricedItem) []QuoteItem {
	out := make([]QuoteItem, 0, len(items))
	for _, it := range items {
		out = append(out, it.item())
	}
	return out
}

// releaseRefusedQuote gives back the hold of a quote whose launch was
// refused because the domain is taken: the launch bought nothing, so the
// hold serves nothing. A quote that is not held is left alone.
func (s *Quotes) releaseRefusedQuote(ctx context.Context, p *auth.Principal, quoteID string) {
	if quoteID == "" {
		return
	}
	if _, err := s.Release(ctx, p, quoteID); err != nil {
		s.log.Debug("release refused quote", "quote", quoteID, "err", err)
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

// List lists the organisation's quotes.
func (s *Quotes) List(ctx context.Context, orgID string, f store.Filter) (*Page[Quote], error) {
	qs, err := s.store.Quotes().List(ctx, orgID, f)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	out := &Page[Quote]{Items: []Quote{}, Args: f.Args()}
	for _, q := range qs {
		v, err := quoteView(q, s.Now())
		if err != nil {
			return nil, apierr.Internal(err)
		}
		out.Items = append(out.Items, v)
	}
	if len(qs) > 0 {
		last := qs[len(qs)-1]
		out.NextCursor = nextCursor(f, len(qs), last.CreatedAt, last.ID)
	}
	return out, nil
}

// Get reads one quote.
func (s *Quotes) Get(ctx context.Context, orgID, id string) (*Quote, error) {
	q, err := s.store.Quotes().Get(ctx, orgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notInOrg("quote", id, "list_quotes")
	}
	if err != nil {
		return nil, apierr.Internal(err)
	}
	v, err := quoteView(q, s.Now())
	if err != nil {
		return nil, apierr.Internal(err)
	}
	return &v, nil
}

// EstimateRequest asks what a workload costs a month, on Target or on the
// cheapest capable target when Target is empty, with the usage given or
// the defaults.
type EstimateRequest struct {
	Workload        string
	Target          string
	MonthlyRequests *int
	MonthlyEgressGB *float64
}

// EvidenceCode is one reason an estimate gives for its choice.
type EvidenceCode string

const (
	EvidenceAddonAttached           EvidenceCode = "addon_attached"
	EvidenceCheaperCapableExists    EvidenceCode = "cheaper_capable_exists"
	EvidenceCheapestCapableSelected EvidenceCode = "cheapest_capable_selected"
	EvidenceExplicitTarget          EvidenceCode = "explicit_target"
)

// Evidence is why an estimate chose as it did, about one target.
type Evidence struct {
	Code           EvidenceCode
	Target, Detail string
}

// AssumptionSource is where an estimate's assumption came from.
type AssumptionSource string

const (
	FromCatalog AssumptionSource = "catalog"
	FromDefault AssumptionSource = "default"
	FromRequest AssumptionSource = "request"
)

// Assumption is one figure an estimate priced with.
type Assumption struct {
	Name   string
	Value  float64
	Unit   string
	Source AssumptionSource
}

// Estimate is what a workload costs a month on the target chosen, with
// every target considered, the add-ons it carries and why.
type Estimate struct {
	Workload        string
	Selected        string
	Monthly         money.MicroUSD
	SelectionReason TargetReason
	Addons          []TargetOption
	Considered      []TargetOption
	Evidence        []Evidence
	Assumptions     []Assumption
	CatalogVersion  string
}

// Estimate prices a workload over the target catalog (SPEC §2.6).
func (s *Quotes) Estimate(ctx context.Context, req EstimateRequest) (*Estimate, error) {
	need, ok := pricing.Needs[req.Workload]
	if !ok {
		return nil, apierr.Newf("input:invalid", "workload %q is not one of static_site, dynamic_service, worker, database_backed_app, mail_enabled_app", req.Workload).
			WithActions(actions.Manual("fix_input", "agent"))
	}
	usage := pricing.Usage{Requests: defaultMonthlyRequests, EgressMicroGB: defaultEgressMicroGB}
	reqSource, egressSource := FromDefault, FromDefault
	if req.MonthlyRequests != nil {
		usage.Requests = int64(*req.MonthlyRequests)
		reqSource = FromRequest
	}
	if req.MonthlyEgressGB != nil {
		usage.EgressMicroGB = int64(money.FromUSD(*req.MonthlyEgressGB)) // same fixed-point scale
		egressSource = FromRequest
	}
	addons, addonTotal, evidence, err := priceAddons(need, usage)
	if err != nil {
		return nil, err
	}
	tp := priceTargets(need, usage, addonTotal)
	if len(tp.capable) == 0 {
		return nil, apierr.Internal(fmt.Errorf("no target can run %s", req.Workload))
	}
	selected, reason, evidence, err := tp.selectTarget(req, need, evidence)
	if err != nil {
		return nil, err
	}
	res := &Estimate{
		Workload:        req.Workload,
		Selected:        selected.t.Name,
		Monthly:         selected.total,
		SelectionReason: reason,
		Addons:          append([]TargetOption{}, addons...),
		Evidence:        evidence,
		CatalogVersion:  pricing.CatalogVersion,
		Assumptions: []Assumption{
			{Name: "monthlyRequests", Value: float64(usage.Requests), Unit: "requests/month", Source: reqSource},
			{Name: "monthlyEgressGb", Value: float64(usage.EgressMicroGB) / 1e6, Unit: "GB/month", Source: egressSource},
			{Name: "billingPeriod", Value: 730, Unit: "hours/month", Source: FromCatalog},
			{Name: "currency", Value: 1, Unit: "USD (fake money in the sandbox)", Source: FromCatalog},
		},
	}
	for _, name := range tp.order {
		res.Considered = append(res.Considered, *tp.considered[name])
	}
	return res, nil
}

// priceAddons prices the add-ons every capable option carries.
func priceAddons(need pricing.Need, usage pricing.Usage) ([]TargetOption, pricing.MicroUSD, []Evidence, error) {
	var addons []TargetOption
	var addonTotal pricing.MicroUSD
	var evidence []Evidence
	for _, c := range need.Addons {
		a, ok := pricing.AddonFor(c)
		if !ok {
			return nil, 0, nil, apierr.Internal(fmt.Errorf("no add-on provides %q", c))
		}
		lines := pricing.Monthly(a, usage)
		total := pricing.Total(lines)
		addonTotal += total
		addons = append(addons, targetOption(a, true, nil, lines, total, TargetAddonRequired))
		evidence = append(evidence, Evidence{Code: EvidenceAddonAttached, Target: a.Name})
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
	considered map[string]*TargetOption
	order      []string
}

// priceTargets prices each compute target for the workload, with its add-ons.
func priceTargets(need pricing.Need, usage pricing.Usage, addonTotal pricing.MicroUSD) targetPrices {
	tp := targetPrices{considered: map[string]*TargetOption{}}
	for _, t := range pricing.Targets {
		if t.Kind != "compute" {
			continue
		}
		tp.order = append(tp.order, t.Name)
		if !t.Has(need.Compute) {
			opt := targetOption(t, false, []string{need.Compute}, nil, 0, TargetMissingCapability)
			tp.considered[t.Name] = &opt
			continue
		}
		lines := pricing.Monthly(t, usage)
		total := pricing.Total(lines) + addonTotal
		tp.capable = append(tp.capable, pricedTarget{t, total, lines})
		opt := targetOption(t, true, nil, lines, total, TargetCapableNotCheapest)
		tp.considered[t.Name] = &opt
	}
	sort.SliceStable(tp.capable, func(i, j int) bool { return tp.capable[i].total < tp.capable[j].total })
	return tp
}

// selectTarget picks the target the request names, refusing one that
// cannot run the workload and saying when a cheaper one could, or else the
// cheapest capable one; the evidence leads with why.
func (tp targetPrices) selectTarget(req EstimateRequest, need pricing.Need, evidence []Evidence) (pricedTarget, TargetReason, []Evidence, error) {
	cheapest := tp.capable[0]
	selected := cheapest
	if req.Target == "" {
		evidence = append([]Evidence{{Code: EvidenceCheapestCapableSelected, Target: selected.t.Name}}, evidence...)
		tp.considered[selected.t.Name].Reason = TargetCheapestCapable
		return selected, TargetCheapestCapable, evidence, nil
	}
	t, ok := pricing.Lookup(req.Target)
	switch {
	case !ok:
		return selected, "", nil, apierr.Newf("plan:unknown_target", "target %q is not in the catalog; omit target to get the cheapest capable one", req.Target).
			WithActions(actions.Tool("estimate", "agent", map[string]any{"workload": req.Workload})).
			WithField("body.target", "unknown target")
	case t.Kind != "compute":
		return selected, "", nil, apierr.Newf("plan:target_incapable", "%s is an add-on that comes with the workload, not a target to run it on", t.Name).
			WithActions(actions.Tool("estimate", "agent", map[string]any{"workload": req.Workload})).
			WithField("body.target", "add-on, not a compute target")
	case !t.Has(need.Compute):
		return selected, "", nil, apierr.Newf("plan:target_incapable", "target %s cannot run a %s (it lacks %s); %s can", t.Name, req.Workload, need.Compute, cheapest.t.Name).
			WithActions(actions.Tool("estimate", "agent", map[string]any{"workload": req.Workload, "target": cheapest.t.Name})).
			WithField("body.target", "missing capability "+need.Compute)
	}
	for _, c := range tp.capable {
		if c.t.Name == t.Name {
			selected = c
		}
	}
	evidence = append([]Evidence{{Code: EvidenceExplicitTarget, Target: t.Name}}, evidence...)
	if cheapest.total < selected.total {
		detail := fmt.Sprintf("%s costs %.2f USD a month less", cheapest.t.Name, usd(selected.total-cheapest.total))
		evidence = append(evidence, Evidence{Code: EvidenceCheaperCapableExists, Target: cheapest.t.Name, Detail: detail})
	}
	tp.considered[selected.t.Name].Reason = TargetExplicit
	return selected, TargetExplicit, evidence, nil
}

const (
	defaultMonthlyRequests = 100_000
	defaultEgressMicroGB   = 10 * 1_000_000
)

// offered refuses items this deployment cannot deliver: a database-backed
// service without a PostgreSQL for the managed_postgres add-on.
func (s *Quotes) offered(items []pricedItem) error {
	for _, it := range items {
		if it.Kind == ItemService && it.Workload == "database_backed_app" && s.databases == nil {
			return addonUnavailable()
		}
	}
	return nil
}
