package web

import (
	"net/http"

	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/store"
)

type keysData struct {
	Keys      []store.APIKey
	Scopes    []string
	NewSecret string
	NewKey    *store.APIKey
}

func (p keyPages) keysPage(w http.ResponseWriter, r *http.Request, s signedIn, d keysData, notice string) {
	keys, err := p.svc.Accounts.ListKeys(r.Context(), s.OrgID)
	if err != nil {
		p.fail(w, r, &s, err)
		return
	}
	d.Keys, d.Scopes = keys, auth.Scopes
	p.render(w, r, "keys", &view{Title: "API keys", Data: d, Notice: notice})
}

func (p keyPages) keys(w http.ResponseWriter, r *http.Request, s signedIn) {
	p.keysPage(w, r, s, keysData{}, "")
}

// createKey shows the new key's secret in its answer, once; it is never
// stored and never shown again.
func (p keyPages) createKey(w http.ResponseWriter, r *http.Request, s signedIn) {
	var scopes []string
	for _, sc := range auth.Scopes {
		if r.PostForm.Get("scope_"+sc) != "" {
			scopes = append(scopes, sc)
		}
	}
	secret, k, err := p.svc.Accounts.CreateKey(r.Context(), s.Human, r.PostForm.Get("name"), scopes)
	if err != nil {
		p.fail(w, r, &s, err)
		return
	}
	w.WriteHeader(http.StatusCreated)
	p.keysPage(w, r, s, keysData{NewSecret: secret, NewKey: &k}, "")
}

func (p keyPages) revokeKey(w http.ResponseWriter, r *http.Request, s signedIn) {
	id := r.PathValue("id")
	if err := p.svc.Accounts.RevokeKey(r.Context(), s.Human, id); err != nil {
		p.fail(w, r, &s, err)
		return
	}
	p.keysPage(w, r, s, keysData{}, "Revoked "+id+". It stops working on its next request.")
}

func (p keyPages) grantScope(w http.ResponseWriter, r *http.Request, s signedIn) {
	id, scope := r.PathValue("id"), r.PostForm.Get("scope")
	if err := p.svc.Accounts.GrantScope(r.Context(), s.Human, id, scope); err != nil {
		p.fail(w, r, &s, err)
		return
	}
	p.keysPage(w, r, s, keysData{}, "Granted "+scope+" to "+id+".")
}
