package store_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

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
	{"the hold, the quote and the entry together, or none of them", func(t *testing.T, w world) {
		quote := func(id string, amount money.MicroUSD) store.Quote {
			return store.Quote{ID: id, OrgID: w.org, ProjectID: w.proj, Decision: "ALLOW", State: "held", AmountMicro: amount,
				Items: "[]", Reasons: "[]", CreatedAt: t0, ExpiresAt: t0.Add(15 * time.Minute)}
		}
		entry := func(id string) store.LedgerRecord {
			return store.LedgerRecord{OrgID: w.org, Action: "create_quote", ObjectType: "quote", ObjectID: id, Details: map[string]any{"held": true}}
		}
		// With the head the locks read, and without it.
		for i, locked := range []bool{true, false, true} {
			id := fmt.Sprintf("quo_%d", i)
			must(t, w.st.InTx(ctx, func(tx *store.Tx) error {
				if locked {
					if _, err := tx.Quotes().LockForQuote(ctx, w.org, w.proj, ""); err != nil {
						return err
					}
				}
				if err := tx.Quotes().InsertHeldLogged(ctx, quote(id, 30), entry(id), t0, false); err != nil {
					return err
				}
				// An append after it follows it.
				_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: w.org, Action: "after"}, t0)
				return err
			}))
		}
		err := w.st.InTx(ctx, func(tx *store.Tx) error {
			if _, err := tx.Quotes().LockForQuote(ctx, w.org, w.proj, ""); err != nil {
				return err
			}
			return tx.Quotes().InsertHeldLogged(ctx, quote("quo_over", 11), entry("quo_over"), t0, false)
		})
		wantErr(t, "a hold past the limit", err, store.ErrBudget)
		p, _ := w.st.Projects().Get(ctx, w.org, w.proj)
		all, err := w.st.Ledger().Entries(ctx, w.org, 0, 100)
		if p.HeldMicro != 90 || err != nil || len(all) != 6 {
			t.Fatalf("held %d, %d entries (%v)", p.HeldMicro, len(all), err)
		}
		checkChain(t, all)
		if _, err := w.st.Quotes().Get(ctx, w.org, "quo_over"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the refused quote: %v", err)
		}
		if all[0].ObjectID != "quo_0" || all[1].Action != "after" || all[2].ObjectID != "quo_1" || all[4].ObjectID != "quo_2" {
			t.Fatalf("entries %+v", all)
		}
	}},
	{"grouped: BEGIN with the locks, COMMIT with the last write", func(t *testing.T, w world) {
		// InGroupTx's transaction on PostgreSQL sends BEGIN with the locks
		// and COMMIT with the hold, the quote and the entry; a refusal,
		// a failure before the last write and a missing project leave
		// nothing, and the connections go on serving. The project's limit
		// is 100: of quotes of 30 racing, three are held.
		quote := func(id string) store.Quote {
			return store.Quote{ID: id, OrgID: w.org, ProjectID: w.proj, Decision: "ALLOW", State: "held", AmountMicro: 30,
				Items: "[]", Reasons: "[]", CreatedAt: t0, ExpiresAt: t0.Add(15 * time.Minute)}
		}
		failed := errors.New("the quote fails before its last write")
		create := func(id, project string, fail bool) error {
			return w.st.InGroupTx(ctx, func(tx *store.Tx) error {
				if _, err := tx.Quotes().LockForQuote(ctx, w.org, project, ""); err != nil {
					return err
				}
				if fail {
					if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: w.org, Action: "lost"}, t0); err != nil {
						return err
					}
					return failed
				}
				return tx.Quotes().InsertHeldLogged(ctx, quote(id), store.LedgerRecord{OrgID: w.org, Action: "create_quote",
					ObjectType: "quote", ObjectID: id, Details: map[string]any{"held": true}}, t0, true)
			})
		}
		wantErr(t, "no project", create("quo_none", "prj_missing", false), store.ErrNotFound)
		wantErr(t, "a failure before the last write", create("quo_failed", w.proj, true), failed)
		held := race(t, 8, func(i int) error { return create(fmt.Sprintf("quo_%d", i), w.proj, i%4 == 3) }, store.ErrBudget, failed)
		wantErr(t, "past the limit", create("quo_over", w.proj, false), store.ErrBudget)
		p, _ := w.st.Projects().Get(ctx, w.org, w.proj)
		all, err := w.st.Ledger().Entries(ctx, w.org, 0, 100)
		if held != 3 || p.HeldMicro != 90 || err != nil || len(all) != 3 {
			t.Fatalf("%d held, held %d, %d entries (%v)", held, p.HeldMicro, len(all), err)
		}
		checkChain(t, all)
		for _, e := range all {
			if e.Action != "create_quote" {
				t.Fatalf("entry %+v", e)
			}
			if _, err := w.st.Quotes().Get(ctx, w.org, e.ObjectID); err != nil {
				t.Fatalf("the quote of %+v: %v", e, err)
			}
		}
	}},
}
