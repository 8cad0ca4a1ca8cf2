package web

import (
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

type keysData struct {
	Keys []store.APIKey
	// Caps are the capped keys' caps and spend this period, by key id.
	Caps      map[string]capView
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
	spends, err := p.svc.Accounts.KeySpends(r.Context(), s.OrgID)
	if err != nil {
		p.fail(w, r, &s, err)
		return
	}
	d.Keys, d.Scopes, d.Caps = keys, auth.Scopes, map[string]capView{}
	for id, ks := range spends {
		d.Caps[id] = capView{Cap: *ks.Key.CapMicro, Period: ks.Key.CapPeriod, Spent: ks.SpentMicro,
			Input: strconv.FormatFloat(ks.Key.CapMicro.USD(), 'f', -1, 64)}
	}
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

// capView is a key's cap as the keys page shows it.
type capView struct {
	Cap, Spent money.MicroUSD
	Period     string
	// Input is the cap as the form's field holds it: "20", "12.5".
	Input string
}

// setCap sets or removes (an empty amount) a key's spending cap. Only a
// signed-in person reaches it: the guard refuses agent credentials.
func (p keyPages) setCap(w http.ResponseWriter, r *http.Request, s signedIn) {
	id := r.PathValue("id")
	var capMicro *money.MicroUSD
	if v := strings.TrimSpace(strings.TrimPrefix(r.PostForm.Get("cap_usd"), "$")); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1e9 || math.IsNaN(f) {
			p.fail(w, r, &s, apierr.Newf("input:invalid", "the cap is an amount in US dollars, such as 20 or 12.50, not %q", v))
			return
		}
		m := money.FromUSD(f)
		capMicro = &m
	}
	period := r.PostForm.Get("period")
	if err := p.svc.Accounts.SetKeyCap(r.Context(), s.Human, id, capMicro, period); err != nil {
		p.fail(w, r, &s, err)
		return
	}
	notice := "Removed the spending cap of " + id + "."
	if capMicro != nil {
		notice = "Capped " + id + " at " + capMicro.String() + " per " + period + ". It applies from the key's next quote."
		if period == "lifetime" {
			notice = "Capped " + id + " at " + capMicro.String() + " for its lifetime. It applies from the key's next quote."
		}
	}
	p.keysPage(w, r, s, keysData{}, notice)
}
