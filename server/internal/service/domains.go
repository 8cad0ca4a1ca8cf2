package service

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"

	"github.com/pierhq/pier/models"
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

func (s *Domains) domainView(ctx context.Context, orgID string, p store.Purchase) (models.DomainInfo, error) {
	paid := money.MicroUSD(p.AmountMicro).USD()
	out := models.DomainInfo{Id: &p.Domain, Domain: p.Domain, RegisteredAt: p.CreatedAt, Years: p.Years, PaidUsd: &paid}
	if v, err := s.store.Services().LiveForDomain(ctx, orgID, p.Domain); err == nil {
		id := v.ID
		out.ServiceId = &id
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

// ListDomains lists the domains the organisation owns.
func (s *Domains) List(ctx context.Context, orgID string, f store.Filter) (*models.DomainList, []models.Action, error) {
	ps, err := s.store.Domains().ListPurchases(ctx, orgID, f)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	out := &models.DomainList{Domains: []models.DomainInfo{}}
	for _, p := range ps {
		v, err := s.domainView(ctx, orgID, p)
		if err != nil {
			return nil, nil, apierr.Internal(err)
		}
		out.Domains = append(out.Domains, v)
	}
	if len(ps) > 0 {
		last := ps[len(ps)-1]
		out.NextCursor = nextCursor(f, len(ps), last.CreatedAt, last.Domain)
	}
	return out, pageActions("list_domains", out.NextCursor, f.Args(), actions.Tool("search_domains", "agent", nil)), nil
}

// GetDomain reads one domain the organisation owns.
func (s *Domains) Get(ctx context.Context, orgID, domain string) (*models.DomainInfo, []models.Action, error) {
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	p, err := s.ownedDomain(ctx, orgID, domain)
	if err != nil {
		return nil, nil, err
	}
	v, err := s.domainView(ctx, orgID, p)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	return &v, []models.Action{actions.Stop("done")}, nil
}

// SearchDomains searches the sandbox registrar's catalog (SPEC §2.5).
func (s *Domains) Search(ctx context.Context, p models.SearchDomainsParams) (*models.DomainSearchResult, []models.Action, error) {
	q := strings.ToLower(strings.TrimSpace(p.Q))
	label, wantTLD, _ := strings.Cut(q, ".")
	if !labelRE().MatchString(label) || strings.Contains(wantTLD, ".") {
		return nil, nil, apierr.New("input:invalid",
			"q must be a label such as acme, or a name such as acme.dev: letters, digits and inner hyphens, at most 63 characters",
			actions.Manual("fix_input", "agent")).
			WithDetails(models.FieldProblem{Field: "query.q", Problem: "not a domain label"})
	}
	full := p.IncludeExotic != nil && *p.IncludeExotic
	limit := 25
	if p.Limit != nil {
		limit = *p.Limit
	}
	sel := selectTLDs(s.prices.Catalog(full), p, wantTLD)
	res := &models.DomainSearchResult{Candidates: []models.DomainCandidate{}}
	addCandidates(res, label, sel.tlds, limit, p)
	if err := s.markTaken(ctx, res.Candidates); err != nil {
		return nil, nil, apierr.Internal(err)
	}
	catalogName := models.Common
	if full {
		catalogName = models.Full
	}
	res.AppliedFilters = models.AppliedDomainFilters{
		Query:                label,
		Catalog:              catalogName,
		IncludeExotic:        full,
		Tlds:                 sel.effective,
		TldAllowlist:         sel.allowList,
		TldDenylist:          sel.denyList,
		MaxFirstYearPriceUsd: p.MaxFirstYearPriceUsd,
		MaxRenewalPriceUsd:   p.MaxRenewalPriceUsd,
		Limit:                limit,
	}
	if len(sel.ignored) > 0 {
		res.AppliedFilters.IgnoredTlds = &sel.ignored
	}
	return res, searchNext(res.Candidates, label, full), nil
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
func selectTLDs(cat []registrar.TLD, p models.SearchDomainsParams, wantTLD string) tldSelection {
	sel := tldSelection{effective: []string{}, allowList: []string{}, denyList: []string{}, ignored: []string{}}
	inCatalog := map[string]registrar.TLD{}
	for _, t := range cat {
		inCatalog[t.Name] = t
	}
	deny := map[string]bool{}
	if p.TldDenylist != nil {
		for _, t := range *p.TldDenylist {
			t = strings.TrimPrefix(strings.ToLower(t), ".")
			deny[t] = true
			sel.denyList = append(sel.denyList, t)
		}
	}
	var order []registrar.TLD
	if p.TldAllowlist != nil && len(*p.TldAllowlist) > 0 {
		seen := map[string]bool{}
		for _, t := range *p.TldAllowlist {
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

// addCandidates checks label under each TLD until limit candidates are
// found, counting those a price ceiling excludes.
func addCandidates(res *models.DomainSearchResult, label string, tlds []registrar.TLD, limit int, p models.SearchDomainsParams) {
	var maxFirst, maxRenew *money.MicroUSD
	if p.MaxFirstYearPriceUsd != nil {
		v := money.FromUSD(*p.MaxFirstYearPriceUsd)
		maxFirst = &v
	}
	if p.MaxRenewalPriceUsd != nil {
		v := money.FromUSD(*p.MaxRenewalPriceUsd)
		maxRenew = &v
	}
	for _, t := range tlds {
		if len(res.Candidates) >= limit {
			break
		}
		quote := registrar.Check(label, t)
		annual := t.AnnualizedRenewal()
		if ceilingExcludes(res, quote.FirstYear, maxFirst, annual, maxRenew) {
			continue
		}
		period := t.RenewalPeriodYears
		res.Candidates = append(res.Candidates, models.DomainCandidate{
			Domain:                    quote.Domain,
			Tld:                       t.Name,
			Available:                 quote.Available,
			Premium:                   quote.Premium,
			FirstYearPriceUsd:         usdPtr(quote.FirstYear),
			RenewalPriceUsd:           usdPtr(quote.Renewal),
			RenewalPeriodYears:        &period,
			AnnualizedRenewalPriceUsd: usdPtr(annual),
		})
	}
}

// ceilingExcludes says whether a price ceiling excludes a candidate, and
// counts why: a price it lacks, or one over the ceiling.
func ceilingExcludes(res *models.DomainSearchResult, firstYear, maxFirst, annual, maxRenew *money.MicroUSD) bool {
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
func (s *Domains) markTaken(ctx context.Context, candidates []models.DomainCandidate) error {
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

// searchNext is what a search suggests: quoting the first available
// priced candidate, searching the full catalog, or stopping.
func searchNext(candidates []models.DomainCandidate, label string, full bool) []models.Action {
	next := []models.Action{}
	for _, c := range candidates {
		if c.Available && c.FirstYearPriceUsd != nil {
			next = append(next, actions.Tool("create_quote", "agent", map[string]any{
				"items": []any{map[string]any{"kind": "domain", "domain": c.Domain, "years": 1}},
			}))
			break
		}
	}
	if !full {
		next = append(next, actions.Tool("search_domains", "agent", map[string]any{"q": label, "includeExotic": true}))
	}
	return append(next, actions.Stop("done"))
}
