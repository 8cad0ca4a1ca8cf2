package httpapi

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/api"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/service"
)

// appendQuoteEnvelope writes what the generated handler's json.Encoder
// writes: quotes as create_quote makes them (held, denied, waiting for a
// human, with domains, mail and gated steps), then random values with
// the strings, numbers, times and nils the encoder treats apart.
func TestQuoteJSONMatchesEncoder(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC)
	hold := now.Add(15 * time.Minute)
	quotes := []service.Quote{
		{ID: "quo_a", ProjectID: "prj_a", Decision: service.QuoteAllow, State: service.QuoteHeld, Amount: 7_000_000, BudgetRemaining: 860_000_000,
			HoldExpiresAt: &hold, Lines: []service.Cost{{Item: "service:process:1mo", Amount: 7_000_000}}, Reasons: []apierr.Code{},
			Items: []service.QuoteItem{{Kind: service.ItemService, Workload: "dynamic_service", Months: 1}}},
		{ID: "quo_b", ProjectID: "prj_b", Decision: service.QuoteDeny, Amount: 21_000_001, BudgetRemaining: 1,
			Reasons: []apierr.Code{"budget:insufficient"}, Items: []service.QuoteItem{{Kind: service.ItemService, Workload: "dynamic_service", Months: 3}}},
		{ID: "quo_c", ProjectID: "prj_c", Decision: service.QuoteRequiresApproval, State: service.QuoteHeld, Amount: 12_340_000,
			GateTaskID: "tsk_x", ApprovalURL: "https://pier.example/approve?t=a&b=<c>", GatedSteps: []service.GatedStep{"launch_service"},
			Items: []service.QuoteItem{{Kind: service.ItemDomain, Domain: "acme.dev", Years: 2}, {Kind: service.ItemEmail, Domain: "acme.dev"}}},
		{ID: "quo_d", ProjectID: "prj_d", Decision: service.QuoteAllow, State: service.QuoteHeld, Amount: 1,
			Items: []service.QuoteItem{{Kind: service.ItemEmail, Domain: "a.io"}}, Lines: []service.Cost{}},
		{ID: "quo_e", ProjectID: "prj_e", Decision: service.QuoteDeny, Reasons: []apierr.Code{"policy:target_blocked", "x\u2028y"}},
	}
	for i := range quotes {
		q := &quotes[i]
		var undo *models.ToolAction
		if q.State == service.QuoteHeld {
			undo = undoCall("release_quote", map[string]any{"id": q.ID})
		}
		m := mutation(now, "create_quote", nil, []models.ResourceRef{{Type: "quote", Id: q.ID}}, undo, q.BudgetRemaining)
		sameAsEncoder(t, api.CreateQuote201JSONResponse{Data: quoteWire(q, m), Actions: createdNext(q), FormatVersion: FormatVersion})
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		sameAsEncoder(t, randomQuoteEnvelope(r))
	}
}

func sameAsEncoder(t *testing.T, res api.CreateQuote201JSONResponse) {
	t.Helper()
	var want bytes.Buffer
	if err := json.NewEncoder(&want).Encode(res); err != nil {
		return // the generated handler would fail too; never made
	}
	if got := appendQuoteEnvelope(nil, res); !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("appendQuoteEnvelope:\n%s\nencoding/json:\n%s", got, want.Bytes())
	}
}

var oddStrings = []string{"", "a", "prj_x", `q"uote`, `back\slash`, "<b>&amp;</b>", "tab\there", "nl\n", "\x00\x1f", "é", "\u2028\u2029",
	"\xff\xfe", "日本", "emoji 🚀", "\x7f", "a/b"}

func randomQuoteEnvelope(r *rand.Rand) api.CreateQuote201JSONResponse {
	str := func() string { return oddStrings[r.IntN(len(oddStrings))] }
	strs := func() []string {
		if r.IntN(4) == 0 {
			return nil
		}
		out := []string{}
		for range r.IntN(3) {
			out = append(out, str())
		}
		return out
	}
	num := func() float64 {
		return []float64{0, 7, 0.1, 1e-7, 1e21, 123456789.123, -3.5, 1e20, 5e-324, money.MicroUSD(r.Int64N(1e12)).USD()}[r.IntN(10)]
	}
	tm := time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(time.FixedZone("x", 3600*r.IntN(5)))
	res := api.CreateQuote201JSONResponse{FormatVersion: models.FormatVersion(str())}
	if r.IntN(2) == 0 {
		res.Actions = []models.Action{actions.Tool("create_quote", "agent", map[string]any{str(): str(), "n": num(), "i": r.IntN(9), "b": true,
			"m": map[string]any{"x": []any{str(), 1.5, nil}}}), actions.Stop("done")}
	}
	if r.IntN(3) == 0 {
		res.Replayed = ptr(r.IntN(2) == 0)
	}
	d := &res.Data
	d.AmountUsd, d.BudgetRemainingUsd, d.Decision, d.ProjectId, d.QuoteId = num(), num(), models.QuoteDecision(str()), str(), str()
	for _, s := range strs() {
		d.Reasons = append(d.Reasons, models.BlockedBy(s))
	}
	if d.Reasons == nil && r.IntN(2) == 0 {
		d.Reasons = []models.BlockedBy{}
	}
	if r.IntN(2) == 0 {
		g := []models.QuoteGatedSteps{models.QuoteGatedSteps(str())}
		d.GatedSteps = &g
	}
	if r.IntN(2) == 0 {
		d.HoldExpiresAt = &tm
	}
	if r.IntN(2) == 0 {
		d.Lines = &[]models.CostLine{{AmountUsd: num(), Item: str()}}
	}
	if r.IntN(2) == 0 {
		d.State = ptr(models.QuoteState(str()))
	}
	d.Receipt = models.Receipt{Action: str(), CreatedAt: tm, Id: str(), TotalUsd: num()}
	if r.IntN(3) > 0 {
		d.Receipt.Costs = []models.CostLine{{AmountUsd: num(), Item: str()}}
		d.Receipt.CreatedResources = []models.ResourceRef{{Id: str(), Type: str()}, {Id: str(), Type: str(), Url: ptr(str())}}
	}
	if k := strs(); k != nil {
		d.Receipt.Kept = &k
	}
	if r.IntN(2) == 0 {
		ta := actions.ToolAction("release_quote", "agent", map[string]any{"id": str(), "x": num()})
		if r.IntN(2) == 0 {
			ta.Id, ta.RetryAfterSeconds, ta.After = ptr(str()), ptr(r.IntN(100)), ptr(strs())
		}
		d.Undo.Command = &ta
	}
	d.Undo.Irreversible = r.IntN(2) == 0
	if n := strs(); n != nil {
		d.Undo.NotReversed = &n
	}
	return res
}
