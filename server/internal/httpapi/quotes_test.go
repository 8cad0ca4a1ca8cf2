package httpapi

import (
	"slices"
	"testing"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/service"
)

// actionNames names actions as a reader scans them (actions.Names).
func actionNames(acts []models.Action) []string { return actions.Names(acts) }

// A new quote's next steps come from its decision: the call that consumes
// a held one, the gate of one waiting for a human, a budget raise or a
// policy change for a denied one.
func TestCreatedQuoteNext(t *testing.T) {
	api := service.QuoteItem{Kind: service.ItemService, Workload: "dynamic_service", Target: "process", Months: 1, Name: "api"}
	cases := []struct {
		name  string
		quote service.Quote
		want  []string
	}{
		{"allow", service.Quote{Decision: service.QuoteAllow, State: service.QuoteHeld, Items: []service.QuoteItem{api}},
			[]string{"launch_service", "release_quote"}},
		{"over budget", service.Quote{Decision: service.QuoteDeny, Reasons: []apierr.Code{"budget:insufficient"}, Amount: 12_000_000, BudgetRemaining: 1_000_000},
			[]string{"request_budget_raise", "stop:denied"}},
		{"policy", service.Quote{Decision: service.QuoteDeny, Reasons: []apierr.Code{"policy:tld_denied"}},
			[]string{"manual:change_policy", "stop:denied"}},
		{"approval", service.Quote{Decision: service.QuoteRequiresApproval, Reasons: []apierr.Code{"policy:approval_required"}, GateTaskID: "tsk_1", ApprovalURL: "https://pier.test/approvals/gat_1"},
			[]string{"url:approve", "get_task"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.quote.ID, c.quote.ProjectID = "quo_1", "prj_1"
			next := createdNext(&c.quote)
			if got := actionNames(next); !slices.Equal(got[:len(c.want)], c.want) {
				t.Fatalf("next %v, want %v first", got, c.want)
			}
			if c.name == "over budget" {
				ta, _ := next[0].AsToolAction()
				if (*ta.Arguments)["amountUsd"] != 11.0 {
					t.Fatalf("raise %+v", *ta.Arguments)
				}
			}
		})
	}
}

// A held quote offers the call that consumes it: a launch, setup_email,
// or separate quotes when no single call consumes it all.
func TestHeldQuoteNext(t *testing.T) {
	dom := service.QuoteItem{Kind: service.ItemDomain, Domain: "acme.dev", Years: 1}
	mail := func(d string) service.QuoteItem {
		return service.QuoteItem{Kind: service.ItemEmail, Domain: d, Months: 1}
	}
	cases := []struct {
		name  string
		items []service.QuoteItem
		first string
		count int
	}{
		{"edge domain", []service.QuoteItem{dom}, "launch_service", 2},
		{"process", []service.QuoteItem{{Kind: service.ItemService, Workload: "dynamic_service", Target: "process", Months: 1}}, "launch_service", 2},
		{"mail", []service.QuoteItem{mail("acme.dev")}, "setup_email", 2},
		{"mixed", []service.QuoteItem{dom, mail("acme.dev"), mail("other.dev")}, "create_quote", 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			next := quoteNext(&service.Quote{ID: "quo_1", ProjectID: "prj_1", Items: c.items})
			if n := actionNames(next); n[0] != c.first || len(n) != c.count || n[len(n)-1] != "release_quote" {
				t.Fatalf("next %v", n)
			}
		})
	}
	// An edge launch still needs its bundle; a process launch names its target.
	ta, _ := launchFromQuote("prj_1", "quo_1", []service.QuoteItem{dom}).AsToolAction()
	if (*ta.Arguments)["target"] != "edge" || (*ta.Arguments)["domain"] != "acme.dev" || ta.MissingArguments == nil {
		t.Fatalf("edge launch %+v", ta)
	}
}

// The contract's items read into the domain's with their defaults left
// zero, and a stored quote maps back with only what it holds.
func TestQuoteItemsRoundTrip(t *testing.T) {
	d, w, tg, y := "acme.dev", models.WorkloadDynamicService, models.TargetName("process"), 2
	in := []models.QuoteItem{{Kind: models.Domain, Domain: &d, Years: &y}, {Kind: models.Service, Workload: &w, Target: &tg}}
	items := QuoteItems(in)
	want := []service.QuoteItem{{Kind: service.ItemDomain, Domain: d, Years: 2}, {Kind: service.ItemService, Workload: "dynamic_service", Target: "process"}}
	if !slices.Equal(items, want) {
		t.Fatalf("items %+v", items)
	}
	info := quoteInfo(service.Quote{ID: "quo_1", Items: items})
	if info.Items[0].Workload != nil || *info.Items[0].Years != 2 || info.Items[1].Domain != nil || *info.Items[1].Target != "process" || *info.Id != "quo_1" {
		t.Fatalf("info %+v", info)
	}
}
