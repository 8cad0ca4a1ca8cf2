package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

func TestQuoteLocks(t *testing.T) { runCases(t, quoteLocksCases) }

// quoteLocksCases are TestQuoteLocks's cases, each run on every engine.
var quoteLocksCases = []storeCase{
	{"the project and the key, as Lock and LockCount read them", func(t *testing.T, w world) {
		keys := w.st.Keys()
		must(t, keys.Create(ctx, store.APIKey{ID: "key_q", OrgID: w.org, Name: "agent", Scopes: []string{"quote", "read"}, CreatedAt: t0}, "hash-q"))
		limit := money.MicroUSD(500)
		must(t, keys.SetCap(ctx, w.org, "key_q", &limit, "lifetime"))
		lock := func(project, key string) (store.QuoteLocks, error) {
			var got store.QuoteLocks
			err := w.st.InTx(ctx, func(tx *store.Tx) error {
				var err error
				got, err = tx.Quotes().LockForQuote(ctx, w.org, project, key)
				return err
			})
			return got, err
		}
		got, err := lock(w.proj, "key_q")
		must(t, err)
		wantProject, _ := w.st.Projects().Get(ctx, w.org, w.proj)
		wantKey, wantCount, _ := keys.LockCount(ctx, w.org, "key_q")
		if fmt.Sprint(got.Project) != fmt.Sprint(wantProject) || fmt.Sprint(got.Key) != fmt.Sprint(wantKey) ||
			got.Count != wantCount || !got.KeyFound || got.Key.CapMicro == nil || *got.Key.CapMicro != limit {
			t.Fatalf("locks %+v, want %+v, %+v, %+v", got, wantProject, wantKey, wantCount)
		}
		for _, key := range []string{"", "key_missing"} {
			got, err := lock(w.proj, key)
			if err != nil || got.KeyFound || got.Key.ID != "" || got.Project.ID != w.proj {
				t.Fatalf("key %q: %+v, %v", key, got, err)
			}
		}
		o := w.other(t, "org_b")
		if _, err := lock(o.proj, "key_q"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("another organisation's project: %v", err)
		}
		if _, err := lock("prj_missing", ""); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("no project: %v", err)
		}
	}},
	{"appends after the locks keep one chain", func(t *testing.T, w world) {
		// Quotes (the locks, then two entries, committed in groups on
		// SQLite, some failing after their entries) race plain appends;
		// the head the locks read must be the one the entries follow.
		const n = 16
		failed := errors.New("the quote fails after its entries")
		race(t, n, func(i int) error {
			if i%2 == 0 {
				return w.st.InTx(ctx, func(tx *store.Tx) error {
					_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: w.org, Action: "plain"}, t0)
					return err
				})
			}
			return w.st.InGroupTx(ctx, func(tx *store.Tx) error {
				if _, err := tx.Quotes().LockForQuote(ctx, w.org, w.proj, ""); err != nil {
					return err
				}
				for j := range 2 {
					if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: w.org, Action: "quote", Details: map[string]any{"j": j}}, t0); err != nil {
						return err
					}
				}
				if i%4 == 1 {
					return failed
				}
				return nil
			})
		}, failed)
		all, err := w.st.Ledger().Entries(ctx, w.org, 0, 100)
		if want := n/2 + n/4*2; err != nil || len(all) != want {
			t.Fatalf("%d entries, want %d, %v", len(all), want, err)
		}
		checkChain(t, all)
	}},
}
