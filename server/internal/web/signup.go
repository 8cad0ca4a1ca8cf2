package web

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/payments"
	"github.com/pierhq/pier/server/internal/pricing"
	"github.com/pierhq/pier/server/internal/registrar"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

type reviewForm struct {
	OrgName, ProjectName, HumanName, Email, Budget, ApprovalAbove string
}

type cardData struct {
	Setup     service.CardSetup
	TestCards []payments.TestCard
	Added     *store.PaymentMethod
}

// parseUSD reads an amount people type, such as "50", "$1,200" or "49.99",
// into micro-USD without passing through a float.
func parseUSD(s string) (money.MicroUSD, error) {
	s = strings.NewReplacer("$", "", ",", "", " ", "").Replace(s)
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(frac) > 2 || len(whole) > 9 {
		return 0, errors.New("not an amount")
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w < 0 {
		return 0, errors.New("not an amount")
	}
	var c int64
	if frac != "" {
		frac += strings.Repeat("0", 2-len(frac))
		if c, err = strconv.ParseInt(frac, 10, 64); err != nil || c < 0 {
			return 0, errors.New("not an amount")
		}
	}
	return money.USD(w, c), nil
}

// reviewData is the signup review page: the account's authority, the
// prices, the budget limits and the approval rules, and the form.
type reviewData struct {
	Signup    service.SignupReview
	Token     string
	FormToken string
	Scopes    []string
	Domains   []registrar.TLD
	Targets   []pricing.Target
	MinBudget money.MicroUSD
	MaxBudget money.MicroUSD
	Hold      time.Duration
	Form      reviewForm
}

func (p signupPages) reviewPage(w http.ResponseWriter, r *http.Request, su service.SignupReview, form reviewForm, pe *pageError) {
	d := reviewData{Signup: su, Token: r.PathValue("token"), FormToken: formToken(w, r), Scopes: service.SignupScopes,
		Domains: registrar.Catalog(false), Targets: pricing.Targets, MinBudget: service.MinSignupBudget, MaxBudget: service.MaxSignupBudget,
		Hold: service.HoldDuration, Form: form}
	if pe != nil {
		w.WriteHeader(http.StatusBadRequest)
	}
	p.render(w, r, "review", &view{Title: "Review your Pier account", Data: d, Error: pe})
}

// review shows a signup to the human who got its review URL. Once reviewed
// it shows nothing more, unless the browser is the reviewer's, which goes
// on to the card page.
func (p signupPages) review(w http.ResponseWriter, r *http.Request) {
	su, err := p.svc.Onboarding.SignupForReview(r.Context(), r.PathValue("token"))
	if err != nil {
		p.fail(w, r, nil, err)
		return
	}
	if su.Expired {
		p.fail(w, r, nil, apierr.New("conflict:expired", "This signup expired before it was reviewed."))
		return
	}
	if su.State != service.SignupPendingReview {
		if c, err := r.Cookie(cookieName(r, sessionCookie)); err == nil {
			if sess, err := p.svc.Accounts.SessionFor(r.Context(), c.Value); err == nil && sess.OrgID == su.OrgID {
				if su.State == service.SignupPendingCard {
					http.Redirect(w, r, "/billing/"+su.SetupID, http.StatusSeeOther)
				} else {
					http.Redirect(w, r, "/dashboard", http.StatusSeeOther)
				}
				return
			}
		}
		p.fail(w, r, nil, apierr.New("conflict:state", "This signup was already reviewed."))
		return
	}
	p.reviewPage(w, r, su, reviewForm{OrgName: su.OrgName, ProjectName: "default", Email: su.Email, Budget: "50"}, nil)
}

func (p signupPages) approveSignup(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || !checkFormToken(r) {
		p.fail(w, r, nil, apierr.New("auth:forbidden_origin", "This form is stale or did not come from this site."))
		return
	}
	token := r.PathValue("token")
	su, err := p.svc.Onboarding.SignupForReview(r.Context(), token)
	if err != nil {
		p.fail(w, r, nil, err)
		return
	}
	f := reviewForm{OrgName: r.PostForm.Get("org_name"), ProjectName: r.PostForm.Get("project_name"), HumanName: r.PostForm.Get("human_name"),
		Email: r.PostForm.Get("email"), Budget: r.PostForm.Get("budget"), ApprovalAbove: r.PostForm.Get("approval_above")}
	d := service.ReviewDecision{OrganizationName: f.OrgName, ProjectName: f.ProjectName, HumanName: f.HumanName, Email: strings.TrimSpace(f.Email)}
	budget, err := parseUSD(f.Budget)
	if err != nil {
		p.reviewPage(w, r, su, f, &pageError{Code: "input:invalid", Message: "The budget must be an amount in USD, such as 50 or 49.99.", Resolution: resolutions["input:invalid"]})
		return
	}
	d.BudgetMicro = budget
	if strings.TrimSpace(f.ApprovalAbove) != "" {
		above, err := parseUSD(f.ApprovalAbove)
		if err != nil {
			p.reviewPage(w, r, su, f, &pageError{Code: "input:invalid", Message: "The approval threshold must be an amount in USD, or empty.", Resolution: resolutions["input:invalid"]})
			return
		}
		d.ApprovalAboveMicro = &above
	}
	if r.PostForm.Get("approve") == "" {
		p.reviewPage(w, r, su, f, &pageError{Code: "input:invalid", Message: "Tick the box to approve the account's authority, prices, budget and rules.", Resolution: resolutions["input:invalid"]})
		return
	}
	ok, err := p.svc.Onboarding.ApproveSignup(r.Context(), token, d)
	var e *apierr.Error
	if errors.As(err, &e) && e.Code == "input:invalid" {
		p.reviewPage(w, r, su, f, &pageError{Code: string(e.Code), Message: e.Message, Resolution: resolutions["input:invalid"]})
		return
	}
	if err != nil {
		p.fail(w, r, nil, err)
		return
	}
	setSessionCookie(w, r, ok.SessionSecret, ok.Session.ExpiresAt.Sub(p.svc.Now()))
	clearCookie(w, r, formCookie)
	http.Redirect(w, r, "/billing/"+ok.SetupID, http.StatusSeeOther)
}

func (p signupPages) cardPage(w http.ResponseWriter, r *http.Request, s signedIn) {
	cs, err := p.svc.Onboarding.CardSetupFor(r.Context(), s.Human, r.PathValue("id"))
	if err != nil {
		p.fail(w, r, &s, err)
		return
	}
	p.render(w, r, "card", &view{Title: "Card setup", Data: cardData{Setup: cs, TestCards: payments.TestCards}})
}

func (p signupPages) submitCard(w http.ResponseWriter, r *http.Request, s signedIn) {
	id := r.PathValue("id")
	month, year, err := payments.ParseExpiry(r.PostForm.Get("expiry"))
	card := payments.Card{Number: r.PostForm.Get("number"), ExpMonth: month, ExpYear: year, CVC: strings.TrimSpace(r.PostForm.Get("cvc"))}
	var pm store.PaymentMethod
	if err == nil {
		pm, err = p.svc.Onboarding.SubmitCard(r.Context(), s.Human, id, card)
	} else {
		err = &payments.Decline{Code: payments.InvalidExpiry, Message: "The expiry date is not valid.", Resolution: "Enter the expiry as MM/YY, such as 12/30."}
	}
	cs, gerr := p.svc.Onboarding.CardSetupFor(r.Context(), s.Human, id)
	if gerr != nil {
		p.fail(w, r, &s, gerr)
		return
	}
	var d *payments.Decline
	if errors.As(err, &d) {
		pe, status := p.pageError(err)
		w.WriteHeader(status)
		p.render(w, r, "card", &view{Title: "Card setup", Error: pe, Data: cardData{Setup: cs, TestCards: payments.TestCards}})
		return
	}
	if err != nil {
		p.fail(w, r, &s, err)
		return
	}
	p.render(w, r, "card", &view{Title: "Card saved", Data: cardData{Setup: cs, TestCards: payments.TestCards, Added: &pm}})
}

func (p signupPages) openCardSetup(w http.ResponseWriter, r *http.Request, s signedIn) {
	id, err := p.svc.Onboarding.OpenCardSetup(r.Context(), s.Human)
	if err != nil {
		p.fail(w, r, &s, err)
		return
	}
	http.Redirect(w, r, "/billing/"+id, http.StatusSeeOther)
}
