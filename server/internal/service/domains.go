package service

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/registrar"
	"github.com/pierhq/pier/server/internal/store"
)

// domainTaken is the refusal for a name someone holds: sold, or being
// bought by a launch in flight, whichever organisation holds it.
func domainTaken(domain string) *apierr.Error {
	label, _, _ := strings.Cut(domain, ".")
	return apierr.Newf("plan:domain_unavailable", "%s is already registered or being registered; search for another name", domain).
		WithActions(actions.Tool("search_domains", "agent", map[string]any{"q": label}), actions.Stop("terminal_error"))
}

// DomainView is a registered domain as the human pages show it; it never
// carries the auth code.
type DomainView struct {
	Domain string
	Years  int
	Bought string
	// Expires is when the registration runs out unless it is renewed.
	Expires string
	Serving bool
}

var labelRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
})

// DomainsFor lists the human's organisation's registered domains.
func (s *Domains) DomainsFor(ctx context.Context, h Human) ([]DomainView, error) {
	ps, err := s.store.Domains().OrgPurchases(ctx, h.OrgID)
	if err != nil {
		return nil, err
	}
	out := make([]DomainView, 0, len(ps))
	for _, p := range ps {
		_, zerr := s.store.Domains().Zone(ctx, p.Domain)
		expires, err := currentExpiry(ctx, s.store, p)
		if err != nil {
			return nil, err
		}
		out = append(out, DomainView{Domain: p.Domain, Years: p.Years, Bought: p.CreatedAt.Format("2006-01-02"), Expires: expires.Format("2006-01-02"), Serving: zerr == nil})
	}
	return out, nil
}

// TransferOutCode reveals a domain's transfer auth code to a signed-in human
// of the organisation that bought it, one domain at a time, and records that
// it was shown. No agent path reaches it.
func (s *Domains) TransferOutCode(ctx context.Context, h Human, domain string) (string, error) {
	domain = strings.ToLower(strings.TrimSpace(domain))
	p, err := s.store.Domains().PurchaseByDomain(ctx, domain)
	if errors.Is(err, store.ErrNotFound) || err == nil && p.OrgID != h.OrgID {
		return "", apierr.Newf("not_found:resource", "your organisation has no domain %s", domain)
	}
	if err != nil {
		return "", err
	}
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: h.OrgID, Actor: "human:" + h.UserID, Action: "reveal_transfer_code",
			ObjectType: "domain", ObjectID: domain, Details: map[string]any{"ref": p.Ref}}, s.Now())
		return err
	})
	if err != nil {
		return "", err
	}
	return p.AuthCode, nil
}

// Domain is a domain the organisation registered.
type Domain struct {
	Name         string
	RegisteredAt time.Time
	Years        int
	Paid         money.MicroUSD
	// ServiceID is the live service the domain serves, if any.
	ServiceID string
	// Zone says the domain's zone is served here.
	Zone bool
}

func (s *Domains) domainView(ctx context.Context, orgID string, p store.Purchase) (Domain, error) {
	out := Domain{Name: p.Domain, RegisteredAt: p.CreatedAt, Years: p.Years, Paid: money.MicroUSD(p.AmountMicro)}
	if v, err := s.store.Services().LiveForDomain(ctx, orgID, p.Domain); err == nil {
		out.ServiceID = v.ID
	} else if !errors.Is(err, store.ErrNotFound) {
		return out, err
	}
	if _, err := s.store.Domains().Zone(ctx, p.Domain); err == nil {
		out.Zone = true
	} else if !errors.Is(err, store.ErrNotFound) {
		return out, err
	}
	return out, nil
}

// List lists the domains the organisation owns.
func (s *Domains) List(ctx context.Context, orgID string, f store.Filter) (*Page[Domain], error) {
	ps, err := s.store.Domains().ListPurchases(ctx, orgID, f)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	out := &Page[Domain]{Items: []Domain{}, Args: f.Args()}
	for _, p := range ps {
		v, err := s.domainView(ctx, orgID, p)
		if err != nil {
			return nil, apierr.Internal(err)
		}
		out.Items = append(out.Items, v)
	}
	if len(ps) > 0 {
		last := ps[len(ps)-1]
		out.NextCursor = nextCursor(f, len(ps), last.CreatedAt, last.Domain)
	}
	return out, nil
}

// Get reads one domain the organisation owns.
func (s *Domains) Get(ctx context.Context, orgID, domain string) (*Domain, error) {
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	p, err := s.ownedDomain(ctx, orgID, domain)
	if err != nil {
		return nil, err
	}
	v, err := s.domainView(ctx, orgID, p)
	if err != nil {
		return nil, apierr.Internal(err)
	}
	return &v, nil
}

// DomainSearch is what a search for a name asks.
type DomainSearch struct {
	// Query is a label (acme) or a name (acme.dev), whose TLD comes first.
	Query string
	// Full searches the full catalog, exotic TLDs included.
	Full bool
	// Limit is the most candidates to answer; 0 is 25.
	Limit int
	// Allow, when not empty, is the TLDs to search, in order; Deny the
	// TLDs never to.
	Allow, Deny []string
	// MaxFirstYear and MaxRenewal are price ceilings; nil is none.
	MaxFirstYear, MaxRenewal *money.MicroUSD
}

// DomainCandidate is one name a search checked.
type DomainCandidate struct {
	Domain, TLD        string
	Available, Premium bool
	// Prices are nil where the registry gives none.
	FirstYear, Renewal, AnnualRenewal *money.MicroUSD
	RenewalPeriodYears                int
}

// DomainSearchResult is a search's candidates and the filters it applied.
type DomainSearchResult struct {
	Label      string
	Full       bool
	Limit      int
	Candidates []DomainCandidate
	// TLDs is the TLDs checked, in order; Allow and Deny the lists as
	// applied; Ignored the allowed TLDs outside the catalog searched.
	TLDs, Allow, Deny, Ignored []string
	Excluded                   DomainsExcluded
}

// DomainsExcluded counts the candidates a price ceiling left out, by why.
type DomainsExcluded struct {
	LackingPrice, OverFirstYearCeiling, OverRenewalCeiling int
}

// Search searches the sandbox registrar's catalog (SPEC §2.5).
func (s *Domains) Search(ctx context.Context, q DomainSearch) (*DomainSearchResult, error) {
	label, wantTLD, _ := strings.Cut(strings.ToLower(strings.TrimSpace(q.Query)), ".")
	if !labelRE().MatchString(label) || strings.Contains(wantTLD, ".") {
		return nil, apierr.New("input:invalid",
			"q must be a label such as acme, or a name such as acme.dev: letters, digits and inner hyphens, at most 63 characters",
			actions.Manual("fix_input", "agent")).
			WithField("query.q", "not a domain label")
	}
	if q.Limit == 0 {
		q.Limit = 25
	}
	sel := selectTLDs(s.prices.Catalog(q.Full), q, wantTLD)
	res := &DomainSearchResult{Label: label, Full: q.Full, Limit: q.Limit, Candidates: []DomainCandidate{},
		TLDs: sel.effective, Allow: sel.allowList, Deny: sel.denyList, Ignored: sel.ignored}
	addCandidates(res, label, sel.tlds, q)
	if err := s.markTaken(ctx, res.Candidates); err != nil {
		return nil, apierr.Internal(err)
	}
	return res, nil
}

// tldSelection is the TLDs a search checks, in order, and the lists it
// reports having applied.
type tldSelection struct {
	tlds                []registrar.TLD
	effective           []string
	allowList, denyList []string
	ignored             []string // allowed, but not in the selected catalog
}

// selectTLDs applies the allow and deny lists to the catalog. The
// effective order: the allow list's order when given (filtered to the
// selected catalog), else the catalog's; a TLD named in q first.
func selectTLDs(cat []registrar.TLD, q DomainSearch, wantTLD string) tldSelection {
	sel := tldSelection{effective: []string{}, allowList: []string{}, denyList: []string{}, ignored: []string{}}
	inCatalog := map[string]registrar.TLD{}
	for _, t := range cat {
		inCatalog[t.Name] = t
	}
	deny := map[string]bool{}
	for _, t := range q.Deny {
		t = strings.TrimPrefix(strings.ToLower(t), ".")
		deny[t] = true
		sel.denyList = append(sel.denyList, t)
	}
	var order []registrar.TLD
	if len(q.Allow) > 0 {
		seen := map[string]bool{}
		for _, t := range q.Allow {
			t = strings.TrimPrefix(strings.ToLower(t), ".")
			if seen[t] {
				continue
			}
			seen[t] = true
			sel.allowList = append(sel.allowList, t)
			if tld, ok := inCatalog[t]; ok {
				order = append(order, tld)
			} else {
				sel.ignored = append(sel.ignored, t)
			}
		}
	} else {
		order = cat
	}
	if wantTLD != "" {
		for i, t := range order {
			if t.Name == wantTLD {
				order = append([]registrar.TLD{t}, append(append([]registrar.TLD{}, order[:i]...), order[i+1:]...)...)
				break
			}
		}
	}
	for _, t := range order {
		if deny[t.Name] {
			continue
		}
		sel.tlds = append(sel.tlds, t)
		sel.effective = append(sel.effective, t.Name)
	}
	return sel
}

// addCandidates checks label under each TLD until the search's limit of
// candidates is found, counting those a price ceiling excludes.
func addCandidates(res *DomainSearchResult, label string, tlds []registrar.TLD, q DomainSearch) {
	for _, t := range tlds {
		if len(res.Candidates) >= q.Limit {
			break
		}
		quote := registrar.Check(label, t)
		annual := t.AnnualizedRenewal()
		if ceilingExcludes(res, quote.FirstYear, q.MaxFirstYear, annual, q.MaxRenewal) {
			continue
		}
		res.Candidates = append(res.Candidates, DomainCandidate{
			Domain: quote.Domain, TLD: t.Name, Available: quote.Available, Premium: quote.Premium,
			FirstYear: quote.FirstYear, Renewal: quote.Renewal, AnnualRenewal: annual, RenewalPeriodYears: t.RenewalPeriodYears,
		})
	}
}

// ceilingExcludes says whether a price ceiling excludes a candidate, and
// counts why: a price it lacks, or one over the ceiling.
func ceilingExcludes(res *DomainSearchResult, firstYear, maxFirst, annual, maxRenew *money.MicroUSD) bool {
	ex := &res.Excluded
	if maxFirst != nil {
		if firstYear == nil {
			ex.LackingPrice++
			return true
		}
		if *firstYear > *maxFirst {
			ex.OverFirstYearCeiling++
			return true
		}
	}
	if maxRenew != nil {
		if annual == nil {
			ex.LackingPrice++
			return true
		}
		if *annual > *maxRenew {
			ex.OverRenewalCeiling++
			return true
		}
	}
	return false
}

// markTaken marks unavailable the candidates sold here or being bought by
// a launch in flight, whoever holds them: the catalog's answer is the
// registry's.
func (s *Domains) markTaken(ctx context.Context, candidates []DomainCandidate) error {
	names := make([]string, 0, len(candidates))
	for _, c := range candidates {
		names = append(names, c.Domain)
	}
	taken, err := s.store.Domains().Taken(ctx, names)
	if err != nil {
		return err
	}
	for i := range candidates {
		if taken[candidates[i].Domain] {
			candidates[i].Available = false
		}
	}
	return nil
}
