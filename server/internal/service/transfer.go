package service

import (
	"context"
	"errors"
	"strings"

	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/store"
)

// DomainView is a registered domain as the human pages show it; it never
// carries the auth code.
type DomainView struct {
	Domain  string
	Years   int
	Bought  string
	Serving bool
}

// DomainsFor lists the human's organisation's registered domains.
func (s *Service) DomainsFor(ctx context.Context, h Human) ([]DomainView, error) {
	ps, err := s.Store.Domains().OrgPurchases(ctx, h.OrgID)
	if err != nil {
		return nil, err
	}
	out := make([]DomainView, 0, len(ps))
	for _, p := range ps {
		_, zerr := s.Store.Domains().Zone(ctx, p.Domain)
		out = append(out, DomainView{Domain: p.Domain, Years: p.Years, Bought: p.CreatedAt.Format("2006-01-02"), Serving: zerr == nil})
	}
	return out, nil
}

// TransferOutCode reveals a domain's transfer auth code to a signed-in human
// of the organisation that bought it, one domain at a time, and records that
// it was shown. No agent path reaches it.
func (s *Service) TransferOutCode(ctx context.Context, h Human, domain string) (string, error) {
	domain = strings.ToLower(strings.TrimSpace(domain))
	p, err := s.Store.Domains().PurchaseByDomain(ctx, domain)
	if errors.Is(err, store.ErrNotFound) || err == nil && p.OrgID != h.OrgID {
		return "", apierr.Newf("not_found:resource", "your organisation has no domain %s", domain)
	}
	if err != nil {
		return "", err
	}
	err = s.Store.InTx(ctx, func(tx *store.Tx) error {
		_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: h.OrgID, Actor: "human:" + h.UserID, Action: "reveal_transfer_code",
			ObjectType: "domain", ObjectID: domain, Details: map[string]any{"ref": p.Ref}}, s.Now())
		return err
	})
	if err != nil {
		return "", err
	}
	return p.AuthCode, nil
}
