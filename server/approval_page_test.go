package server_test

import (
	"html"
	"net/url"
	"strings"
	"testing"

	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// TestApprovalPageSaysWhatIsApproved reads the approval page for a domain
// purchase before and after each decision: the action in words, the price,
// the renewal, the key that asked, the budget either way, and afterwards
// the truthful outcome.
func TestApprovalPageSaysWhatIsApproved(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
	bundle := upload(t, ts, a, siteSaying("approved"))
	gateFor := func(name, domain string) (string, string) {
		q := ts.Client.Do("POST", "/v1/quotes", map[string]any{"projectId": a.project, "items": []any{map[string]any{"kind": "domain", "domain": domain, "years": 1}}}, a.header())
		quote := q.JSON()["data"].(map[string]any)["quoteId"]
		r := ts.Client.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": name, "target": "edge", "bundleId": bundle, "domain": domain, "quoteId": quote}, a.header())
		id := r.JSON()["data"].(map[string]any)["taskId"].(string)
		task := waitTask(t, ts, a, id, "input_required")
		return "/approvals/" + gateOf(task), id
	}
	domains := availableDomains(2, "dev", "pageapproval")
	keep, keepTask := gateFor("keep", domains[0])
	drop, _ := gateFor("drop", domains[1])
	b := signIn(t, ts, a.org)
	page := b.get(keep)
	text := html.UnescapeString(page.body)
	for _, want := range []string{"Buy the domain " + domains[0] + " for 1 year", "Price now", "$12.00", "Then renews at", "a year",
		"Asked by", "the key “t”", "Budget remaining", "if you approve", "if you deny", "cannot be unbought", "Denying refunds $12.00"} {
		if !strings.Contains(text, want) {
			t.Errorf("the pending page lacks %q", want)
		}
	}
	for _, never := range []string{"domain_registration", "for 15 minutes"} {
		if strings.Contains(text, never) {
			t.Errorf("the pending page says %q", never)
		}
	}
	if p := b.post(keep, url.Values{"csrf": {csrfOf(t, page)}, "decision": {"approve"}}); p.status != 303 {
		t.Fatalf("approve: %d", p.status)
	}
	after := html.UnescapeString(b.get(keep).body)
	if !strings.Contains(after, "Approved: "+domains[0]) || strings.Contains(after, "if you approve") {
		t.Errorf("after approving: %s", after)
	}
	// The outcome follows the launch, not only the decision.
	waitTask(t, ts, a, keepTask, "succeeded")
	if after := html.UnescapeString(b.get(keep).body); !strings.Contains(after, "Approved: "+domains[0]+" is bought for $12.00") {
		t.Errorf("after the launch bought it: %s", after)
	}
	page = b.get(drop)
	if p := b.post(drop, url.Values{"csrf": {csrfOf(t, page)}, "decision": {"deny"}}); p.status != 303 {
		t.Fatalf("deny: %d", p.status)
	}
	after = html.UnescapeString(b.get(drop).body)
	if !strings.Contains(after, "Denied: "+domains[1]+" was not bought, nothing was charged for it") {
		t.Errorf("after denying: %s", after)
	}
}
