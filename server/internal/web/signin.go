package web

import (
	"net/http"
	"net/url"

	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/service"
)

// signInConfirm shows a one-time link's confirm page. Opening the link
// spends nothing: link scanners and previews fetch it with GET, and only a
// person pressing the button posts it.
func (p signInPages) signInConfirm(w http.ResponseWriter, r *http.Request) {
	p.render(w, r, "signin_confirm", &view{Title: "Sign in", Session: &service.Session{}, CSRF: formToken(w, r),
		Data: struct{ Action string }{Action: "/signin/" + url.PathEscape(r.PathValue("token"))}})
}

// signIn spends a one-time link, posted from its confirm page, starts a
// session and lands on the page the human asked for, else the dashboard.
func (p signInPages) signIn(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || !checkFormToken(r) {
		p.fail(w, r, nil, apierr.New("auth:forbidden_origin", "This sign-in form expired or came from another page. Open the link again."))
		return
	}
	secret, sess, next, err := p.svc.Accounts.SignIn(r.Context(), r.PathValue("token"))
	if err != nil {
		p.fail(w, r, nil, err)
		return
	}
	setSessionCookie(w, r, secret, sess.ExpiresAt.Sub(p.svc.Now()))
	if next == "" {
		if c, err := r.Cookie(cookieName(r, nextCookie)); err == nil {
			next = service.SafeNext(c.Value)
		}
	}
	clearCookie(w, r, nextCookie)
	clearCookie(w, r, formCookie)
	if next == "" {
		next = "/dashboard"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (p signInPages) signOut(w http.ResponseWriter, r *http.Request, s signedIn) {
	if err := p.svc.Accounts.SignOut(r.Context(), s.secret); err != nil {
		p.fail(w, r, &s, err)
		return
	}
	clearCookie(w, r, sessionCookie)
	p.render(w, r, "signed_out", &view{Title: "Signed out", Session: &service.Session{}})
}
