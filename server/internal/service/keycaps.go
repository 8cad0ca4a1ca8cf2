package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

// Key spending caps. A person caps what one agent key may commit per
// period, on the keys page or with the operator's command; the cap binds
// the key's quotes, the only way a key commits money. No agent credential
// reaches either writer, so no agent can raise its own cap.

// CapPeriods are the periods a cap runs over.
var CapPeriods = []string{"month", "lifetime"}

// capPeriodStart is when the period holding now began: the first of the
// month in UTC, or the beginning of time for a lifetime cap.
func capPeriodStart(period string, now time.Time) time.Time {
	if period == "lifetime" {
		return time.Unix(0, 0).UTC()
	}
	now = now.UTC()
	return time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// SetKeyCap sets (or, with capMicro nil, removes) a key's cap. Only a
// signed-in person of the key's organisation calls it; it is recorded in
// the ledger.
func (s *Accounts) SetKeyCap(ctx context.Context, h Human, keyID string, capMicro *money.MicroUSD, period string) error {
	if period == "" {
		period = "month"
	}
	if period != "month" && period != "lifetime" {
		return apierr.Newf("input:invalid", "the cap's period is month or lifetime, not %q", period)
	}
	if capMicro != nil && *capMicro < 0 {
		return apierr.New("input:invalid", "a cap cannot be negative")
	}
	return s.store.InTx(ctx, func(tx *store.Tx) error {
		if _, err := tx.Keys().Lock(ctx, h.OrgID, keyID); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return keyNotFound(keyID)
			}
			return err
		}
		if err := tx.Keys().SetCap(ctx, h.OrgID, keyID, capMicro, period); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return keyNotFound(keyID)
			}
			return err
		}
		details := map[string]any{"period": period, "capMicroUsd": nil}
		if capMicro != nil {
			details["capMicroUsd"] = *capMicro
		}
		_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: h.OrgID, Actor: signedInActor(h), Action: "set_key_cap",
			ObjectType: "key", ObjectID: keyID, Details: details}, s.Now())
		return err
	})
}

// KeySpend is a key's cap and what it has committed in the cap's period.
type KeySpend struct {
	Key         store.APIKey
	PeriodStart time.Time
	SpentMicro  money.MicroUSD
}

// keySpend is what the caller's key, read and locked with its running
// count (store.Quotes.LockForQuote) before any other row but the
// project, has committed in the cap's current period, so that two quotes
// of one key in different projects cannot both pass the cap. ok is false
// for callers without a key (OAuth grants, sandbox agents) and keys
// without a cap.
//
// What it committed is the key's running count (store.CapCount) when that
// counts from the period's start and leaves room for amount; the count
// errs only high, so a quote it lets pass passes. Otherwise (a new
// period, a cap just set, or a count that would refuse: a release or a
// lapsed hold may have made room) the key's quotes are counted again,
// exactly, and the count kept from then on.
func keySpend(ctx context.Context, keys store.Keys, p *auth.Principal, locked store.QuoteLocks, amount money.MicroUSD, now time.Time) (KeySpend, bool, error) {
	if p == nil || p.KeyID == "" || !locked.KeyFound {
		return KeySpend{}, false, nil
	}
	k, count := locked.Key, locked.Count
	if k.CapMicro == nil {
		return KeySpend{Key: k}, false, nil
	}
	since := capPeriodStart(k.CapPeriod, now)
	ks := KeySpend{Key: k, PeriodStart: since, SpentMicro: count.Spent}
	if count.Counted && count.Since.Equal(since) && count.Spent+amount <= *k.CapMicro {
		return ks, true, nil
	}
	var err error
	ks.SpentMicro, err = keys.Recount(ctx, k.ID, since, now)
	return ks, err == nil, err
}

// keySpendNow reads the caller's key and, when it is capped, what it has
// committed in the cap's current period, exactly and without writing: for
// reads (whoami).
func keySpendNow(ctx context.Context, keys store.Keys, p *auth.Principal, now time.Time) (KeySpend, error) {
	if p == nil || p.KeyID == "" {
		return KeySpend{}, nil
	}
	k, err := keys.Lock(ctx, p.OrgID, p.KeyID)
	if errors.Is(err, store.ErrNotFound) {
		return KeySpend{}, nil
	}
	if err != nil || k.CapMicro == nil {
		return KeySpend{Key: k}, err
	}
	since := capPeriodStart(k.CapPeriod, now)
	spent, err := keys.Spent(ctx, k.ID, since, now)
	return KeySpend{Key: k, PeriodStart: since, SpentMicro: spent}, err
}

// checkKeyCap refuses an amount that would take the caller's key past its
// cap, with budget:key_cap and the keys page, where a person may raise it.
// capped says the key has a cap: a quote it holds then adds to the key's
// running count (store.Keys.AddCapSpent).
func (s *Quotes) checkKeyCap(ctx context.Context, tx *store.Tx, p *auth.Principal, locked store.QuoteLocks, amount money.MicroUSD, now time.Time) (capped bool, err error) {
	if amount <= 0 {
		return false, nil
	}
	ks, capped, err := keySpend(ctx, tx.Keys(), p, locked, amount, now)
	if err != nil || !capped || ks.SpentMicro+amount <= *ks.Key.CapMicro {
		return capped, err
	}
	k := ks.Key
	left := max(*k.CapMicro-ks.SpentMicro, 0)
	msg := fmt.Sprintf("key %s (%s) may commit %s per %s and has %s left; this needs %s. A person can raise the cap on the keys page",
		k.ID, k.Name, k.CapMicro.String(), k.CapPeriod, left.String(), amount.String())
	return capped, apierr.New("budget:key_cap", msg).WithActions(
		actions.URL(s.baseURL()+"/keys", "manage_keys", "human"),
		actions.Stop("denied"))
}

// KeySpends gives, for each capped key of the organisation, what it has
// committed in its current period, for the keys page.
func (s *Accounts) KeySpends(ctx context.Context, orgID string) (map[string]KeySpend, error) {
	return keySpends(ctx, s.store, orgID, s.Now())
}

func keySpends(ctx context.Context, st keysStore, orgID string, now time.Time) (map[string]KeySpend, error) {
	keys, err := st.Keys().List(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := map[string]KeySpend{}
	for _, k := range keys {
		if k.CapMicro == nil || k.RevokedAt != nil {
			continue
		}
		since := capPeriodStart(k.CapPeriod, now)
		spent, err := st.Keys().Spent(ctx, k.ID, since, now)
		if err != nil {
			return nil, err
		}
		out[k.ID] = KeySpend{Key: k, PeriodStart: since, SpentMicro: spent}
	}
	return out, nil
}
