package store_test

import (
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

func TestAccounts(t *testing.T) { runCases(t, accountsCases) }

// accountsCases are TestAccounts's cases, each run on every engine.
var accountsCases = []storeCase{
	{"organizations", func(t *testing.T, w world) {
		accounts := w.st.Accounts()
		first, err := accounts.FirstOrganization(ctx)
		if err != nil || first.ID != w.org || !first.CreatedAt.Equal(t0) {
			t.Fatalf("first %+v, %v", first, err)
		}
		w.other(t, "org_0")
		// Created at the same time: the tie goes by id.
		if first, _ := accounts.FirstOrganization(ctx); first.ID != "org_0" {
			t.Fatalf("ties go by id: first is %s", first.ID)
		}
		o, err := accounts.Organization(ctx, w.org)
		if err != nil || o.Name != w.org || !o.CreatedAt.Equal(t0) || o.CreatedAt.Location() != time.UTC {
			t.Fatalf("organization %+v, %v", o, err)
		}
		_, err = accounts.Organization(ctx, "org_none")
		wantErr(t, "unknown organization", err, store.ErrNotFound)
		_, err = accounts.CreateOrganization(ctx, w.org, "again", t0)
		if err == nil {
			t.Fatal("an organization id was taken twice")
		}
	}},
	{"usage", func(t *testing.T, w world) {
		accounts := w.st.Accounts()
		if u, err := accounts.Usage(ctx, w.org); err != nil || u != (store.Usage{}) {
			t.Fatalf("empty usage %+v, %v", u, err)
		}
		w.service(t, "svc_live")
		gone := w.service(t, "svc_gone")
		must(t, w.st.Services().SetState(ctx, gone.ID, "torn_down", t0))
		failed := w.service(t, "svc_failed")
		must(t, w.st.Services().SetState(ctx, failed.ID, "failed", t0))
		for i, sha := range []string{"m1", "m2"} {
			if _, _, err := w.st.Bundles().Put(ctx, store.Bundle{ID: "bnd_" + sha, OrgID: w.org, SHA256: sha, FileCount: 1, TotalBytes: int64(10 * (i + 1)), Manifest: "[]", CreatedAt: t0}); err != nil {
				t.Fatal(err)
			}
		}
		other := w.other(t, "org_b")
		other.service(t, "svc_b")
		u, err := accounts.Usage(ctx, w.org)
		if err != nil || u != (store.Usage{Services: 1, Bundles: 2, BundleBytes: 30}) {
			t.Fatalf("usage %+v, %v", u, err)
		}
	}},
	{"humans", func(t *testing.T, w world) {
		accounts := w.st.Accounts()
		_, err := accounts.LocalOperator(ctx, w.org)
		wantErr(t, "no local operator yet", err, store.ErrNotFound)
		w.human(t, "hum_person", "person")
		op := w.human(t, "hum_op", "local_operator")
		got, err := accounts.Human(ctx, "hum_person")
		if err != nil || got.Kind != "person" || got.Email != "hum_person@example.test" || !got.CreatedAt.Equal(t0) {
			t.Fatalf("human %+v, %v", got, err)
		}
		if got, err := accounts.LocalOperator(ctx, w.org); err != nil || got != op {
			t.Fatalf("local operator %+v, %v", got, err)
		}
		_, err = accounts.Human(ctx, "hum_none")
		wantErr(t, "unknown human", err, store.ErrNotFound)
		if err := accounts.CreateHuman(ctx, store.Human{ID: "hum_x", OrgID: w.org, Kind: "robot", CreatedAt: t0}); err == nil {
			t.Fatal("a human of no known kind was stored")
		}
		if err := accounts.CreateHuman(ctx, store.Human{ID: "hum_y", OrgID: "org_none", Kind: "person", CreatedAt: t0}); err == nil {
			t.Fatal("a human of no organisation was stored")
		}
	}},
	{"sign-in tokens work once, before expiry", func(t *testing.T, w world) {
		accounts := w.st.Accounts()
		w.human(t, "hum_1", "person")
		must(t, accounts.CreateSignInToken(ctx, "tok_a", "hum_1", "/next", t0, t0.Add(time.Minute)))
		must(t, accounts.CreateSignInToken(ctx, "tok_b", "hum_1", "/", t0, t0.Add(time.Minute)))
		human, next, err := accounts.UseSignInToken(ctx, "tok_a", t0.Add(time.Second))
		if err != nil || human != "hum_1" || next != "/next" {
			t.Fatalf("use %s %s, %v", human, next, err)
		}
		_, _, err = accounts.UseSignInToken(ctx, "tok_a", t0.Add(time.Second))
		wantErr(t, "used twice", err, store.ErrNotFound)
		_, _, err = accounts.UseSignInToken(ctx, "tok_b", t0.Add(time.Minute))
		wantErr(t, "used at expiry", err, store.ErrNotFound)
		_, _, err = accounts.UseSignInToken(ctx, "tok_none", t0)
		wantErr(t, "unknown", err, store.ErrNotFound)
	}},
	{"concurrent sign-ins spend a token once", func(t *testing.T, w world) {
		w.human(t, "hum_1", "person")
		must(t, w.st.Accounts().CreateSignInToken(ctx, "tok", "hum_1", "/", t0, t0.Add(time.Minute)))
		wins := race(t, 8, func(int) error {
			_, _, err := w.st.Accounts().UseSignInToken(ctx, "tok", t0)
			return err
		}, store.ErrNotFound)
		if wins != 1 {
			t.Fatalf("%d sign-ins with one token", wins)
		}
	}},
	{"sessions", func(t *testing.T, w world) {
		accounts := w.st.Accounts()
		w.human(t, "hum_1", "person")
		s := store.HumanSession{HumanID: "hum_1", OrgID: w.org, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
		must(t, accounts.CreateSession(ctx, "sess", s))
		if got, err := accounts.SessionByHash(ctx, "sess", t0.Add(time.Minute)); err != nil || got != s {
			t.Fatalf("session %+v, %v", got, err)
		}
		_, err := accounts.SessionByHash(ctx, "sess", t0.Add(time.Hour))
		wantErr(t, "expired session", err, store.ErrNotFound)
		must(t, accounts.EndSession(ctx, "sess", t0))
		must(t, accounts.EndSession(ctx, "sess", t0)) // twice is harmless
		_, err = accounts.SessionByHash(ctx, "sess", t0)
		wantErr(t, "ended session", err, store.ErrNotFound)
		if err := accounts.CreateSession(ctx, "sess", s); err == nil {
			t.Fatal("a session hash was stored twice")
		}
	}},
}
