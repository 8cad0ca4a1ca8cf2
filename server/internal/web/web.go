package web

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/oauth"
	"github.com/pierhq/pier/server/internal/payments"
	"github.com/pierhq/pier/server/internal/safetext"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

const (
	sessionCookie = "pier_session"
	// formCookie carries the double-submit token of forms shown before a
	// session exists (the signup review).
	formCookie = "pier_form"
	// nextCookie remembers the page a signed-out human asked for, so the
	// sign-in link lands there.
	nextCookie = "pier_next"
)

// Config wires the human pages.
type Config struct {
	Service *service.Service
	Log     *slog.Logger
	// OAuth, when set, serves the authorization endpoint and its consent
	// page here, behind the human session.
	OAuth *oauth.Server
}

// pages is what every human page shares: the domain, the templates, and
// the guard, session, rendering and error handling around each handler.
// The handlers are one small type per page group, each embedding it.
type pages struct {
	svc   *service.Service
	log   *slog.Logger
	oauth *oauth.Server
	tmpl  map[string]*template.Template
}

// Mount registers the human pages on mux.
func Mount(mux *http.ServeMux, cfg Config) error {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	p := &pages{svc: cfg.Service, log: cfg.Log, oauth: cfg.OAuth, tmpl: map[string]*template.Template{}}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return err
	}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return err
		}
		p.tmpl[name] = t
	}
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /static/", p.guard(http.StripPrefix("/static/", staticFiles(http.FileServerFS(static)))))

	signin, approvals, keys := signInPages{p}, approvalPages{p}, keyPages{p}
	registrant, signup, domains, authorize := registrantPages{p}, signupPages{p}, domainPages{p}, oauthPages{p}
	mux.Handle("GET /signin/{token}", p.guard(http.HandlerFunc(signin.signInConfirm)))
	mux.Handle("POST /signin/{token}", p.guard(http.HandlerFunc(signin.signIn)))
	mux.Handle("POST /signout", p.guard(p.withSession(signin.signOut)))
	mux.Handle("GET /dashboard", p.guard(p.withSession(approvals.dashboard)))
	mux.Handle("GET /ledger.jsonl", p.guard(p.withSession(approvals.ledgerDownload)))
	mux.Handle("POST /projects/{id}/budget-policy", p.guard(p.withSession(approvals.budgetPolicy)))
	mux.Handle("GET /approvals/{gateId}", p.guard(p.withSession(approvals.approval)))
	mux.Handle("POST /approvals/{gateId}", p.guard(p.withSession(approvals.decide)))
	mux.Handle("GET /keys", p.guard(p.withSession(keys.keys)))
	mux.Handle("POST /keys", p.guard(p.withSession(keys.createKey)))
	mux.Handle("POST /keys/{id}/revoke", p.guard(p.withSession(keys.revokeKey)))
	mux.Handle("POST /keys/{id}/grant", p.guard(p.withSession(keys.grantScope)))
	mux.Handle("POST /keys/{id}/cap", p.guard(p.withSession(keys.setCap)))
	mux.Handle("GET /registrant/confirm/{token}", p.guard(http.HandlerFunc(registrant.registrantPage)))
	mux.Handle("POST /registrant/confirm/{token}", p.guard(http.HandlerFunc(registrant.confirmRegistrant)))
	mux.Handle("GET /signup/{token}", p.guard(http.HandlerFunc(signup.review)))
	mux.Handle("POST /signup/{token}", p.guard(http.HandlerFunc(signup.approveSignup)))
	mux.Handle("POST /billing", p.guard(p.withSession(signup.openCardSetup)))
	mux.Handle("GET /billing/{id}", p.guard(p.withSession(signup.cardPage)))
	mux.Handle("POST /billing/{id}", p.guard(p.withSession(signup.submitCard)))
	mux.Handle("GET /domains", p.guard(p.withSession(domains.domains)))
	mux.Handle("POST /domains/{domain}/transfer-out", p.guard(p.withSession(domains.transferOut)))
	mux.Handle("POST /domains/{domain}/renew", p.guard(p.withSession(domains.renewDomain)))
	if p.oauth != nil {
		mux.Handle("GET /oauth/authorize", p.guard(http.HandlerFunc(authorize.oauthAuthorize)))
		mux.Handle("GET /oauth/consent/{id}", p.guard(p.withSession(authorize.oauthConsent)))
		mux.Handle("POST /oauth/consent/{id}", p.guard(p.withSession(authorize.oauthDecide)))
	}
	return nil
}

// The page groups, one file each.
type (
	approvalPages   struct{ *pages } // the dashboard, the ledger download and gates' approvals
	domainPages     struct{ *pages } // the organisation's domains and their transfers out
	keyPages        struct{ *pages } // agent API keys
	oauthPages      struct{ *pages } // the OAuth authorization endpoint and its consent page
	registrantPages struct{ *pages } // a registrant's confirmation of their contact
	signInPages     struct{ *pages } // one-time sign-in links and signing out
	signupPages     struct{ *pages } // the signup review and the card setup
)

func staticFiles(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		h.ServeHTTP(w, r)
	})
}

// guard applies what every human page needs: no agent authority, strict
// security headers, and same-origin form posts.
func (p *pages) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		// Review tokens and ids in paths must not leak to other sites.
		// (same-origin, not no-referrer: with no-referrer browsers send
		// "Origin: null" on our own form posts.)
		h.Set("Referrer-Policy", "same-origin")
		if !strings.HasPrefix(r.URL.Path, "/static/") {
			h.Set("Cache-Control", "no-store")
		}
		// An agent's credential never acts here: the human pages take a
		// human session and nothing else.
		if r.Header.Get("Authorization") != "" {
			p.fail(w, r, nil, apierr.New("auth:agent_authority_refused",
				"The human pages do not accept API keys or other agent credentials. A person signs in with a one-time link."))
			return
		}
		if crossOrigin.Check(r) != nil {
			p.fail(w, r, nil, apierr.New("auth:forbidden_origin", "This form was posted from another site."))
			return
		}
		if r.Method == http.MethodPost {
			// Names typed into forms (organisations, projects, keys) must
			// read as what they are.
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			if err := r.ParseForm(); err != nil {
				p.fail(w, r, nil, apierr.New("input:invalid", "This form could not be read."))
				return
			}
			for _, vs := range r.PostForm {
				for _, v := range vs {
					if prob := safetext.Problem(v); prob != "" {
						p.fail(w, r, nil, apierr.Newf("input:invalid_text", "A field holds text that would display as something else (%s).", prob))
						return
					}
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// crossOrigin refuses cross-site form posts, by Sec-Fetch-Site or, from
// older browsers, by an Origin that does not name this host.
var crossOrigin = http.NewCrossOriginProtection()

// cookieName gives a cookie the __Host- prefix over HTTPS, which binds it
// to this host, Secure and Path=/ (no Domain can widen it); plain-HTTP
// local mode cannot use the prefix.
func cookieName(r *http.Request, name string) string {
	if secure(r) {
		return "__Host-" + name
	}
	return name
}

func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// csrfToken is the form token of a session: derived from the cookie's
// secret, which the store never holds, so it cannot be computed from the
// database and needs no storage of its own.
func csrfToken(secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("pier form token"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func equalTokens(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

type sessionKey struct{}

type signedIn struct {
	service.Session
	secret string
}

func (s signedIn) csrf() string { return csrfToken(s.secret) }

func currentSession(ctx context.Context) (signedIn, bool) {
	s, ok := ctx.Value(sessionKey{}).(signedIn)
	return s, ok
}

// withSession finds the signed-in human. Without one it answers with the
// sign-in page, which says nothing about what was asked for, and remembers
// the path for after sign-in. Every POST must carry the session's form
// token.
func (p *pages) withSession(next func(w http.ResponseWriter, r *http.Request, s signedIn)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sess signedIn
		if c, err := r.Cookie(cookieName(r, sessionCookie)); err == nil {
			found, err := p.svc.Accounts.SessionFor(r.Context(), c.Value)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				p.fail(w, r, nil, apierr.Internal(err))
				return
			}
			if err == nil {
				sess = signedIn{Session: found, secret: c.Value}
			}
		}
		if sess.secret == "" {
			if r.Method == http.MethodGet {
				if next := service.SafeNext(r.URL.Path); next != "" {
					http.SetCookie(w, &http.Cookie{Name: cookieName(r, nextCookie), Value: next, Path: "/", MaxAge: int(service.SignInTTL / time.Second),
						HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secure(r)})
				}
			}
			w.WriteHeader(http.StatusUnauthorized)
			p.render(w, r, "signin_required", &view{Title: "Sign in"})
			return
		}
		if r.Method == http.MethodPost {
			if err := r.ParseForm(); err != nil || !equalTokens(r.PostForm.Get("csrf"), sess.csrf()) {
				p.fail(w, r, &sess, apierr.New("auth:forbidden_origin", "This form is stale or did not come from this site."))
				return
			}
		}
		next(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, sess)), sess)
	})
}

// view is what every template gets.
type view struct {
	Title   string
	Session *service.Session
	CSRF    string
	Error   *pageError
	Notice  string
	Data    any
}

type pageError struct {
	Code, Message, Resolution string
}

func (p *pages) render(w http.ResponseWriter, r *http.Request, name string, v *view) {
	if s, ok := currentSession(r.Context()); ok && v.Session == nil {
		v.Session, v.CSRF = &s.Session, s.csrf()
	}
	t, ok := p.tmpl[name]
	if !ok {
		p.log.Error("no template", "name", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := t.ExecuteTemplate(w, "layout", v); err != nil {
		p.log.Error("rendering page", "page", name, "err", err)
	}
}

// resolutions are the human-readable fixes shown on the pages, by cause.
// Agent paths never carry them.
var resolutions = map[string]string{
	"auth:invalid_credentials":     "Ask for a new one-time link: on the server, run `pier admin signin-link`.",
	"auth:agent_authority_refused": "Open this page in a browser, signed in with a one-time link, without an API key.",
	"auth:forbidden_origin":        "Reload the page and submit the form again.",
	"not_found:resource":           "Check the link. If it belongs to another organisation, sign in as a member of that organisation.",
	"conflict:state":               "Nothing more to do here: the first decision stands. The dashboard shows the current state.",
	"conflict:expired":             "Ask the agent for a new link.",
	"input:invalid":                "Correct the field and submit again.",
	"input:invalid_text":           "Remove the invisible direction-control characters (or the invalid bytes) from the field and submit again.",
	"internal:error":               "Try again in a moment.",
}

// fail renders an error page with the status the contract assigns to the
// cause, and its resolution.
func (p *pages) fail(w http.ResponseWriter, r *http.Request, sess *signedIn, err error) {
	pe, status := p.pageError(err)
	v := &view{Title: "Something needs attention", Error: pe}
	if sess != nil {
		v.Session, v.CSRF = &sess.Session, sess.csrf()
	}
	w.WriteHeader(status)
	p.render(w, r, "error", v)
}

func (p *pages) pageError(err error) (*pageError, int) {
	var d *payments.Decline
	if errors.As(err, &d) {
		return &pageError{Code: "card:" + d.Code, Message: d.Message, Resolution: d.Resolution}, http.StatusPaymentRequired
	}
	e := apierr.As(err)
	if e.Code == "internal:error" {
		p.log.Error("human page", "err", err)
	}
	return &pageError{Code: string(e.Code), Message: e.Message, Resolution: resolutions[string(e.Code)]}, e.Status()
}

// setSessionCookie lasts as long as the session, as a Max-Age counted on
// the server's clock: an absolute expiry would depend on the browser's clock
// agreeing with the server's.
func setSessionCookie(w http.ResponseWriter, r *http.Request, secret string, ttl time.Duration) {
	http.SetCookie(w, &http.Cookie{Name: cookieName(r, sessionCookie), Value: secret, Path: "/", MaxAge: max(1, int(ttl.Seconds())),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secure(r)})
}

func clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	http.SetCookie(w, &http.Cookie{Name: cookieName(r, name), Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secure(r)})
}

// formToken returns the double-submit token for a form shown before sign-in,
// setting its cookie when the browser has none.
func formToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(cookieName(r, formCookie)); err == nil && len(c.Value) >= 32 {
		return c.Value
	}
	t := auth.Token(32)
	http.SetCookie(w, &http.Cookie{Name: cookieName(r, formCookie), Value: t, Path: "/", MaxAge: int(service.SignupTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secure(r)})
	return t
}

func checkFormToken(r *http.Request) bool {
	c, err := r.Cookie(cookieName(r, formCookie))
	return err == nil && equalTokens(r.PostForm.Get("csrf"), c.Value)
}
