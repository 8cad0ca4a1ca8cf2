package service

import (
	"encoding/json"
	"time"

	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
)

// Resource is something a mutation created: its type, its id and, when it
// has one, its URL.
type Resource struct {
	Type, ID, URL string
}

// Reversal is the call that reverses a mutation: a tool and its
// arguments. The doors build the contract's command from it.
type Reversal struct {
	Tool string         `json:"tool"`
	Args map[string]any `json:"arguments,omitempty"`
}

// reverse is the call of tool with args that undoes a mutation.
func reverse(tool string, args map[string]any) *Reversal {
	return &Reversal{Tool: tool, Args: args}
}

// Undoing says how a mutation is undone: by Call, or not at all
// (Irreversible, with no call). NotReversed names what the call leaves in
// place, e.g. a domain bought with a launch that a teardown keeps. Its
// JSON is the shape tasks keep it in.
type Undoing struct {
	Call         *Reversal `json:"command"`
	Irreversible bool      `json:"irreversible"`
	NotReversed  []string  `json:"notReversed,omitempty"`
}

// undoneBy is the undo of a mutation that call reverses; nil for an
// irreversible one.
func undoneBy(call *Reversal) Undoing {
	if call == nil {
		return Undoing{Irreversible: true}
	}
	return Undoing{Call: call}
}

// Receipt is the record of what a mutation did and what it cost. A task
// keeps its mutation's receipt and answers it on every read.
type Receipt struct {
	ID, Action string
	Costs      []Cost
	Total      money.MicroUSD
	Created    []Resource
	At         time.Time
	// Kept is what the mutation left in place on purpose.
	Kept []string
}

// receiptJSON is the shape a receipt is kept in: the contract's, with
// amounts in USD.
type receiptJSON struct {
	ID     string `json:"id"`
	Action string `json:"action"`
	Costs  []struct {
		Item   string  `json:"item"`
		Amount float64 `json:"amountUsd"`
	} `json:"costs"`
	Total   float64 `json:"totalUsd"`
	Created []struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		URL  string `json:"url,omitempty"`
	} `json:"createdResources"`
	At   time.Time `json:"createdAt"`
	Kept []string  `json:"kept,omitempty"`
}

func (r Receipt) MarshalJSON() ([]byte, error) {
	out := receiptJSON{ID: r.ID, Action: r.Action, Total: r.Total.USD(), At: r.At, Kept: r.Kept}
	out.Costs = make([]struct {
		Item   string  `json:"item"`
		Amount float64 `json:"amountUsd"`
	}, 0, len(r.Costs))
	out.Created = make([]struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		URL  string `json:"url,omitempty"`
	}, 0, len(r.Created))
	for _, c := range r.Costs {
		out.Costs = append(out.Costs, struct {
			Item   string  `json:"item"`
			Amount float64 `json:"amountUsd"`
		}{c.Item, c.Amount.USD()})
	}
	for _, c := range r.Created {
		out.Created = append(out.Created, struct {
			Type string `json:"type"`
			ID   string `json:"id"`
			URL  string `json:"url,omitempty"`
		}{c.Type, c.ID, c.URL})
	}
	return json.Marshal(out)
}

func (r *Receipt) UnmarshalJSON(b []byte) error {
	var in receiptJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*r = Receipt{ID: in.ID, Action: in.Action, Total: money.FromUSD(in.Total), At: in.At, Kept: in.Kept}
	for _, c := range in.Costs {
		r.Costs = append(r.Costs, Cost{Item: c.Item, Amount: money.FromUSD(c.Amount)})
	}
	for _, c := range in.Created {
		r.Created = append(r.Created, Resource{Type: c.Type, ID: c.ID, URL: c.URL})
	}
	return nil
}

// Mutated is what every successful mutation answers beside its object:
// its receipt, how to undo it, and the project budget that remains.
type Mutated struct {
	Receipt         Receipt
	Undo            Undoing
	BudgetRemaining money.MicroUSD
}

// mutated records a mutation of op: what it cost, what it created, the
// call that undoes it (nil for none) and the budget left.
func (s timing) mutated(op string, costs []Cost, created []Resource, undo *Reversal, budgetRemaining money.MicroUSD) Mutated {
	var total money.MicroUSD
	for _, c := range costs {
		total += c.Amount
	}
	return Mutated{
		Receipt: Receipt{ID: auth.ID("rcp"), Action: op, Costs: costs, Total: total, Created: created, At: s.Now().UTC()},
		Undo:    undoneBy(undo), BudgetRemaining: budgetRemaining,
	}
}
