package web

import (
	"net/http"

	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/service"
)

func init() {
	funcs["lifetimeBudget"] = func(p service.ProjectPolicy) bool { return p.BudgetPeriod == service.BudgetLifetime }
	funcs["pausesServices"] = func(p service.ProjectPolicy) bool { return p.OnExhausted == service.PauseServices }
}

// budgetPolicy sets whether a project's budget is monthly or lifetime and
// what happens when it is exhausted: a human's choice, made here.
func (p approvalPages) budgetPolicy(w http.ResponseWriter, r *http.Request, s signedIn) {
	period := service.BudgetPeriod(r.PostForm.Get("budgetPeriod"))
	onExhausted := service.OnExhausted(r.PostForm.Get("onBudgetExhausted"))
	if !period.Valid() || !onExhausted.Valid() {
		p.fail(w, r, &s, apierr.New("input:invalid", "Choose a budget period and what happens at 100 %."))
		return
	}
	if err := p.svc.Metering().SetBudgetPolicy(r.Context(), s.Human, r.PathValue("id"), period, onExhausted); err != nil {
		p.fail(w, r, &s, err)
		return
	}
	http.Redirect(w, r, "/dashboard", http.StatusSeeOther)
}

// renewDomain is a signed-in human's renewal of a domain for a year.
func (p domainPages) renewDomain(w http.ResponseWriter, r *http.Request, s signedIn) {
	if err := p.svc.DomainRenewals().RenewDomain(r.Context(), s.Human, r.PathValue("domain")); err != nil {
		p.fail(w, r, &s, err)
		return
	}
	http.Redirect(w, r, "/domains", http.StatusSeeOther)
}
