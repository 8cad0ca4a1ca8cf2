package service

import (
	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/auth"
)

// Cost is one line of a receipt, in micro-USD.
type Cost struct {
	Item   string
	Amount int64
}

// Mutation builds the part every successful public mutation carries: the
// receipt of what was done and what it cost, how to undo it, and the
// project budget that remains. undo is nil for an irreversible action.
func (s *Service) Mutation(op string, costs []Cost, created []sdk.ResourceRef, undo *sdk.ToolAction, budgetRemaining int64) sdk.MutationResult {
	lines := make([]sdk.CostLine, 0, len(costs))
	var total int64
	for _, c := range costs {
		lines = append(lines, sdk.CostLine{Item: c.Item, AmountUsd: usd(c.Amount)})
		total += c.Amount
	}
	if created == nil {
		created = []sdk.ResourceRef{}
	}
	return sdk.MutationResult{
		Receipt: sdk.Receipt{
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

// Undo is a concrete reversal, or the irreversible marker when there is
// none: {command: null, irreversible: true}.
func Undo(cmd *sdk.ToolAction) sdk.Undo {
	if cmd == nil {
		return sdk.Undo{Command: nil, Irreversible: true}
	}
	return sdk.Undo{Command: cmd, Irreversible: false}
}

// UndoCall returns the reversal calling operation id with args.
func UndoCall(id string, args map[string]any) *sdk.ToolAction {
	t := actions.ToolAction(id, "agent", args)
	return &t
}
