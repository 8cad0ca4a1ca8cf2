package service

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/store"
)

// Keys as humans manage them on the keys page. Agents cannot create,
// revoke or widen keys: these methods take a Human.

func keyNotFound(id string) *apierr.Error {
	return apierr.Newf("not_found:resource", "no live key %s in your organisation", id)
}

// ListKeys lists the organisation's keys, revoked ones included.
func (s *Service) ListKeys(ctx context.Context, orgID string) ([]store.APIKey, error) {
	return s.Store.Keys().List(ctx, orgID)
}

func checkScopes(scopes []string) error {
	if len(scopes) == 0 {
		return apierr.New("input:invalid", "choose at least one scope")
	}
	for _, sc := range scopes {
		if !slices.Contains(auth.Scopes, sc) {
			return apierr.Newf("input:invalid", "unknown scope %q; scopes are %s", sc, strings.Join(auth.Scopes, ", "))
		}
	}
	return nil
}

// CreateKey mints a key for the human's organisation. The secret is
// returned here once and stored only as a hash.
func (s *Service) CreateKey(ctx context.Context, h Human, name string, scopes []string) (string, store.APIKey, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		name = "agent"
	}
	if len(name) > 100 {
		return "", store.APIKey{}, apierr.New("input:invalid", "the key name is longer than 100 characters")
	}
	if err := checkScopes(scopes); err != nil {
		return "", store.APIKey{}, err
	}
	var secret string
	var k store.APIKey
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		secret, k, err = s.createKey(ctx, tx, h.OrgID, name, scopes, signedInActor(h))
		return err
	})
	return secret, k, err
}

func (s *Service) createKey(ctx context.Context, tx *store.Tx, orgID, name string, scopes []string, actor string) (string, store.APIKey, error) {
	now := s.Now()
	secret, hash := auth.NewKey()
	k := store.APIKey{ID: auth.ID("key"), OrgID: orgID, Name: name, Scopes: scopes, CreatedAt: now.UTC()}
	if err := tx.Keys().Create(ctx, k, hash); err != nil {
		return "", k, err
	}
	_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: orgID, Actor: actor, Action: "create_key", ObjectType: "key", ObjectID: k.ID,
		Details: map[string]any{"name": name, "scopes": scopes}}, now)
	return secret, k, err
}

// RevokeKey revokes a key of the human's organisation; it stops working on
// its next request.
func (s *Service) RevokeKey(ctx context.Context, h Human, keyID string) error {
	return s.Store.InTx(ctx, func(tx *store.Tx) error {
		now := s.Now()
		if err := tx.Keys().Revoke(ctx, h.OrgID, keyID, now); errors.Is(err, store.ErrNotFound) {
			return keyNotFound(keyID)
		} else if err != nil {
			return err
		}
		_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: h.OrgID, Actor: signedInActor(h), Action: "revoke_key", ObjectType: "key", ObjectID: keyID}, now)
		return err
	})
}

// GrantScope adds a scope to a live key of the human's organisation, such
// as buy_domain, which lets the key skip the per-purchase gate.
func (s *Service) GrantScope(ctx context.Context, h Human, keyID, scope string) error {
	if err := checkScopes([]string{scope}); err != nil {
		return err
	}
	return s.Store.InTx(ctx, func(tx *store.Tx) error {
		now := s.Now()
		k, err := tx.Keys().Lock(ctx, h.OrgID, keyID)
		if errors.Is(err, store.ErrNotFound) || err == nil && k.RevokedAt != nil {
			return keyNotFound(keyID)
		}
		if err != nil {
			return err
		}
		if k.HasScope(scope) {
			return nil
		}
		scopes := append(slices.Clone(k.Scopes), scope)
		if err := tx.Keys().SetScopes(ctx, h.OrgID, keyID, scopes); err != nil {
			return err
		}
		_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: h.OrgID, Actor: signedInActor(h), Action: "grant_scope", ObjectType: "key", ObjectID: keyID,
			Details: map[string]any{"scope": scope, "scopes": scopes}}, now)
		return err
	})
}
