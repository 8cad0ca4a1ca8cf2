package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pierhq/pier/ledger"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/payments"
	"github.com/pierhq/pier/server/internal/store"
)

// Dashboard is the organisation at a glance.
type Dashboard struct {
	Org         store.Organization
	Projects    []Project
	Tasks       []store.Task
	Pending     []GateView
	Keys        []store.APIKey
	Ledger      []ledger.Entry // newest first
	Card        *store.PaymentMethod
	CardExpired bool
	Spending    *Spending // this period's spend, per project, key and service
}

// projectNames are the dashboard's projects' names, by id.
func (d *Dashboard) projectNames() map[string]string {
	out := make(map[string]string, len(d.Projects))
	for _, p := range d.Projects {
		out[p.ID] = p.Name
	}
	return out
}

// GateView is a gate as the approval page shows it.
type GateView struct {
	ID, Kind, State, TaskID string
	ProjectID, ProjectName  string
	Reason, QuoteID         string
	AmountMicro             money.MicroUSD
	CurrentLimitMicro       money.MicroUSD
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
	RenewalMicro money.MicroUSD
	HasRenewal   bool
	// Items describe a quote's lines in words.
	Items []string
	// TaskState is the state of the task the gate belongs to now, and
	// TaskRefundedMicro what it gave back if it failed: an approved
	// purchase can still fail at the registrar.
	TaskState         string
	TaskRefundedMicro money.MicroUSD
	// RequestedBy is the name of the key (or grant) that asked.
	RequestedBy string
	// The project's remaining budget now, and what approving (or, for a
	// purchase already taken from it, denying) would leave.
	RemainingMicro, IfApprovedMicro, IfDeniedMicro money.MicroUSD
	HasBudget                                      bool
	// Registrant is the contact a registrant gate proposes; LinkMailed
	// says a confirmation link also went to its address, and NoLinkWhy why
	// none did.
	Registrant *RegistrantContact
	LinkMailed bool
	NoLinkWhy  string
}

// gateTitle says what approving does, in words.
func gateTitle(v GateView) string {
	switch GateKind(v.Kind) {
	case GateDomainRegistration:
		years := "1 year"
		if v.Years > 1 {
			years = fmt.Sprintf("%d years", v.Years)
		}
		return fmt.Sprintf("Buy the domain %s for %s", v.Domain, years)
	case GateBudgetRaise:
		return fmt.Sprintf("Raise the budget of %s by %s", orName(v.ProjectName, "the project"), v.AmountMicro)
	case GateQuoteApproval:
		return fmt.Sprintf("Approve spending %s from %s's budget", v.AmountMicro, orName(v.ProjectName, "the project"))
	case GateRegistrantContact:
		if v.Registrant != nil {
			return fmt.Sprintf("Confirm %s as the registrant of %s", v.Registrant.Name, v.Domain)
		}
		return "Confirm the registrant of " + v.Domain
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
	switch it.Kind {
	case "domain":
		return fmt.Sprintf("the domain %s for %d year(s): %s", it.Domain, max(it.Years, 1), it.AmountMicro)
	case "email":
		return fmt.Sprintf("email on %s for %d month(s): %s", it.Domain, max(it.Months, 1), it.AmountMicro)
	}
	name := it.Name
	if name == "" {
		name = "a service"
	}
	return fmt.Sprintf("%s on %s (%s) for %d month(s): %s", name, it.Target, it.Workload, max(it.Months, 1), it.AmountMicro)
}

// approvalProjects is what Approvals asks of projects: the dashboard's
// list, and holds run out before a decision moves money.
type approvalProjects interface {
	List(ctx context.Context, orgID string, f store.Filter) (*Page[Project], error)
	expireHolds(ctx context.Context, tx *store.Tx, p *store.Project, now time.Time) error
}

// approvalTasks answers a budget raise's task.
type approvalTasks interface {
	startedView(t store.Task, m Mutated) (*Task, error)
}

// openGate creates a task waiting in input_required on a new gate.
func (s *Approvals) openGate(ctx context.Context, tx *store.Tx, p *auth.Principal, projectID, kind string, payload map[string]any, now time.Time) (store.Task, error) {
	steps, _ := json.Marshal([]TaskStep{{Name: "human_decision", State: "input_required", StartedAt: ptr(now.UTC())}})
	if _, ok := payload["requestedBy"]; !ok {
		payload["requestedBy"] = actorOf(p)
	}
	body, _ := json.Marshal(payload)
	t := store.Task{ID: auth.ID("tsk"), OrgID: p.OrgID, ProjectID: projectID, Kind: kind, State: "input_required",
		Steps: string(steps), GateID: auth.ID("gat"), CreatedAt: now.UTC(), UpdatedAt: now.UTC()}
	if err := tx.Tasks().Insert(ctx, t); err != nil {
		return t, err
	}
	if err := tx.Gates().Insert(ctx, store.Gate{ID: t.GateID, OrgID: p.OrgID, TaskID: t.ID, Kind: kind, Payload: string(body), CreatedAt: now.UTC()}); err != nil {
		return t, err
	}
	_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: p.OrgID, Actor: actorOf(p), Action: "open_gate", ObjectType: "gate", ObjectID: t.GateID,
		Details: map[string]any{"kind": kind, "taskId": t.ID, "payload": json.RawMessage(body)}}, now)
	return t, err
}

// RequestBudgetRaise asks a human to add amount to a project's budget, for
// reason. The answer is a task in input_required carrying the approval URL.
func (s *Approvals) RequestBudgetRaise(ctx context.Context, p *auth.Principal, projectID string, amount money.MicroUSD, reason string) (*Task, error) {
	if amount <= 0 {
		return nil, apierr.New("input:invalid", "amountUsd must be at least 0.01").WithField("body.amountUsd", "too small")
	}
	var view *Task
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		now := s.Now()
		proj, err := tx.Projects().Lock(ctx, p.OrgID, projectID)
		if errors.Is(err, store.ErrNotFound) || err == nil && proj.DeletedAt != nil {
			return projectNotFound(projectID)
		}
		if err != nil {
			return err
		}
		t, err := s.openGate(ctx, tx, p, proj.ID, "budget_raise", map[string]any{
			"projectId": proj.ID, "amountMicroUsd": amount, "reason": reason, "currentLimitMicroUsd": proj.LimitMicro,
		}, now)
		if err != nil {
			return err
		}
		m := s.mutated("request_budget_raise", nil, []Resource{{Type: "task", ID: t.ID}}, nil, remaining(proj))
		v, err := s.tasks.startedView(t, m)
		if err != nil {
			return err
		}
		view = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return view, nil
}

// DecideGate records a human's decision on a gate of their organisation and
// carries it out. The first decision wins; a second is conflict:state. No
// agent path reaches this method.
func (s *Approvals) Decide(ctx context.Context, h Human, gateID string, approve bool) error {
	requeue := ""
	var requeueAll []string
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		now := s.Now()
		g, err := tx.Gates().Lock(ctx, h.OrgID, gateID)
		if errors.Is(err, store.ErrNotFound) {
			return apierr.Newf("not_found:resource", "no approval %s in your organisation", gateID)
		}
		if err != nil {
			return err
		}
		state := "denied"
		if approve {
			state = "approved"
		}
		if err := tx.Gates().Decide(ctx, h.OrgID, gateID, state, "human:"+h.UserID, now); errors.Is(err, store.ErrConflict) {
			return apierr.Newf("conflict:state", "this approval was already decided (%s)", g.State)
		} else if err != nil {
			return err
		}
		t, err := tx.Tasks().Lock(ctx, h.OrgID, g.TaskID)
		if err != nil {
			return err
		}
		var payload map[string]any
		dec := json.NewDecoder(bytesReader(g.Payload))
		dec.UseNumber()
		if err := dec.Decode(&payload); err != nil {
			return err
		}
		if GateKind(g.Kind) == GateDomainRegistration {
			requeue = t.ID
			return s.decideRegistration(ctx, tx, h, g, t, approve, now)
		}
		if GateKind(g.Kind) == GateRegistrantContact {
			return s.decideRegistrant(ctx, tx, h, g, t, approve, now)
		}
		resumed, err := s.closeGate(ctx, tx, h, g, t, payload, approve, now)
		requeueAll = append(requeueAll, resumed...)
		return err
	})
	if requeue != "" {
		requeueAll = append(requeueAll, requeue)
	}
	if err == nil {
		for _, id := range requeueAll {
			if qerr := s.platform.Enqueue(ctx, id); qerr != nil {
				s.log.Warn("enqueue after decision", "task", id, "err", qerr)
			}
		}
	}
	return err
}

// closeGate ends the task of a gate decided by a human, carrying out what
// an approval asks; the decision stands even when that cannot be done. It
// returns the launches to requeue that waited on an approved quote.
func (s *Approvals) closeGate(ctx context.Context, tx *store.Tx, h Human, g store.Gate, t store.Task, payload map[string]any, approve bool, now time.Time) ([]string, error) {
	state := "denied"
	if approve {
		state = "approved"
	}
	var requeueAll []string
	result := map[string]any{"decision": state, "decidedAt": now.UTC().Format(time.RFC3339)}
	t.State = "failed"
	if approve {
		t.State = "succeeded"
		if err := s.carryOut(ctx, tx, g, payload, result, now); err != nil {
			var e *apierr.Error
			if !errors.As(err, &e) {
				return nil, err
			}
			// The decision stands; what it asked for could not be done.
			t.State = "failed"
			result["blockedBy"] = string(e.Code)
			result["message"] = e.Message
		}
	}
	if GateKind(g.Kind) == GateQuoteApproval {
		// Launches waiting on this quote go on (approved and held) or
		// end (denied, or the budget could not hold it).
		for _, handle := range s.onDecision {
			resumed, err := handle(ctx, tx, h, g, payload, TaskState(t.State) == TaskSucceeded, result, now)
			if err != nil {
				return nil, err
			}
			requeueAll = append(requeueAll, resumed...)
		}
	}
	steps, _ := json.Marshal([]TaskStep{{Name: "human_decision", State: map[bool]StepState{true: StepStateSucceeded, false: StepStateFailed}[approve], CompletedAt: ptr(now.UTC()), Detail: state}})
	rj, _ := json.Marshal(result)
	t.Steps, t.Result, t.UpdatedAt = string(steps), string(rj), now.UTC()
	if err := tx.Tasks().Update(ctx, t); err != nil {
		return nil, err
	}
	_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: h.OrgID, Actor: "human:" + h.UserID, Action: "decide_gate", ObjectType: "gate", ObjectID: g.ID,
		Details: map[string]any{"kind": g.Kind, "decision": state, "taskId": t.ID, "result": result}}, now)
	return requeueAll, err
}

// decideRegistration resumes a launch that waited for a human to approve
// buying its domain. A denial refunds the domain's price and the launch
// goes on without the domain.
func (s *Approvals) decideRegistration(ctx context.Context, tx *store.Tx, h Human, g store.Gate, t store.Task, approve bool, now time.Time) error {
	var pl launchPayload
	if err := json.Unmarshal([]byte(t.Payload), &pl); err != nil {
		return err
	}
	var steps []TaskStep
	if err := json.Unmarshal([]byte(t.Steps), &steps); err != nil {
		return err
	}
	decision := "approved"
	if !approve {
		decision = "denied"
		proj, err := tx.Projects().Lock(ctx, t.OrgID, pl.ProjectID)
		if err != nil {
			return err
		}
		if pl.DomainMicro > 0 {
			if err := tx.Projects().MoveMoney(ctx, proj.ID, 0, -pl.DomainMicro); err != nil {
				return err
			}
			pl.RefundedMicro = pl.DomainMicro
			if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: t.OrgID, Actor: "system", Action: "refund", ObjectType: "task", ObjectID: t.ID,
				Details: map[string]any{"projectId": proj.ID, "amountMicroUsd": pl.DomainMicro, "reason": "domain registration denied"}}, now); err != nil {
				return err
			}
		}
		// The service goes on without the domain: it neither holds nor
		// serves it, nobody is buying it, and the receipt shows it free.
		if err := tx.Services().DetachDomain(ctx, pl.ServiceID, pl.Domain, now); err != nil {
			return err
		}
		if err := tx.Domains().ReleaseClaims(ctx, t.ID); err != nil {
			return err
		}
		if pl.Receipt != nil {
			var total money.MicroUSD
			for i, c := range pl.Receipt.Costs {
				if c.Item == "domain:"+pl.Domain {
					pl.Receipt.Costs[i].Amount = 0
				}
				total += pl.Receipt.Costs[i].Amount
			}
			pl.Receipt.Total = total
		}
		if pl.Undo != nil {
			pl.Undo.Irreversible, pl.Undo.NotReversed = false, nil
		}
		pl.ChargedMicro -= pl.RefundedMicro
		pl.RefundedMicro = 0
		for i := range steps {
			switch steps[i].Name {
			case StepDNS:
				steps[i].State, steps[i].Detail = "skipped", "no domain"
			case StepRegister:
				steps[i].State, steps[i].CompletedAt = "denied", ptr(now.UTC())
				steps[i].Detail = fmt.Sprintf("a human denied buying %s: not bought, not attached, %s USD refunded", pl.Domain, pl.DomainMicro.Decimal())
			}
		}
	} else {
		for i := range steps {
			if steps[i].Name == StepRegister {
				steps[i].State, steps[i].Detail = "pending", "a human approved buying "+pl.Domain
			}
		}
	}
	pl.Approval = decision
	sj, _ := json.Marshal(steps)
	pj, _ := json.Marshal(pl)
	t.State, t.Steps, t.Payload, t.UpdatedAt = "queued", string(sj), string(pj), now.UTC()
	if err := tx.Tasks().Update(ctx, t); err != nil {
		return err
	}
	_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: h.OrgID, Actor: "human:" + h.UserID, Action: "decide_gate", ObjectType: "gate", ObjectID: g.ID,
		Details: map[string]any{"kind": g.Kind, "decision": decision, "taskId": t.ID, "domain": pl.Domain}}, now)
	return err
}

// carryOut does what an approved gate asked for, inside the decision's
// transaction.
func (s *Approvals) carryOut(ctx context.Context, tx *store.Tx, g store.Gate, payload, result map[string]any, now time.Time) error {
	projectID, _ := payload["projectId"].(string)
	n, err := payload["amountMicroUsd"].(json.Number).Int64()
	if err != nil {
		return err
	}
	amount := money.MicroUSD(n)
	proj, err := tx.Projects().Lock(ctx, g.OrgID, projectID)
	if err != nil {
		return err
	}
	if GateKind(g.Kind) == GateQuoteApproval {
		// Counted against its key's cap before expiring holds writes the
		// ledger: a quote being created locks the key, then the ledger.
		if err := countApprovedQuote(ctx, tx, g.OrgID, payload); err != nil {
			return err
		}
	}
	if err := s.projects.expireHolds(ctx, tx, &proj, now); err != nil {
		return err
	}
	switch GateKind(g.Kind) {
	case GateBudgetRaise:
		limit := proj.LimitMicro + amount
		if err := tx.Projects().SetBudgetLimit(ctx, proj.ID, limit); err != nil {
			return err
		}
		result["budgetLimitUsd"] = usd(limit)
		result["budgetRemainingUsd"] = usd(limit - proj.SpentMicro - proj.HeldMicro)
	case GateQuoteApproval:
		quoteID, _ := payload["quoteId"].(string)
		if amount > remaining(proj) {
			return apierr.New("budget:insufficient", "the budget cannot cover the approved quote")
		}
		exp := now.Add(HoldDuration).UTC()
		if err := tx.Quotes().Hold(ctx, quoteID, exp); err != nil {
			return err
		}
		if err := tx.Quotes().MarkApproved(ctx, quoteID, "gate:"+g.ID); err != nil {
			return err
		}
		if err := tx.Projects().Hold(ctx, proj.ID, amount, exp); err != nil {
			if errors.Is(err, store.ErrBudget) {
				return apierr.New("budget:insufficient", "the budget cannot cover the approved quote")
			}
			return err
		}
		result["quoteId"] = quoteID
		result["holdExpiresAt"] = exp.Format(time.RFC3339)
	default:
		return fmt.Errorf("gate kind %q has no action", g.Kind)
	}
	return nil
}

// countApprovedQuote adds a quote a human approved, about to be held, to
// its key's running count (store.Keys.AddCapSpent). A human's approval is
// not held to the key's cap; what it holds counts against the key's next
// quotes.
func countApprovedQuote(ctx context.Context, tx *store.Tx, orgID string, payload map[string]any) error {
	quoteID, _ := payload["quoteId"].(string)
	q, err := tx.Quotes().Lock(ctx, orgID, quoteID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // Hold says so
	}
	if err != nil || q.KeyID == "" || QuoteState(q.State) != QuoteNotHeld {
		return err
	}
	return tx.Keys().AddCapSpent(ctx, q.KeyID, q.AmountMicro, q.CreatedAt)
}

// PendingApprovals lists a human's organisation's undecided gates.
func (s *Approvals) Pending(ctx context.Context, orgID string) ([]store.Gate, error) {
	return s.store.Gates().Pending(ctx, orgID)
}

// resumeWaitingLaunches carries on the launches that wait on a quote's
// approval gate: once the human approved and the quote is held, each
// consumes it and is queued; otherwise each ends failed, charged nothing.
// It is Launches' DecisionHandler, subscribed to Approvals in New.
func (s *Launches) resumeWaitingLaunches(ctx context.Context, tx *store.Tx, h Human, g store.Gate, payload map[string]any, held bool, result map[string]any, now time.Time) ([]string, error) {
	waiting, err := tx.Tasks().OnGate(ctx, g.ID)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, lt := range waiting {
		var pl launchPayload
		if TaskState(lt.State) != TaskInputRequired || json.Unmarshal([]byte(lt.Payload), &pl) != nil || !pl.AwaitQuote {
			continue
		}
		if !held {
			cause := apierr.Newf("approval:denied", "a human denied quote %s; the launch charged nothing", pl.QuoteID)
			if code, ok := result["blockedBy"].(string); ok {
				msg, _ := result["message"].(string)
				cause = apierr.New(apierr.Code(code), msg)
			}
			if err := s.endLaunchTx(ctx, tx, lt.OrgID, lt.ID, "failed", cause, &launchPayload{}); err != nil {
				return nil, err
			}
			continue
		}
		c, err := s.quotes.Consume(ctx, tx, &auth.Principal{Kind: "system", OrgID: lt.OrgID}, pl.ProjectID, pl.QuoteID)
		if err != nil {
			var e *apierr.Error
			if !errors.As(err, &e) {
				return nil, err
			}
			if err := s.endLaunchTx(ctx, tx, lt.OrgID, lt.ID, "failed", e, &launchPayload{}); err != nil {
				return nil, err
			}
			continue
		}
		var steps []TaskStep
		if err := json.Unmarshal([]byte(lt.Steps), &steps); err != nil {
			return nil, err
		}
		for i := range steps {
			if steps[i].Name == StepCharge {
				steps[i].State, steps[i].CompletedAt = "succeeded", ptr(now.UTC())
				steps[i].Detail = fmt.Sprintf("%s USD, approved by a human", c.AmountMicro.Decimal())
			}
		}
		pl.ChargedMicro, pl.AwaitQuote = c.AmountMicro, false
		sj, _ := json.Marshal(steps)
		pj, _ := json.Marshal(pl)
		lt.State, lt.GateID, lt.Steps, lt.Payload, lt.UpdatedAt = "queued", "", string(sj), string(pj), now.UTC()
		if err := tx.Tasks().Update(ctx, lt); err != nil {
			return nil, err
		}
		if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: lt.OrgID, Actor: "human:" + h.UserID, Action: "resume_launch", ObjectType: "task", ObjectID: lt.ID,
			Details: map[string]any{"quoteId": pl.QuoteID, "gateId": g.ID, "chargedMicroUsd": c.AmountMicro}}, now); err != nil {
			return nil, err
		}
		out = append(out, lt.ID)
	}
	return out, nil
}

// DashboardFor reads the human's organisation.
func (s *Approvals) DashboardFor(ctx context.Context, h Human) (*Dashboard, error) {
	d := &Dashboard{}
	var err error
	if d.Org, err = s.store.Accounts().Organization(ctx, h.OrgID); err != nil {
		return nil, err
	}
	pl, err := s.projects.List(ctx, h.OrgID, store.Filter{Limit: 500})
	if err != nil {
		return nil, err
	}
	d.Projects = pl.Items
	if d.Tasks, err = s.store.Tasks().List(ctx, h.OrgID, 20); err != nil {
		return nil, err
	}
	gates, err := s.Pending(ctx, h.OrgID)
	if err != nil {
		return nil, err
	}
	for _, g := range gates {
		d.Pending = append(d.Pending, s.gateView(ctx, g))
	}
	if d.Keys, err = s.accounts.ListKeys(ctx, h.OrgID); err != nil {
		return nil, err
	}
	if d.Ledger, err = s.store.Ledger().Tail(ctx, h.OrgID, 20); err != nil {
		return nil, err
	}
	if d.Card, err = s.onboarding.PaymentMethodFor(ctx, h.OrgID); err != nil {
		return nil, err
	}
	if d.Card != nil {
		d.CardExpired = payments.Expired(d.Card.ExpMonth, d.Card.ExpYear, s.Now())
	}
	if d.Spending, err = s.spendingFor(ctx, h.OrgID, d); err != nil {
		return nil, err
	}
	return d, nil
}

// LedgerFor reads the human's organisation's whole chain, for download.
func (s *Approvals) LedgerFor(ctx context.Context, h Human) ([]ledger.Entry, error) {
	var out []ledger.Entry
	var after int64
	for {
		page, err := s.store.Ledger().Entries(ctx, h.OrgID, after, 1000)
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

func (s *Approvals) gateView(ctx context.Context, g store.Gate) GateView {
	v := GateView{ID: g.ID, Kind: g.Kind, State: g.State, TaskID: g.TaskID, DecidedBy: g.DecidedBy, DecidedAt: g.DecidedAt, CreatedAt: g.CreatedAt}
	var payload struct {
		ProjectID    string          `json:"projectId"`
		Amount       money.MicroUSD  `json:"amountMicroUsd"`
		Reason       string          `json:"reason"`
		QuoteID      string          `json:"quoteId"`
		CurrentLimit *money.MicroUSD `json:"currentLimitMicroUsd"`
		Domain       string          `json:"domain"`
		Years        int             `json:"years"`
		RequestedBy  string          `json:"requestedBy"`
		Items        []pricedItem    `json:"items"`
		// A registrant gate's proposal.
		Contact    *RegistrantContact `json:"contact"`
		LinkMailed bool               `json:"linkMailed"`
		NoLinkWhy  string             `json:"noLinkWhy"`
	}
	if err := json.Unmarshal([]byte(g.Payload), &payload); err == nil {
		v.Registrant, v.LinkMailed, v.NoLinkWhy = payload.Contact, payload.LinkMailed, payload.NoLinkWhy
		v.ProjectID, v.AmountMicro, v.Reason, v.QuoteID = payload.ProjectID, payload.Amount, payload.Reason, payload.QuoteID
		v.Domain, v.Years = payload.Domain, max(payload.Years, 1)
		v.RequestedBy = s.requesterName(ctx, g.OrgID, payload.RequestedBy)
		for _, it := range payload.Items {
			v.Items = append(v.Items, itemWords(it))
		}
		if v.Domain != "" && GateKind(v.Kind) != GateRegistrantContact {
			if label, tldName, ok := strings.Cut(v.Domain, "."); ok && label != "" {
				if tld, ok := s.prices.Lookup(tldName); ok {
					if r := tld.AnnualizedRenewal(); r != nil {
						v.RenewalMicro, v.HasRenewal = *r, true
					}
				}
			}
		}
		if payload.CurrentLimit != nil {
			v.CurrentLimitMicro, v.HasCurrentLimit = *payload.CurrentLimit, true
		}
	}
	if p, err := s.store.Projects().Get(ctx, g.OrgID, v.ProjectID); err == nil {
		v.ProjectName = p.Name
		v.RemainingMicro, v.HasBudget = p.LimitMicro-p.SpentMicro-p.HeldMicro, true
		switch GateKind(v.Kind) {
		case GateBudgetRaise:
			v.IfApprovedMicro, v.IfDeniedMicro = v.RemainingMicro+v.AmountMicro, v.RemainingMicro
		case GateDomainRegistration:
			// The launch took the price when it started: approving keeps it
			// spent, denying gives it back.
			v.IfApprovedMicro, v.IfDeniedMicro = v.RemainingMicro, v.RemainingMicro+v.AmountMicro
			if GateState(g.State) != GatePending {
				v.IfApprovedMicro, v.IfDeniedMicro = v.RemainingMicro, v.RemainingMicro
			}
		default:
			v.IfApprovedMicro, v.IfDeniedMicro = v.RemainingMicro-v.AmountMicro, v.RemainingMicro
		}
	}
	if t, err := s.store.Tasks().Get(ctx, g.OrgID, g.TaskID); err == nil {
		v.TaskState = t.State
		var res struct {
			RefundedUsd float64 `json:"refundedUsd"`
		}
		if json.Unmarshal([]byte(t.Result), &res) == nil {
			v.TaskRefundedMicro = money.FromUSD(res.RefundedUsd)
		}
	}
	v.Title = gateTitle(v)
	return v
}

// requesterName names the key or grant behind an actor string such as
// key:key_123.
func (s *Approvals) requesterName(ctx context.Context, orgID, actor string) string {
	id, ok := strings.CutPrefix(actor, "key:")
	if !ok {
		return actor
	}
	keys, err := s.store.Keys().List(ctx, orgID)
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
func (s *Approvals) GateFor(ctx context.Context, h Human, gateID string) (GateView, error) {
	g, err := s.store.Gates().Get(ctx, h.OrgID, gateID)
	if errors.Is(err, store.ErrNotFound) {
		return GateView{}, apierr.Newf("not_found:resource", "no approval %s in your organisation", gateID)
	}
	if err != nil {
		return GateView{}, apierr.Internal(err)
	}
	return s.gateView(ctx, g), nil
}
