package httpapi

import (
	"time"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/service"
)

// mutation builds the part every successful public mutation carries, for
// the nouns whose domain answer holds no receipt of its own: the receipt
// of what was done (stamped at now) and what it cost, how to undo it, and
// the project budget that remains. undo is nil for an irreversible action.
func mutation(now time.Time, op string, costs []service.Cost, created []models.ResourceRef, undo *models.ToolAction, budgetRemaining money.MicroUSD) models.MutationResult {
	lines := make([]models.CostLine, 0, len(costs))
	var total money.MicroUSD
	for _, c := range costs {
		lines = append(lines, models.CostLine{Item: c.Item, AmountUsd: c.Amount.USD()})
		total += c.Amount
	}
	if created == nil {
		created = []models.ResourceRef{}
	}
	return models.MutationResult{
		Receipt: models.Receipt{Id: auth.ID("rcp"), Action: op, Costs: lines, TotalUsd: total.USD(),
			CreatedResources: created, CreatedAt: now.UTC()},
		Undo:               undoOf(undo),
		BudgetRemainingUsd: budgetRemaining.USD(),
	}
}

// undoOf is a concrete reversal, or the irreversible marker when there is
// none: {command: null, irreversible: true}.
func undoOf(cmd *models.ToolAction) models.Undo {
	if cmd == nil {
		return models.Undo{Command: nil, Irreversible: true}
	}
	return models.Undo{Command: cmd, Irreversible: false}
}

// undoCall is the reversal calling operation id with args.
func undoCall(id string, args map[string]any) *models.ToolAction {
	t := actions.ToolAction(id, "agent", args)
	return &t
}

// wireMutated is a domain mutation as the contract answers it.
func wireMutated(m service.Mutated) models.MutationResult {
	return models.MutationResult{Receipt: wireReceipt(m.Receipt), Undo: wireUndo(m.Undo), BudgetRemainingUsd: m.BudgetRemaining.USD()}
}

// wireReceipt is a domain receipt as the contract writes it.
func wireReceipt(r service.Receipt) models.Receipt {
	out := models.Receipt{Id: r.ID, Action: r.Action, Costs: make([]models.CostLine, 0, len(r.Costs)), TotalUsd: r.Total.USD(),
		CreatedResources: make([]models.ResourceRef, 0, len(r.Created)), CreatedAt: r.At}
	for _, c := range r.Costs {
		out.Costs = append(out.Costs, models.CostLine{Item: c.Item, AmountUsd: c.Amount.USD()})
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

// wireUndo is a domain undo as the contract writes it: the call as a tool
// action, or {command: null, irreversible: true}.
func wireUndo(u service.Undoing) models.Undo {
	out := models.Undo{Irreversible: u.Irreversible}
	if u.Call != nil {
		out.Command = undoCall(u.Call.Tool, u.Call.Args)
	}
	if u.NotReversed != nil {
		out.NotReversed = ptr(u.NotReversed)
	}
	return out
}
