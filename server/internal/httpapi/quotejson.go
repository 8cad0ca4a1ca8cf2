package httpapi

import (
	"strconv"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/jsonappend"
)

// create_quote's answer, encoded without reflection: the bytes
// json.NewEncoder(w).Encode gives the generated handler's value (members
// in the types' order, HTML escaped, a newline after), which
// TestQuoteJSONMatchesEncoder compares on many values. What is not plain
// (a string with a character the encoder escapes, an argument of a kind
// not written here) goes through encoding/json itself.

// appendQuoteEnvelope appends res as the generated handler encodes it.
func appendQuoteEnvelope(b []byte, res api.CreateQuote201JSONResponse) []byte {
	b = append(b, `{"actions":`...)
	b = appendActions(b, res.Actions)
	b = append(b, `,"data":`...)
	b = appendQuote(b, &res.Data)
	b = append(b, `,"formatVersion":`...)
	b = jsonappend.String(b, string(res.FormatVersion))
	if res.Replayed != nil {
		b = append(b, `,"replayed":`...)
		b = strconv.AppendBool(b, *res.Replayed)
	}
	return append(b, "}\n"...)
}

// appendActions appends actions, each its union's bytes (which
// encoding/json compacts: they are compact already, from json.Marshal).
func appendActions(b []byte, as []models.Action) []byte {
	if as == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, a := range as {
		if i > 0 {
			b = append(b, ',')
		}
		raw, err := a.MarshalJSON()
		if err != nil || len(raw) == 0 {
			raw = []byte("null")
		}
		b = jsonappend.Compact(b, raw)
	}
	return append(b, ']')
}

func appendQuote(b []byte, q *models.Quote) []byte {
	b = append(b, `{"amountUsd":`...)
	b = jsonappend.Float(b, q.AmountUsd)
	b = append(b, `,"budgetRemainingUsd":`...)
	b = jsonappend.Float(b, q.BudgetRemainingUsd)
	b = append(b, `,"decision":`...)
	b = jsonappend.String(b, string(q.Decision))
	if q.GatedSteps != nil {
		b = append(b, `,"gatedSteps":`...)
		b = jsonappend.Strings(b, *q.GatedSteps)
	}
	if q.HoldExpiresAt != nil {
		b = append(b, `,"holdExpiresAt":`...)
		b = jsonappend.Time(b, *q.HoldExpiresAt)
	}
	if q.Lines != nil {
		b = append(b, `,"lines":`...)
		b = appendCostLines(b, *q.Lines)
	}
	b = append(b, `,"projectId":`...)
	b = jsonappend.String(b, q.ProjectId)
	b = append(b, `,"quoteId":`...)
	b = jsonappend.String(b, q.QuoteId)
	b = append(b, `,"reasons":`...)
	b = jsonappend.Strings(b, q.Reasons)
	b = append(b, `,"receipt":`...)
	b = appendReceipt(b, &q.Receipt)
	if q.State != nil {
		b = append(b, `,"state":`...)
		b = jsonappend.String(b, string(*q.State))
	}
	b = append(b, `,"undo":`...)
	b = appendUndo(b, &q.Undo)
	return append(b, '}')
}

func appendReceipt(b []byte, r *models.Receipt) []byte {
	b = append(b, `{"action":`...)
	b = jsonappend.String(b, r.Action)
	b = append(b, `,"costs":`...)
	b = appendCostLines(b, r.Costs)
	b = append(b, `,"createdAt":`...)
	b = jsonappend.Time(b, r.CreatedAt)
	b = append(b, `,"createdResources":`...)
	if r.CreatedResources == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, ref := range r.CreatedResources {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = jsonappend.String(b, ref.Id)
			b = append(b, `,"type":`...)
			b = jsonappend.String(b, ref.Type)
			if ref.Url != nil {
				b = append(b, `,"url":`...)
				b = jsonappend.String(b, *ref.Url)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"id":`...)
	b = jsonappend.String(b, r.Id)
	if r.Kept != nil {
		b = append(b, `,"kept":`...)
		b = jsonappend.Strings(b, *r.Kept)
	}
	b = append(b, `,"totalUsd":`...)
	b = jsonappend.Float(b, r.TotalUsd)
	return append(b, '}')
}

func appendUndo(b []byte, u *models.Undo) []byte {
	b = append(b, `{"command":`...)
	if u.Command == nil {
		b = append(b, "null"...)
	} else {
		b = jsonappend.ToolAction(b, u.Command)
	}
	b = append(b, `,"irreversible":`...)
	b = strconv.AppendBool(b, u.Irreversible)
	if u.NotReversed != nil {
		b = append(b, `,"notReversed":`...)
		b = jsonappend.Strings(b, *u.NotReversed)
	}
	return append(b, '}')
}

func appendCostLines(b []byte, ls []models.CostLine) []byte {
	if ls == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, l := range ls {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"amountUsd":`...)
		b = jsonappend.Float(b, l.AmountUsd)
		b = append(b, `,"item":`...)
		b = jsonappend.String(b, l.Item)
		b = append(b, '}')
	}
	return append(b, ']')
}
