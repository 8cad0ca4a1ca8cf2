package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

// QuotePreview is what a quote would be now, decided and priced, without
// holding anything: what a workflow shows before it runs and compares
// again before it applies.
type QuotePreview struct {
	AmountMicro money.MicroUSD
	// Decision is what Create would decide; Reasons say why not ALLOW.
	Decision QuoteDecision
	Reasons  []apierr.Code
	// Domains are the names the quote would buy.
	Domains []string
}

// quoteGates opens the gate a quote that needs a human waits on.
type quoteGates interface {
	openGate(ctx context.Context, tx *store.Tx, p *auth.Principal, projectID, kind string, payload map[string]any, now time.Time) (store.Task, error)
}

// Preview prices items for the project as Create would, and decides them
// against the policy and the budget, writing nothing.
func (s *Quotes) Preview(ctx context.Context, p *auth.Principal, projectID string, items []QuoteItem) (QuotePreview, error) {
	priced, err := priceItems(s.prices, items)
	if err != nil {
		return QuotePreview{}, err
	}
	if err := s.offered(priced); err != nil {
		return QuotePreview{}, err
	}
	var out QuotePreview
	for _, it := range priced {
		if it.Kind == ItemDomain {
			if err := s.launches.domainFree(ctx, p, projectID, it.Domain); err != nil {
				return QuotePreview{}, err
			}
			out.Domains = append(out.Domains, it.Domain)
		}
	}
	proj, err := s.store.Projects().Get(ctx, p.OrgID, projectID)
	if errors.Is(err, store.ErrNotFound) {
		return QuotePreview{}, projectNotFound(projectID)
	}
	if err != nil {
		return QuotePreview{}, err
	}
	pol, err := decodePolicy(proj.Policy)
	if err != nil {
		return QuotePreview{}, err
	}
	out.AmountMicro = total(priced)
	verdict := judge(pol, priced)
	out.Reasons = verdict.refused
	switch {
	case len(out.Reasons) > 0:
		out.Decision = QuoteDeny
	case verdict.approval:
		out.Decision, out.Reasons = QuoteRequiresApproval, []apierr.Code{"policy:approval_required"}
	default:
		out.Decision = QuoteAllow
	}
	return out, nil
}

// ProjectState is a project as a plan reads it: its version (the budget
// limit and the policy, which a human changes) and what remains of its
// budget now.
type ProjectState struct {
	Version        string
	RemainingMicro money.MicroUSD
}

// ProjectState reads a project of the caller's organisation.
func (s *projectBooks) State(ctx context.Context, p *auth.Principal, projectID string) (ProjectState, error) {
	proj, err := s.store.Projects().Get(ctx, p.OrgID, projectID)
	if errors.Is(err, store.ErrNotFound) {
		return ProjectState{}, projectNotFound(projectID)
	}
	if err != nil {
		return ProjectState{}, err
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d\x00%s", proj.LimitMicro, proj.Policy)))
	return ProjectState{Version: hex.EncodeToString(sum[:8]), RemainingMicro: remaining(proj)}, nil
}

// BundleVersion is a bundle's content digest, or not_found:resource.
func (s *Bundles) Version(ctx context.Context, p *auth.Principal, id string) (string, error) {
	b, err := s.store.Bundles().Root(ctx, p.OrgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", apierr.Newf("not_found:resource", "no bundle %s in your organisation", id)
	}
	if err != nil {
		return "", err
	}
	return b.SHA256, nil
}

// ServiceVersion is a service's state and when it last changed, or
// not_found:resource.
func (s *Launches) ServiceVersion(ctx context.Context, p *auth.Principal, id string) (string, error) {
	v, err := s.store.Services().Get(ctx, p.OrgID, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", apierr.Newf("not_found:resource", "no service %s in your organisation", id)
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s@%d", v.State, v.UpdatedAt.UnixMicro()), nil
}

// DomainState says who holds a name now, from the caller's side: "owned"
// (the organisation bought it), "free", or "taken".
func (s *Domains) State(ctx context.Context, p *auth.Principal, domain string) (DomainState, error) {
	org, sold, err := s.store.Domains().Holder(ctx, strings.ToLower(domain))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return DomainFree, nil
	case err != nil:
		return "", err
	case sold && org == p.OrgID:
		return DomainOwned, nil
	}
	return DomainTaken, nil
}
