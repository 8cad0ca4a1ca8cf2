package httpapi

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/api"
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
	b = appendJSONString(b, string(res.FormatVersion))
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
		b = appendCompact(b, raw)
	}
	return append(b, ']')
}

// appendCompact appends raw JSON as encoding/json writes a marshaller's
// answer: compacted, HTML escaped. Bytes already so are copied.
func appendCompact(b, raw []byte) []byte {
	plain := true
	for _, c := range raw {
		if c <= ' ' || c == '<' || c == '>' || c == '&' || c >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		return append(b, raw...)
	}
	var compact, escaped bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return append(b, raw...)
	}
	json.HTMLEscape(&escaped, compact.Bytes())
	return append(b, escaped.Bytes()...)
}

func appendQuote(b []byte, q *models.Quote) []byte {
	b = append(b, `{"amountUsd":`...)
	b = appendFloat(b, q.AmountUsd)
	b = append(b, `,"budgetRemainingUsd":`...)
	b = appendFloat(b, q.BudgetRemainingUsd)
	b = append(b, `,"decision":`...)
	b = appendJSONString(b, string(q.Decision))
	if q.GatedSteps != nil {
		b = append(b, `,"gatedSteps":`...)
		b = appendStrings(b, *q.GatedSteps)
	}
	if q.HoldExpiresAt != nil {
		b = append(b, `,"holdExpiresAt":`...)
		b = appendTime(b, *q.HoldExpiresAt)
	}
	if q.Lines != nil {
		b = append(b, `,"lines":`...)
		b = appendCostLines(b, *q.Lines)
	}
	b = append(b, `,"projectId":`...)
	b = appendJSONString(b, q.ProjectId)
	b = append(b, `,"quoteId":`...)
	b = appendJSONString(b, q.QuoteId)
	b = append(b, `,"reasons":`...)
	b = appendStrings(b, q.Reasons)
	b = append(b, `,"receipt":`...)
	b = appendReceipt(b, &q.Receipt)
	if q.State != nil {
		b = append(b, `,"state":`...)
		b = appendJSONString(b, string(*q.State))
	}
	b = append(b, `,"undo":`...)
	b = appendUndo(b, &q.Undo)
	return append(b, '}')
}

func appendReceipt(b []byte, r *models.Receipt) []byte {
	b = append(b, `{"action":`...)
	b = appendJSONString(b, r.Action)
	b = append(b, `,"costs":`...)
	b = appendCostLines(b, r.Costs)
	b = append(b, `,"createdAt":`...)
	b = appendTime(b, r.CreatedAt)
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
			b = appendJSONString(b, ref.Id)
			b = append(b, `,"type":`...)
			b = appendJSONString(b, ref.Type)
			if ref.Url != nil {
				b = append(b, `,"url":`...)
				b = appendJSONString(b, *ref.Url)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"id":`...)
	b = appendJSONString(b, r.Id)
	if r.Kept != nil {
		b = append(b, `,"kept":`...)
		b = appendStrings(b, *r.Kept)
	}
	b = append(b, `,"totalUsd":`...)
	b = appendFloat(b, r.TotalUsd)
	return append(b, '}')
}

func appendUndo(b []byte, u *models.Undo) []byte {
	b = append(b, `{"command":`...)
	if u.Command == nil {
		b = append(b, "null"...)
	} else {
		b = appendToolAction(b, u.Command)
	}
	b = append(b, `,"irreversible":`...)
	b = strconv.AppendBool(b, u.Irreversible)
	if u.NotReversed != nil {
		b = append(b, `,"notReversed":`...)
		b = appendStrings(b, *u.NotReversed)
	}
	return append(b, '}')
}

func appendToolAction(b []byte, t *models.ToolAction) []byte {
	b = append(b, `{"actor":`...)
	b = appendJSONString(b, string(t.Actor))
	if t.After != nil {
		b = append(b, `,"after":`...)
		b = appendStrings(b, *t.After)
	}
	if t.Arguments != nil {
		b = append(b, `,"arguments":`...)
		b = appendMap(b, *t.Arguments)
	}
	b = append(b, `,"http":{"method":`...)
	b = appendJSONString(b, string(t.Http.Method))
	b = append(b, `,"path":`...)
	b = appendJSONString(b, t.Http.Path)
	b = append(b, '}')
	if t.Id != nil {
		b = append(b, `,"id":`...)
		b = appendJSONString(b, *t.Id)
	}
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, string(t.Kind))
	if t.MissingArguments != nil {
		b = append(b, `,"missingArguments":`...)
		b = appendStrings(b, *t.MissingArguments)
	}
	if t.RequiredHeaders != nil {
		b = append(b, `,"requiredHeaders":`...)
		b = appendStrings(b, *t.RequiredHeaders)
	}
	if t.RetryAfterSeconds != nil {
		b = append(b, `,"retryAfterSeconds":`...)
		b = strconv.AppendInt(b, int64(*t.RetryAfterSeconds), 10)
	}
	b = append(b, `,"tool":`...)
	b = appendJSONString(b, t.Tool)
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
		b = appendFloat(b, l.AmountUsd)
		b = append(b, `,"item":`...)
		b = appendJSONString(b, l.Item)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendStrings appends a slice of a string type (nil is null).
func appendStrings[S ~string](b []byte, ss []S) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, string(s))
	}
	return append(b, ']')
}

// appendMap appends a map as encoding/json does: members sorted by key.
func appendMap(b []byte, m map[string]any) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendAny(b, m[k])
	}
	return append(b, '}')
}

// appendAny appends v: the kinds JSON decodes to and the ones actions'
// arguments hold are written here, any other through encoding/json.
func appendAny(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case string:
		return appendJSONString(b, v)
	case bool:
		return strconv.AppendBool(b, v)
	case int:
		return strconv.AppendInt(b, int64(v), 10)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			break
		}
		return appendFloat(b, v)
	case map[string]any:
		return appendMap(b, v)
	case []any:
		if v == nil {
			return append(b, "null"...)
		}
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendAny(b, e)
		}
		return append(b, ']')
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

// appendFloat appends f as encoding/json writes a float64.
func appendFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 is written e-9.
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendTime appends t as time.Time's MarshalJSON does.
func appendTime(b []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		raw, err := json.Marshal(t)
		if err != nil {
			return append(b, "null"...)
		}
		return append(b, raw...)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendJSONString appends s quoted; a string with anything encoding/json
// would escape goes through it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			raw, _ := json.Marshal(s)
			return append(b, raw...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
