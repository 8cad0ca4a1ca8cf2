package web

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

type registrantData struct {
	service.RegistrantProposal
	Action string
}

// registrantPage shows a proposed registrant to the person the link was
// mailed to. Opening it records nothing; the button does.
func (p registrantPages) registrantPage(w http.ResponseWriter, r *http.Request) {
	prop, err := p.svc.Mail.RegistrantByToken(r.Context(), r.PathValue("token"))
	if err != nil {
		p.fail(w, r, nil, linkRefusal(err))
		return
	}
	p.render(w, r, "registrant", &view{Title: "Confirm the registrant of " + prop.Domain, Session: &service.Session{}, CSRF: formToken(w, r),
		Data: registrantData{RegistrantProposal: prop, Action: "/registrant/confirm/" + url.PathEscape(r.PathValue("token"))}})
}

// confirmRegistrant records the person's confirmation.
func (p registrantPages) confirmRegistrant(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || !checkFormToken(r) {
		p.fail(w, r, nil, apierr.New("auth:forbidden_origin", "This form expired or came from another page. Open the link again."))
		return
	}
	prop, err := p.svc.Mail.ConfirmRegistrant(r.Context(), r.PathValue("token"))
	if err != nil {
		p.fail(w, r, nil, linkRefusal(err))
		return
	}
	clearCookie(w, r, formCookie)
	p.render(w, r, "registrant", &view{Title: "Registrant confirmed", Session: &service.Session{}, Data: registrantData{RegistrantProposal: prop}})
}

// linkRefusal says why a confirmation link confirms nothing.
func linkRefusal(err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apierr.New("not_found:resource", "This confirmation link is unknown or expired.")
	case errors.Is(err, service.ErrRegistrantSuperseded):
		return apierr.New("conflict:state", "A newer proposal for this domain replaced this one. Use the link in the newest message.")
	case errors.Is(err, service.ErrRegistrantDeclined):
		return apierr.New("conflict:state", "A person of the organisation declined this proposal; nothing was recorded.")
	case errors.Is(err, service.ErrRegistrantNeedsSession):
		// Agents can read mail to this address, so whoever holds the link
		// may be one: a signed-in person confirms at the approval URL.
		return apierr.New("policy:approval_required", "Agents of the organisation can read mail to this address, so this link confirms nothing. A person of the organisation signs in and confirms at the approval link the task shows.")
	}
	return err
}
