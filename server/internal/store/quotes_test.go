package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

func (w world) quote(t *testing.T, id, decision, state string, amount money.MicroUSD, created, expires time.Time) store.Quote {
	t.Helper()
	q := store.Quote{ID: id, OrgID: w.org, ProjectID: w.proj, KeyID: "key_1", Decision: decision, State: state, AmountMicro: amount,
		Items: "[]", Reasons: "[]", CreatedAt: created, ExpiresAt: expires}
	must(t, w.st.Quotes().Insert(ctx, q))
	return q
}

func quoteIDs(qs []store.Quote) []string {
	var ids []string
	for _, q := range qs {
		ids = append(ids, q.ID)
	}
	return ids
}

func TestQuotes(t *testing.T) { runCases(t, quotesCases) }

// quotesCases are TestQuotes's cases, each run on every engine.
var quotesCases = []storeCase{
	{"insert, get, lock", func(t *testing.T, w world) {
		quotes := w.st.Quotes()
		q := w.quote(t, "quo_1", "ALLOW", "held", 10, t0, t0.Add(time.Hour))
		got, err := quotes.Get(ctx, w.org, "quo_1")
		if err != nil || got.ID != q.ID || got.AmountMicro != 10 || !got.ExpiresAt.Equal(q.ExpiresAt) || got.SettledAt != nil || got.Decision != "ALLOW" {
			t.Fatalf("get %+v, %v", got, err)
		}
		_, err = quotes.Get(ctx, "org_other", "quo_1")
		wantErr(t, "another organisation's quote", err, store.ErrNotFound)
		must(t, w.st.InTx(ctx, func(tx *store.Tx) error {
			locked, err := tx.Quotes().Lock(ctx, w.org, "quo_1")
			if err != nil || locked != got {
				t.Errorf("lock %+v, %v", locked, err)
			}
			return err
		}))
		if err := quotes.Insert(ctx, q); err == nil {
			t.Fatal("a quote id was taken twice")
		}
		bad := q
		bad.ID, bad.State = "quo_bad", "lost"
		if err := quotes.Insert(ctx, bad); err == nil {
			t.Fatal("a quote in no known state was stored")
		}
	}},
	{"settle once", func(t *testing.T, w world) {
		quotes := w.st.Quotes()
		w.quote(t, "quo_1", "ALLOW", "held", 10, t0, t0.Add(time.Hour))
		wins := race(t, 6, func(i int) error {
			return quotes.Settle(ctx, "quo_1", []string{"consumed", "released", "expired"}[i%3], t0.Add(time.Minute))
		}, store.ErrConflict)
		if wins != 1 {
			t.Fatalf("settled %d times", wins)
		}
		got, _ := quotes.Get(ctx, w.org, "quo_1")
		if got.State == "held" || got.SettledAt == nil || !got.SettledAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("settled quote %+v", got)
		}
		wantErr(t, "unknown quote", quotes.Settle(ctx, "quo_none", "consumed", t0), store.ErrConflict)
	}},
	{"approval turns into a hold once", func(t *testing.T, w world) {
		quotes := w.st.Quotes()
		w.quote(t, "quo_1", "REQUIRES_APPROVAL", "not_held", 10, t0, t0.Add(time.Hour))
		w.quote(t, "quo_2", "ALLOW", "held", 10, t0, t0.Add(time.Hour))
		if ok, err := quotes.Approved(ctx, "quo_1"); err != nil || ok {
			t.Fatalf("approved before anyone did: %v %v", ok, err)
		}
		_, err := quotes.Approved(ctx, "quo_none")
		wantErr(t, "unknown quote", err, store.ErrNotFound)
		must(t, quotes.MarkApproved(ctx, "quo_1", "hum_1"))
		if ok, err := quotes.Approved(ctx, "quo_1"); err != nil || !ok {
			t.Fatalf("not approved: %v %v", ok, err)
		}
		must(t, quotes.Hold(ctx, "quo_1", t0.Add(2*time.Hour)))
		wantErr(t, "held twice", quotes.Hold(ctx, "quo_1", t0), store.ErrConflict)
		wantErr(t, "an ALLOW quote held", quotes.Hold(ctx, "quo_2", t0), store.ErrConflict)
		got, _ := quotes.Get(ctx, w.org, "quo_1")
		if got.State != "held" || got.Decision != "ALLOW" || !got.ExpiresAt.Equal(t0.Add(2*time.Hour)) {
			t.Fatalf("held quote %+v", got)
		}
	}},
	{"holds by expiry, totals", func(t *testing.T, w world) {
		quotes := w.st.Quotes()
		w.quote(t, "quo_old", "ALLOW", "held", 1, t0, t0.Add(time.Minute))
		w.quote(t, "quo_new", "ALLOW", "held", 2, t0, t0.Add(time.Hour))
		w.quote(t, "quo_done", "ALLOW", "consumed", 4, t0, t0.Add(time.Minute))
		w.quote(t, "quo_deny", "DENY", "not_held", 8, t0, t0.Add(time.Minute))
		now := t0.Add(time.Minute)
		if got, err := quotes.ExpiredHolds(ctx, w.proj, now); err != nil || !slices.Equal(quoteIDs(got), []string{"quo_old"}) {
			t.Fatalf("expired %v, %v", quoteIDs(got), err)
		}
		if got, err := quotes.ActiveHolds(ctx, w.proj, now); err != nil || !slices.Equal(quoteIDs(got), []string{"quo_new"}) {
			t.Fatalf("active %v, %v", quoteIDs(got), err)
		}
		totals, err := quotes.Totals(ctx, w.proj)
		if err != nil || len(totals) != 3 || totals["held"] != 3 || totals["consumed"] != 4 || totals["not_held"] != 8 {
			t.Fatalf("totals %v, %v", totals, err)
		}
	}},
	{"list filters and pages", func(t *testing.T, w world) {
		quotes := w.st.Quotes()
		must(t, w.st.Projects().Create(ctx, store.Project{ID: "prj_2", OrgID: w.org, Name: "two", LimitMicro: 1, Policy: "{}", CreatedAt: t0}))
		for i, id := range []string{"quo_1", "quo_2", "quo_3", "quo_4"} {
			q := store.Quote{ID: id, OrgID: w.org, ProjectID: w.proj, KeyID: "k", Decision: "ALLOW", State: "held", Items: "[]", Reasons: "[]",
				CreatedAt: t0.Add(time.Duration(i/2) * time.Second), ExpiresAt: t0.Add(time.Hour)}
			if i == 3 {
				q.ProjectID, q.State = "prj_2", "consumed"
			}
			must(t, quotes.Insert(ctx, q))
		}
		other := w.other(t, "org_b")
		other.quote(t, "quo_b", "ALLOW", "held", 1, t0, t0)
		for _, c := range []struct {
			f    store.Filter
			want []string
		}{
			{store.Filter{}, []string{"quo_3", "quo_4", "quo_1", "quo_2"}},
			{store.Filter{ProjectID: w.proj}, []string{"quo_3", "quo_1", "quo_2"}},
			{store.Filter{State: "consumed"}, []string{"quo_4"}},
			{store.Filter{Limit: 2}, []string{"quo_3", "quo_4"}},
			{store.Filter{Limit: 2, After: store.Cursor{At: t0.Add(time.Second).UnixMicro(), ID: "quo_4"}}, []string{"quo_1", "quo_2"}},
			{store.Filter{After: store.Cursor{At: t0.UnixMicro(), ID: "quo_1"}}, []string{"quo_2"}},
		} {
			got, err := quotes.List(ctx, w.org, c.f)
			if err != nil || !slices.Equal(quoteIDs(got), c.want) {
				t.Errorf("list %+v: %v, %v; want %v", c.f, quoteIDs(got), err, c.want)
			}
		}
	}},
	{"the approval gate a quote opened", func(t *testing.T, w world) {
		w.quote(t, "quo_1", "REQUIRES_APPROVAL", "not_held", 10, t0, t0.Add(time.Hour))
		gates := w.st.Gates()
		must(t, gates.Insert(ctx, store.Gate{ID: "gate_old", OrgID: w.org, TaskID: "tsk_1", Kind: "quote_approval", Payload: `{"quoteId":"quo_1"}`, CreatedAt: t0}))
		must(t, gates.Insert(ctx, store.Gate{ID: "gate_new", OrgID: w.org, TaskID: "tsk_1", Kind: "quote_approval", Payload: `{"quoteId":"quo_1","n":2}`, CreatedAt: t0.Add(time.Second)}))
		must(t, gates.Insert(ctx, store.Gate{ID: "gate_dom", OrgID: w.org, TaskID: "tsk_1", Kind: "domain_registration", Payload: `{"quoteId":"quo_1"}`, CreatedAt: t0.Add(time.Hour)}))
		// quoX1 would match quo_1 if "_" were a wildcard.
		must(t, gates.Insert(ctx, store.Gate{ID: "gate_like", OrgID: w.org, TaskID: "tsk_1", Kind: "quote_approval", Payload: `{"quoteId":"quoX1"}`, CreatedAt: t0.Add(time.Hour)}))
		if g, err := w.st.Quotes().Gate(ctx, w.org, "quo_1"); err != nil || g.ID != "gate_new" {
			t.Fatalf("gate %+v, %v", g, err)
		}
		_, err := w.st.Quotes().Gate(ctx, "org_other", "quo_1")
		wantErr(t, "another organisation", err, store.ErrNotFound)
	}},
	{"a held quote's insert holds its money", func(t *testing.T, w world) {
		q := store.Quote{ID: "quo_h1", OrgID: w.org, ProjectID: w.proj, Decision: "ALLOW", State: "held", AmountMicro: 60,
			Items: "[]", Reasons: "[]", CreatedAt: t0, ExpiresAt: t0.Add(15 * time.Minute)}
		must(t, w.st.InTx(ctx, func(tx *store.Tx) error { return tx.Quotes().InsertHeld(ctx, q) }))
		p, _ := w.st.Projects().Get(ctx, w.org, w.proj)
		if p.HeldMicro != 60 || !p.HoldsExpireAt.Equal(q.ExpiresAt) {
			t.Fatalf("after the held quote: held %d, holds expire %v", p.HeldMicro, p.HoldsExpireAt)
		}
		q.ID = "quo_h2"
		err := w.st.InTx(ctx, func(tx *store.Tx) error { return tx.Quotes().InsertHeld(ctx, q) })
		wantErr(t, "a hold past the limit", err, store.ErrBudget)
		if _, err := w.st.Quotes().Get(ctx, w.org, "quo_h2"); err != store.ErrNotFound {
			t.Fatalf("the refused quote was recorded: %v", err)
		}
		if p, _ := w.st.Projects().Get(ctx, w.org, w.proj); p.HeldMicro != 60 {
			t.Fatalf("the refused hold moved money: %d", p.HeldMicro)
		}
	}},
}
