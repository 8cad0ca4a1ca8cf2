package web

import (
	"errors"
	"net/http"

	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/oauth"
)

// The OAuth authorization endpoint and its consent page. The endpoint
// checks the request and parks it; the consent page, like every human
// page, shows nothing without a signed-in session, and the grant goes to
// the session's organisation. Its path carries only the request's id, so
// the sign-in link can bring the person back to it.

// oauthAuthorize serves GET /oauth/authorize.
func (p oauthPages) oauthAuthorize(w http.ResponseWriter, r *http.Request) {
	id, err := p.oauth.Authorize(r.Context(), r.URL.Query())
	var oe *oauth.Error
	switch {
	case errors.As(err, &oe) && oe.RedirectURL() != "":
		http.Redirect(w, r, oe.RedirectURL(), http.StatusFound)
		return
	case errors.As(err, &oe):
		// The client or its redirect URI is unknown: tell the person, and
		// send nothing to a URI nobody registered.
		p.fail(w, r, nil, apierr.Newf("input:invalid", "This sign-in request is not valid: %s.", oe.Description))
		return
	case err != nil:
		p.fail(w, r, nil, err)
		return
	}
	http.Redirect(w, r, "/oauth/consent/"+id, http.StatusSeeOther)
}

type consentData struct {
	oauth.Pending
	Scopes []consentScope
}

type consentScope struct {
	Name, Description string
	Checked           bool
}

var scopeDescriptions = map[string]string{
	"read":       "See the organisation's projects, tasks, domains and ledger.",
	"quote":      "Ask for quotes, which hold project budget for 15 minutes.",
	"launch":     "Publish sites and launch services within the budget.",
	"buy_domain": "Buy domains without asking you each time. Leave this unticked to approve every purchase yourself.",
}

// oauthConsent shows the request to the signed-in human.
func (p oauthPages) oauthConsent(w http.ResponseWriter, r *http.Request, s signedIn) {
	pending, err := p.oauth.PendingAuthorization(r.Context(), r.PathValue("id"))
	if err != nil {
		p.fail(w, r, &s, err)
		return
	}
	d := consentData{Pending: pending}
	for _, sc := range pending.Scopes {
		// buy_domain is never pre-ticked: skipping the purchase gate must be
		// a deliberate choice.
		d.Scopes = append(d.Scopes, consentScope{Name: sc, Description: scopeDescriptions[sc], Checked: sc != "buy_domain"})
	}
	// The decision redirects to the client; the form may go there and
	// nowhere else.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self' "+pending.RedirectOrigin+"; frame-ancestors 'none'; base-uri 'none'")
	p.render(w, r, "oauth_consent", &view{Title: "Allow " + pending.ClientName, Data: d})
}

// oauthDecide records the decision and sends the browser back to the
// client with a code or access_denied.
func (p oauthPages) oauthDecide(w http.ResponseWriter, r *http.Request, s signedIn) {
	var approve bool
	switch r.PostForm.Get("decision") {
	case "approve":
		approve = true
	case "deny":
	default:
		p.fail(w, r, &s, apierr.New("input:invalid", "Choose allow or deny."))
		return
	}
	var scopes []string
	for _, sc := range oauth.Scopes {
		if r.PostForm.Get("scope_"+sc) != "" {
			scopes = append(scopes, sc)
		}
	}
	redirect, err := p.oauth.Decide(r.Context(), r.PathValue("id"), s.OrgID, s.UserID, approve, scopes)
	if err != nil {
		p.fail(w, r, &s, err)
		return
	}
	http.Redirect(w, r, redirect, http.StatusSeeOther)
}
