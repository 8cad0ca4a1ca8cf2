package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

// The shared suite: every noun's behaviour, run on both engines, as River
// runs one driver suite against each of its drivers.

func TestServicesHostHasOneOwner(t *testing.T) {
	suite(t, func(t *testing.T, open func() *store.Store) {
		ctx := context.Background()
		st := open()
		a, b := newWorld(t, st, "org_a"), newWorld(t, st, "org_b")
		sa, sb := a.service(t, "svc_a"), b.service(t, "svc_b")
		services := st.Services()
		if err := services.ClaimHost(ctx, "Shop.Example", sa.ID, a.org, t0); err != nil {
			t.Fatal(err)
		}
		if err := services.ClaimHost(ctx, "shop.example", sa.ID, a.org, t0); err != nil {
			t.Fatalf("claiming again for the same service: %v", err)
		}
		if err := services.ClaimHost(ctx, "shop.example", sb.ID, b.org, t0); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("another organisation took the host: %v", err)
		}
		// Retiring from the store, outside any transaction, still sets the
		// state and frees the hosts together.
		if err := services.Retire(ctx, sa.ID, "torn_down", t0); err != nil {
			t.Fatal(err)
		}
		if hosts, err := services.Hosts(ctx, sa.ID); err != nil || len(hosts) != 0 {
			t.Fatalf("retired service keeps %v, %v", hosts, err)
		}
		if err := services.ClaimHost(ctx, "shop.example", sb.ID, b.org, t0); err != nil {
			t.Fatalf("freed host not claimable: %v", err)
		}
		if id, org, err := services.HostOwner(ctx, "shop.example"); err != nil || id != sb.ID || org != b.org {
			t.Fatalf("owner %s %s, %v", id, org, err)
		}
	})
}

func TestDomainsSoldOnce(t *testing.T) {
	suite(t, func(t *testing.T, open func() *store.Store) {
		ctx := context.Background()
		st := open()
		a, b := newWorld(t, st, "org_a"), newWorld(t, st, "org_b")
		domains := st.Domains()
		if err := domains.Claim(ctx, "Shop.Dev", a.org, "tsk_a", t0); err != nil {
			t.Fatal(err)
		}
		if err := domains.Claim(ctx, "shop.dev", b.org, "tsk_b", t0); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("a claimed name was claimed again: %v", err)
		}
		if org, sold, err := domains.Holder(ctx, "shop.dev"); err != nil || org != a.org || sold {
			t.Fatalf("holder %s sold=%v, %v", org, sold, err)
		}
		if _, err := domains.RecordPurchase(ctx, store.Purchase{Ref: "ref_1", Domain: "shop.dev", OrgID: a.org, Years: 1, AmountMicro: 12, AuthCode: "x", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		if err := domains.ReleaseClaims(ctx, "tsk_a"); err != nil {
			t.Fatal(err)
		}
		if org, sold, err := domains.Holder(ctx, "shop.dev"); err != nil || org != a.org || !sold {
			t.Fatalf("after the sale: holder %s sold=%v, %v", org, sold, err)
		}
		if err := domains.Claim(ctx, "shop.dev", b.org, "tsk_b", t0); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("a sold name was claimed: %v", err)
		}
		if got, err := domains.PurchaseByRef(ctx, "ref_1"); err != nil || got.Domain != "shop.dev" {
			t.Fatalf("purchase %+v, %v", got, err)
		}
	})
}

func TestBundlesAreContentAddressed(t *testing.T) {
	suite(t, func(t *testing.T, open func() *store.Store) {
		ctx := context.Background()
		w := newWorld(t, open(), "org_a")
		bundles := w.st.Bundles()
		for range 2 {
			if err := bundles.PutBlob(ctx, "sha_x", []byte("hello"), t0); err != nil {
				t.Fatal(err)
			}
		}
		if data, err := bundles.Blob(ctx, "sha_x"); err != nil || string(data) != "hello" {
			t.Fatalf("blob %q, %v", data, err)
		}
		first, created, err := bundles.Put(ctx, store.Bundle{ID: "bnd_1", OrgID: w.org, SHA256: "sha_m", FileCount: 1, TotalBytes: 5, Manifest: "[]", CreatedAt: t0})
		if err != nil || !created {
			t.Fatalf("first put: %v %v", created, err)
		}
		again, created, err := bundles.Put(ctx, store.Bundle{ID: "bnd_2", OrgID: w.org, SHA256: "sha_m", FileCount: 1, TotalBytes: 5, Manifest: "[]", CreatedAt: t0})
		if err != nil || created || again.ID != first.ID {
			t.Fatalf("same content made a second bundle: %+v %v %v", again, created, err)
		}
	})
}

func TestLedgerChains(t *testing.T) {
	suite(t, func(t *testing.T, open func() *store.Store) {
		ctx := context.Background()
		w := newWorld(t, open(), "org_a")
		l := w.st.Ledger()
		for i := range 3 {
			if _, err := l.Append(ctx, store.LedgerRecord{OrgID: w.org, Actor: "agent:key_1", Action: "create_quote", ObjectType: "quote", ObjectID: "q", Details: map[string]any{"n": i}}, t0); err != nil {
				t.Fatal(err)
			}
		}
		all, err := l.Entries(ctx, w.org, 0, 10)
		if err != nil || len(all) != 3 {
			t.Fatalf("entries %d, %v", len(all), err)
		}
		for i := 1; i < len(all); i++ {
			if all[i].Seq != all[i-1].Seq+1 || all[i].PrevHash != all[i-1].Hash {
				t.Fatalf("entry %d does not chain onto %d", all[i].Seq, all[i-1].Seq)
			}
		}
		tail, err := l.Tail(ctx, w.org, 2)
		if err != nil || len(tail) != 2 || tail[0].Seq != all[2].Seq || tail[1].Seq != all[1].Seq { // newest first
			t.Fatalf("tail %v, %v", tail, err)
		}
	})
}

// A noun runs where it came from: reached from a Tx it is part of the
// transaction; the few operations that keep a transaction of their own
// refuse to run inside a caller's.
func TestNounsRunWhereTheyCameFrom(t *testing.T) {
	suite(t, func(t *testing.T, open func() *store.Store) {
		ctx := context.Background()
		w := newWorld(t, open(), "org_a")
		v := w.service(t, "svc_a")
		if err := w.st.Services().ClaimHost(ctx, "a.example", v.ID, w.org, t0); err != nil {
			t.Fatal(err)
		}
		boom := errors.New("boom")
		err := w.st.InTx(ctx, func(tx *store.Tx) error {
			if err := tx.Services().Retire(ctx, v.ID, "torn_down", t0); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
		if got, err := w.st.Services().Get(ctx, w.org, v.ID); err != nil || got.State != "live" {
			t.Fatalf("rolled-back retire left %+v, %v", got, err)
		}
		if hosts, _ := w.st.Services().Hosts(ctx, v.ID); len(hosts) != 1 {
			t.Fatalf("rolled-back retire released hosts: %v", hosts)
		}
		err = w.st.InTx(ctx, func(tx *store.Tx) error {
			_, _, err := tx.Idempotency().Begin(ctx, store.IdempotencyClaim{}, t0, time.Minute, time.Hour)
			return err
		})
		if err == nil {
			t.Fatal("an operation with its own transaction ran inside another")
		}
	})
}
