package web

import "net/http"

type domainsData struct {
	Domains  any
	Revealed string
	Code     string
}

// domains lists the organisation's registered domains, each with its own
// transfer-out action.
func (p domainPages) domains(w http.ResponseWriter, r *http.Request, s signedIn) {
	ds, err := p.svc.Domains.DomainsFor(r.Context(), s.Human)
	if err != nil {
		p.fail(w, r, &s, err)
		return
	}
	p.render(w, r, "domains", &view{Title: "Domains", Data: domainsData{Domains: ds}})
}

// transferOut shows one domain's auth code to the signed-in human, after a
// CSRF-checked POST; the code is never in a GET URL or an agent answer.
func (p domainPages) transferOut(w http.ResponseWriter, r *http.Request, s signedIn) {
	domain := r.PathValue("domain")
	code, err := p.svc.Domains.TransferOutCode(r.Context(), s.Human, domain)
	if err != nil {
		p.fail(w, r, &s, err)
		return
	}
	ds, err := p.svc.Domains.DomainsFor(r.Context(), s.Human)
	if err != nil {
		p.fail(w, r, &s, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	p.render(w, r, "domains", &view{Title: "Domains", Data: domainsData{Domains: ds, Revealed: domain, Code: code}})
}
