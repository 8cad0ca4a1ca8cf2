package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

func purchaseDomains(ps []store.Purchase) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Domain)
	}
	return out
}

func TestDomains(t *testing.T) { runCases(t, domainsCases) }

// domainsCases are TestDomains's cases, each run on every engine.
var domainsCases = []storeCase{
	{"sold once", func(t *testing.T, w world) {
		b := w.other(t, "org_b")
		domains := w.st.Domains()
		v0 := w.st.DomainsVersion()
		must(t, domains.Claim(ctx, "Shop.Dev", w.org, "tsk_a", t0))
		must(t, domains.Claim(ctx, "shop.dev", w.org, "tsk_a", t0)) // the same task again
		wantErr(t, "claimed by another task", domains.Claim(ctx, "shop.dev", b.org, "tsk_b", t0), store.ErrConflict)
		if org, sold, err := domains.Holder(ctx, "SHOP.dev"); err != nil || org != w.org || sold {
			t.Fatalf("holder %s sold=%v, %v", org, sold, err)
		}
		p := store.Purchase{Ref: "ref_1", Domain: "shop.dev", OrgID: w.org, Years: 1, AmountMicro: 12, AuthCode: "x", CreatedAt: t0}
		if got, err := domains.RecordPurchase(ctx, p); err != nil || got != p {
			t.Fatalf("purchase %+v, %v", got, err)
		}
		if got, err := domains.RecordPurchase(ctx, p); err != nil || got != p {
			t.Fatalf("the same reference again: %+v, %v", got, err)
		}
		again := p
		again.Ref = "ref_2"
		_, err := domains.RecordPurchase(ctx, again)
		wantErr(t, "sold twice", err, store.ErrConflict)
		moved := p
		moved.Domain = "other.dev"
		_, err = domains.RecordPurchase(ctx, moved)
		wantErr(t, "a reference reused for another domain", err, store.ErrConflict)
		if n, err := domains.CountPurchases(ctx, "shop.dev"); err != nil || n != 1 {
			t.Fatalf("sold %d times, %v", n, err)
		}
		must(t, domains.ReleaseClaims(ctx, "tsk_a"))
		if org, sold, err := domains.Holder(ctx, "shop.dev"); err != nil || org != w.org || !sold {
			t.Fatalf("after the sale: holder %s sold=%v, %v", org, sold, err)
		}
		wantErr(t, "a sold name claimed", domains.Claim(ctx, "shop.dev", b.org, "tsk_b", t0), store.ErrConflict)
		if got, err := domains.PurchaseByRef(ctx, "ref_1"); err != nil || got != p {
			t.Fatalf("by ref %+v, %v", got, err)
		}
		if got, err := domains.PurchaseByDomain(ctx, "shop.dev"); err != nil || got != p {
			t.Fatalf("by domain %+v, %v", got, err)
		}
		_, err = domains.PurchaseByRef(ctx, "ref_none")
		wantErr(t, "unknown reference", err, store.ErrNotFound)
		_, _, err = domains.Holder(ctx, "free.dev")
		wantErr(t, "nobody holds it", err, store.ErrNotFound)
		if w.st.DomainsVersion() == v0 {
			t.Fatal("writes left the domains version as it was")
		}
	}},
	{"the version moves when a transaction commits", func(t *testing.T, w world) {
		v0 := w.st.DomainsVersion()
		must(t, w.st.InTx(ctx, func(tx *store.Tx) error {
			if err := tx.Domains().Claim(ctx, "a.dev", w.org, "tsk_a", t0); err != nil {
				return err
			}
			if w.st.DomainsVersion() != v0 {
				t.Error("the version moved before the commit")
			}
			return nil
		}))
		if w.st.DomainsVersion() == v0 {
			t.Fatal("the commit left the version as it was")
		}
	}},
	{"concurrent claims: one task wins", func(t *testing.T, w world) {
		wins := race(t, 8, func(i int) error {
			return w.st.InTx(ctx, func(tx *store.Tx) error {
				return tx.Domains().Claim(ctx, "shop.dev", w.org, "tsk_"+string(rune('a'+i)), t0)
			})
		}, store.ErrConflict)
		if wins != 1 {
			t.Fatalf("%d tasks claimed one name", wins)
		}
	}},
	{"concurrent purchases: sold once", func(t *testing.T, w world) {
		wins := race(t, 8, func(i int) error {
			_, err := w.st.Domains().RecordPurchase(ctx, store.Purchase{Ref: "ref_" + string(rune('a'+i)), Domain: "shop.dev", OrgID: w.org, Years: 1, CreatedAt: t0})
			return err
		}, store.ErrConflict)
		if n, _ := w.st.Domains().CountPurchases(ctx, "shop.dev"); wins != 1 || n != 1 {
			t.Fatalf("%d purchases went through, %d recorded", wins, n)
		}
	}},
	{"a refused purchase leaves the transaction usable", func(t *testing.T, w world) {
		_, err := w.st.Domains().RecordPurchase(ctx, store.Purchase{Ref: "ref_1", Domain: "shop.dev", OrgID: w.org, Years: 1, CreatedAt: t0})
		must(t, err)
		must(t, w.st.InTx(ctx, func(tx *store.Tx) error {
			_, err := tx.Domains().RecordPurchase(ctx, store.Purchase{Ref: "ref_2", Domain: "shop.dev", OrgID: w.org, Years: 1, CreatedAt: t0})
			wantErr(t, "sold twice", err, store.ErrConflict)
			return tx.Domains().Claim(ctx, "next.dev", w.org, "tsk_a", t0)
		}))
		if org, _, err := w.st.Domains().Holder(ctx, "next.dev"); err != nil || org != w.org {
			t.Fatalf("the claim after the refusal: %s, %v", org, err)
		}
	}},
	{"taken names", func(t *testing.T, w world) {
		domains := w.st.Domains()
		must(t, domains.Claim(ctx, "claimed.dev", w.org, "tsk_a", t0))
		_, err := domains.RecordPurchase(ctx, store.Purchase{Ref: "ref_1", Domain: "sold.dev", OrgID: w.org, Years: 1, CreatedAt: t0})
		must(t, err)
		taken, err := domains.Taken(ctx, []string{"Claimed.dev", "sold.dev", "free.dev"})
		if err != nil || len(taken) != 2 || !taken["claimed.dev"] || !taken["sold.dev"] {
			t.Fatalf("taken %v, %v", taken, err)
		}
		if taken, err := domains.Taken(ctx, nil); err != nil || len(taken) != 0 {
			t.Fatalf("none asked: %v, %v", taken, err)
		}
	}},
	{"purchases listed and paged", func(t *testing.T, w world) {
		domains := w.st.Domains()
		for i, d := range []string{"b.dev", "a.dev", "c.dev"} {
			_, err := domains.RecordPurchase(ctx, store.Purchase{Ref: "ref_" + d, Domain: d, OrgID: w.org, Years: 1, CreatedAt: t0.Add(time.Duration(i/2) * time.Second)})
			must(t, err)
		}
		_, err := domains.RecordPurchase(ctx, store.Purchase{Ref: "ref_x", Domain: "x.dev", OrgID: w.other(t, "org_b").org, Years: 1, CreatedAt: t0})
		must(t, err)
		if got, err := domains.OrgPurchases(ctx, w.org); err != nil || !slices.Equal(purchaseDomains(got), []string{"a.dev", "b.dev", "c.dev"}) {
			t.Fatalf("org purchases %v, %v", purchaseDomains(got), err)
		}
		for _, c := range []struct {
			f    store.Filter
			want []string
		}{
			{store.Filter{}, []string{"c.dev", "a.dev", "b.dev"}},
			{store.Filter{Limit: 2}, []string{"c.dev", "a.dev"}},
			{store.Filter{After: store.Cursor{At: t0.UnixMicro(), ID: "a.dev"}}, []string{"b.dev"}},
		} {
			got, err := domains.ListPurchases(ctx, w.org, c.f)
			if err != nil || !slices.Equal(purchaseDomains(got), c.want) {
				t.Errorf("list %+v: %v, %v; want %v", c.f, purchaseDomains(got), err, c.want)
			}
		}
	}},
	{"zones", func(t *testing.T, w world) {
		domains := w.st.Domains()
		_, err := domains.Zone(ctx, "shop.dev")
		wantErr(t, "no zone", err, store.ErrNotFound)
		z := store.Zone{Domain: "shop.dev", OrgID: w.org, Serial: 1, Records: "[]", UpdatedAt: t0}
		must(t, domains.PutZone(ctx, z))
		z.Serial, z.Records, z.UpdatedAt, z.OrgID = 2, `[{"type":"A"}]`, t0.Add(time.Minute), "org_b"
		must(t, domains.PutZone(ctx, z))
		if got, err := domains.Zone(ctx, "shop.dev"); err != nil || got != z {
			t.Fatalf("zone %+v, %v", got, err)
		}
		if since, err := domains.ZonesSince(ctx, t0.Add(time.Second).UnixMicro()); err != nil || len(since) != 1 || since[0].Name != "shop.dev" {
			t.Fatalf("zones written since %v, %v", since, err)
		}
		if since, err := domains.ZonesSince(ctx, t0.Add(time.Hour).UnixMicro()); err != nil || len(since) != 0 {
			t.Fatalf("zones written since an hour on %v, %v", since, err)
		}
		must(t, domains.DeleteZone(ctx, "shop.dev"))
		_, err = domains.Zone(ctx, "shop.dev")
		wantErr(t, "deleted zone", err, store.ErrNotFound)
	}},
}
