package service

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
)

// Cost is one line of a receipt, in micro-USD.
type Cost struct {
	Item   string
	Amount money.MicroUSD
}

// Undo is a concrete reversal, or the irreversible marker when there is
// none: {command: null, irreversible: true}.
func Undo(cmd *models.ToolAction) models.Undo {
	if cmd == nil {
		return models.Undo{Command: nil, Irreversible: true}
	}
	return models.Undo{Command: cmd, Irreversible: false}
}

// timing is the service's clock, for the nouns that stamp what they do.
type timing struct{ clock func() time.Time }

// Now is the service's clock.
func (s timing) Now() time.Time { return s.clock() }

// links makes the public URLs of pages and answers.
type links struct{ baseURLFunc func() string }

// edge is what the nouns that serve hosts or queue tasks drive: the
// platform, and the log for what it refused.
type edge struct {
	platform Platform
	log      *slog.Logger
}

// limits are the operator's quotas.
type limits struct{ quotaLimits Quotas }

// enqueue hands a committed task to the durable runner. A lost enqueue is
// not lost work: the runner's sweep finds the queued task after a restart.
func (s edge) enqueue(ctx context.Context, taskID, what string) {
	if err := s.platform.Enqueue(ctx, taskID); err != nil {
		s.log.Warn("enqueue "+what, "task", taskID, "err", err)
	}
}

// UndoCall returns the reversal calling operation id with args.
func UndoCall(id string, args map[string]any) *models.ToolAction {
	t := actions.ToolAction(id, "agent", args)
	return &t
}

// ApprovalURL is where a human decides a gate. It carries the gate id and
// no authority: the page acts only for a signed-in human of the same
// organisation.
func (s links) ApprovalURL(gateID string) string {
	return s.baseURL() + "/approvals/" + gateID
}

func (s links) baseURL() string {
	if s.baseURLFunc != nil {
		return s.baseURLFunc()
	}
	return ""
}

// ReviewURL is the page a signup's human opens.
func (s links) ReviewURL(token string) string { return s.baseURL() + "/signup/" + token }

func (s limits) quotas() Quotas {
	q := s.quotaLimits
	d := DefaultQuotas
	if q.Services <= 0 {
		q.Services = d.Services
	}
	if q.Bundles <= 0 {
		q.Bundles = d.Bundles
	}
	if q.StorageBytes <= 0 {
		q.StorageBytes = d.StorageBytes
	}
	return q
}

// Mutation builds the part every successful public mutation carries: the
// receipt of what was done and what it cost, how to undo it, and the
// project budget that remains. undo is nil for an irreversible action.
func (s timing) Mutation(op string, costs []Cost, created []models.ResourceRef, undo *models.ToolAction, budgetRemaining money.MicroUSD) models.MutationResult {
	lines := make([]models.CostLine, 0, len(costs))
	var total money.MicroUSD
	for _, c := range costs {
		lines = append(lines, models.CostLine{Item: c.Item, AmountUsd: usd(c.Amount)})
		total += c.Amount
	}
	if created == nil {
		created = []models.ResourceRef{}
	}
	return models.MutationResult{
		Receipt: models.Receipt{
			Id:               auth.ID("rcp"),
			Action:           op,
			Costs:            lines,
			TotalUsd:         usd(total),
			CreatedResources: created,
			CreatedAt:        s.Now().UTC(),
		},
		Undo:               Undo(undo),
		BudgetRemainingUsd: usd(budgetRemaining),
	}
}

// previews names preview hosts under the preview domain.
type previews struct{ previewDomain string }

// Wire is the mutation as the contract answers it. The doors map a task's
// mutation with it, and the nouns not yet in the domain's types still
// answer the contract's mutation result through it.
func (m Mutated) Wire() models.MutationResult {
	return models.MutationResult{Receipt: m.Receipt.Wire(), Undo: m.Undo.Wire(), BudgetRemainingUsd: usd(m.BudgetRemaining)}
}

// Wire is the receipt as the contract writes it.
func (r Receipt) Wire() models.Receipt {
	out := models.Receipt{Id: r.ID, Action: r.Action, Costs: make([]models.CostLine, 0, len(r.Costs)), TotalUsd: usd(r.Total),
		CreatedResources: make([]models.ResourceRef, 0, len(r.Created)), CreatedAt: r.At}
	for _, c := range r.Costs {
		out.Costs = append(out.Costs, models.CostLine{Item: c.Item, AmountUsd: usd(c.Amount)})
	}
	for _, c := range r.Created {
		ref := models.ResourceRef{Type: c.Type, Id: c.ID}
		if c.URL != "" {
			ref.Url = ptr(c.URL)
		}
		out.CreatedResources = append(out.CreatedResources, ref)
	}
	if r.Kept != nil {
		out.Kept = ptr(r.Kept)
	}
	return out
}

// Wire is the undo as the contract writes it: the call as a tool action,
// or {command: null, irreversible: true}.
func (u Undoing) Wire() models.Undo {
	out := models.Undo{Irreversible: u.Irreversible}
	if u.Call != nil {
		out.Command = UndoCall(u.Call.Tool, u.Call.Args)
	}
	if u.NotReversed != nil {
		out.NotReversed = ptr(u.NotReversed)
	}
	return out
}

// PreviewHost is <service>--<project>.<preview domain>; underscores in ids
// become hyphens so the label is a valid host name.
func (s previews) PreviewHost(service, projectID string) string {
	return service + "--" + strings.ReplaceAll(strings.ToLower(projectID), "_", "-") + "." + s.previewDomain
}

func (s edge) hostURL(scheme, host string) string {
	httpPort, port := s.platform.Ports()
	if scheme == "http" {
		port = httpPort
	}
	if port == "" || port == "443" && scheme == "https" || port == "80" && scheme == "http" {
		return scheme + "://" + host + "/"
	}
	return scheme + "://" + host + ":" + port + "/"
}

func (s edge) invalidate(hosts ...string) {
	var all []string
	for _, h := range hosts {
		if h != "" {
			all = append(all, h, "www."+h)
		}
	}
	s.platform.InvalidateHosts(all...)
}

// SignInURL is the one-time link for a sign-in token.
func (s links) SignInURL(token string) string { return s.baseURL() + "/signin/" + token }

// BillingURL is the card page of a flow. Like an approval URL it carries
// an id and no authority.
func (s links) BillingURL(id string) string { return s.baseURL() + "/billing/" + id }
