package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/store"
)

// domainTaken is the refusal for a name someone holds: sold, or being
// bought by a launch in flight, whichever organisation holds it.
func domainTaken(domain string) *apierr.Error {
	label, _, _ := strings.Cut(domain, ".")
	return apierr.Newf("plan:domain_unavailable", "%s is already registered or being registered; search for another name", domain).
		WithActions(actions.Tool("search_domains", "agent", map[string]any{"q": label}), actions.Stop("terminal_error"))
}

// domainFree refuses a domain the store says is held: bought by anyone
// (the caller's own organisation included: it needs no second purchase), or
// claimed by a launch in flight.
func (s *Service) domainFree(ctx context.Context, p *auth.Principal, projectID, domain string) error {
	org, sold, err := s.Store.Domains().Holder(ctx, domain)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return apierr.Internal(err)
	}
	if sold && org == p.OrgID {
		return apierr.Newf("plan:domain_unavailable", "your organisation already owns %s; launch with it, no quote or purchase needed", domain).
			WithActions(actions.Tool("launch_service", "agent", map[string]any{"id": projectID, "domain": domain, "target": "edge"}))
	}
	return domainTaken(domain)
}

// releaseRefusedQuote gives back the hold of a quote whose launch was
// refused because the domain is taken: the launch bought nothing, so the
// hold serves nothing. A quote that is not held is left alone.
func (s *Service) releaseRefusedQuote(ctx context.Context, p *auth.Principal, quoteID *string) {
	if quoteID == nil || *quoteID == "" {
		return
	}
	if _, _, err := s.ReleaseQuote(ctx, p, *quoteID); err != nil {
		s.Log.Debug("release refused quote", "quote", *quoteID, "err", err)
	}
}

// awaitedQuote reads a quote that waits for a human without consuming it:
// what it prices, for matching against the launch.
func (s *Service) awaitedQuote(ctx context.Context, tx *store.Tx, p *auth.Principal, projectID, quoteID string) (Consumed, error) {
	q, err := tx.Quotes().Lock(ctx, p.OrgID, quoteID)
	if err != nil {
		return Consumed{}, err
	}
	proj, err := tx.Projects().Lock(ctx, p.OrgID, projectID)
	if err != nil {
		return Consumed{}, err
	}
	var items []pricedItem
	if err := json.Unmarshal([]byte(q.Items), &items); err != nil {
		return Consumed{}, err
	}
	return Consumed{QuoteID: q.ID, ProjectID: projectID, AmountMicro: q.AmountMicro, RemainingMicro: remaining(proj), Items: items}, nil
}

// matchQuote refuses a launch its quote does not price: another target or
// service name, a domain the launch does not buy, or no price for the
// domain it does buy. A launch never pays for what it does not get.
func matchQuote(projectID string, c Consumed, req sdk.LaunchRequest, domain string, owned bool) error {
	var why []string
	buys := domain != "" && !owned
	priced := false
	for _, it := range c.Items {
		switch it.Kind {
		case "domain":
			if buys && it.Domain == domain {
				priced = true
				continue
			}
			why = append(why, "it prices the domain "+it.Domain+", which this launch does not buy")
		case "service":
			if it.Target != string(req.Target) {
				why = append(why, fmt.Sprintf("it prices target %s, and the launch is %s", it.Target, req.Target))
			}
			if it.Name != "" && it.Name != req.Name {
				why = append(why, fmt.Sprintf("it prices the service %s, and the launch is %s", it.Name, req.Name))
			}
		}
	}
	if buys && !priced {
		why = append(why, "it does not price the domain "+domain)
	}
	if len(why) == 0 {
		return nil
	}
	items := []any{}
	if buys {
		years := 1
		if req.Years != nil {
			years = *req.Years
		}
		items = append(items, map[string]any{"kind": "domain", "domain": domain, "years": years})
	}
	for _, it := range c.Items {
		if it.Kind == "service" {
			items = append(items, map[string]any{"kind": "service", "workload": it.Workload, "target": req.Target, "name": req.Name, "months": max(it.Months, 1)})
		}
	}
	acts := []sdk.Action{actions.Tool("release_quote", "agent", map[string]any{"id": c.QuoteID})}
	if len(items) > 0 {
		acts = append([]sdk.Action{actions.Tool("create_quote", "agent", map[string]any{"projectId": projectID, "items": items})}, acts...)
	} else {
		// Nothing of this launch costs anything: launch without a quote.
		args := map[string]any{"id": projectID, "name": req.Name, "target": req.Target}
		if req.BundleId != nil {
			args["bundleId"] = *req.BundleId
		}
		if domain != "" {
			args["domain"] = domain
		}
		acts = append([]sdk.Action{actions.Tool("launch_service", "agent", args)}, acts...)
	}
	return apierr.Newf("conflict:quote_mismatch", "quote %s does not match this launch: %s; quote again for what this launch does", c.QuoteID, strings.Join(why, "; ")).
		WithActions(acts...)
}
