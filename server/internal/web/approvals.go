package web

import (
	"net/http"

	"github.com/pierhq/pier/ledger"
	"github.com/pierhq/pier/server/internal/apierr"
)

func (p approvalPages) dashboard(w http.ResponseWriter, r *http.Request, s signedIn) {
	d, err := p.svc.Approvals.DashboardFor(r.Context(), s.Human)
	if err != nil {
		p.fail(w, r, &s, err)
		return
	}
	p.render(w, r, "dashboard", &view{Title: d.Org.Name, Data: d})
}

// ledgerDownload serves the organisation's chain as JSON lines, the format
// `pier ledger verify` checks.
func (p approvalPages) ledgerDownload(w http.ResponseWriter, r *http.Request, s signedIn) {
	entries, err := p.svc.Approvals.LedgerFor(r.Context(), s.Human)
	if err != nil {
		p.fail(w, r, &s, err)
		return
	}
	w.Header().Set("Content-Type", "application/jsonl")
	w.Header().Set("Content-Disposition", `attachment; filename="ledger-`+s.OrgID+`.jsonl"`)
	ledger.WriteJSONL(w, entries)
}

// approval shows a gate of the human's organisation. Another
// organisation's gate is not found, exactly like a gate that does not exist.
func (p approvalPages) approval(w http.ResponseWriter, r *http.Request, s signedIn) {
	g, err := p.svc.Approvals.GateFor(r.Context(), s.Human, r.PathValue("gateId"))
	if err != nil {
		p.fail(w, r, &s, err)
		return
	}
	p.render(w, r, "approval", &view{Title: "Approval", Data: g})
}

func (p approvalPages) decide(w http.ResponseWriter, r *http.Request, s signedIn) {
	id := r.PathValue("gateId")
	var approve bool
	switch r.PostForm.Get("decision") {
	case "approve":
		approve = true
	case "deny":
	default:
		p.fail(w, r, &s, apierr.New("input:invalid", "Choose approve or deny."))
		return
	}
	if err := p.svc.Approvals.Decide(r.Context(), s.Human, id, approve); err != nil {
		p.fail(w, r, &s, err)
		return
	}
	http.Redirect(w, r, "/approvals/"+id, http.StatusSeeOther)
}
