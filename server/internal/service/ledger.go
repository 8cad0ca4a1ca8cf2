package service

import (
	"context"

	"github.com/pierhq/pier/ledger"
	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
)

// LedgerEntries reads the organisation's chain.
func (s *Service) LedgerEntries(ctx context.Context, orgID string, after int64, limit int) (*sdk.LedgerPage, []sdk.Action, error) {
	entries, err := s.Store.Ledger().Entries(ctx, orgID, after, limit)
	if err != nil {
		return nil, nil, apierr.Internal(err)
	}
	page := &sdk.LedgerPage{Entries: []sdk.LedgerEntry{}, HeadHash: ledger.Genesis}
	for _, e := range entries {
		page.Entries = append(page.Entries, sdk.LedgerEntry{
			Seq: int(e.Seq), At: e.At, OrgId: e.OrgID, Actor: e.Actor, Action: e.Action, ObjectType: e.ObjectType,
			ObjectId: e.ObjectID, Details: e.Details, PrevHash: e.PrevHash, Hash: e.Hash,
		})
		page.HeadHash = e.Hash
	}
	next := []sdk.Action{actions.Stop("done")}
	if len(entries) == limit && limit > 0 {
		next = []sdk.Action{actions.Tool("list_ledger_entries", "agent", map[string]any{"after": entries[len(entries)-1].Seq, "limit": limit})}
	}
	return page, next, nil
}
