package store_test

import (
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

func TestOnboarding(t *testing.T) { runCases(t, onboardingCases) }

// onboardingCases are TestOnboarding's cases, each run on every engine.
var onboardingCases = []storeCase{
	{"a signup is reviewed, completed and claimed once each", func(t *testing.T, w world) {
		ob := w.st.Onboarding()
		su := store.Signup{ID: "sgn_1", SecretHash: "sec", ReviewHash: "rev", Email: "a@x.test", OrgName: "A", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
		must(t, ob.CreateSignup(ctx, su))
		got, err := ob.Signup(ctx, "sgn_1")
		if err != nil || got.State != "pending_review" || got.OrgID != "" || got.ReviewedAt != nil || !got.ExpiresAt.Equal(su.ExpiresAt) {
			t.Fatalf("signup %+v, %v", got, err)
		}
		if got, err := ob.SignupByReviewHash(ctx, "rev"); err != nil || got.ID != "sgn_1" {
			t.Fatalf("by review hash %+v, %v", got, err)
		}
		_, err = ob.SignupByReviewHash(ctx, "rev_none")
		wantErr(t, "unknown review", err, store.ErrNotFound)
		wantErr(t, "completed before review", ob.CompleteSignup(ctx, "sgn_1", t0), store.ErrConflict)
		reviewed := su
		reviewed.OrgID, reviewed.ProjectID, reviewed.HumanID, reviewed.SetupID = w.org, w.proj, "hum_1", "set_1"
		w.human(t, "hum_1", "person")
		wantErr(t, "reviewed after expiry", ob.ReviewSignup(ctx, reviewed, t0.Add(time.Hour)), store.ErrConflict)
		wins := race(t, 4, func(int) error { return ob.ReviewSignup(ctx, reviewed, t0.Add(time.Minute)) }, store.ErrConflict)
		if wins != 1 {
			t.Fatalf("reviewed %d times", wins)
		}
		must(t, w.st.InTx(ctx, func(tx *store.Tx) error {
			got, err := tx.Onboarding().LockSignup(ctx, "sgn_1")
			if err != nil || got.State != "pending_card" || got.OrgID != w.org || got.SetupID != "set_1" || got.ReviewedAt == nil {
				t.Errorf("lock %+v, %v", got, err)
			}
			return err
		}))
		must(t, ob.CompleteSignup(ctx, "sgn_1", t0.Add(2*time.Minute)))
		wantErr(t, "completed twice", ob.CompleteSignup(ctx, "sgn_1", t0), store.ErrConflict)
		wins = race(t, 6, func(i int) error {
			return ob.ClaimSignup(ctx, "sgn_1", "key_"+string(rune('a'+i)), t0.Add(3*time.Minute))
		}, store.ErrConflict)
		if wins != 1 {
			t.Fatalf("claimed %d times", wins)
		}
		got, _ = ob.Signup(ctx, "sgn_1")
		if got.State != "claimed" || got.KeyID == "" || got.ClaimedAt == nil || got.CompletedAt == nil || !got.CompletedAt.Equal(t0.Add(2*time.Minute)) {
			t.Fatalf("claimed signup %+v", got)
		}
		_, err = ob.Signup(ctx, "sgn_none")
		wantErr(t, "unknown signup", err, store.ErrNotFound)
		if err := ob.CreateSignup(ctx, store.Signup{ID: "sgn_2", ReviewHash: "rev", CreatedAt: t0, ExpiresAt: t0}); err == nil {
			t.Fatal("a review hash was taken twice")
		}
	}},
	{"billing setups and payment methods", func(t *testing.T, w world) {
		ob := w.st.Onboarding()
		b := store.BillingSetup{ID: "set_1", OrgID: w.org, SecretHash: "sec", Reason: "replace_card", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
		must(t, ob.CreateBillingSetup(ctx, b))
		got, err := ob.BillingSetup(ctx, w.org, "set_1")
		if err != nil || got.State != "pending" || got.SignupID != "" || got.CompletedAt != nil || got.Reason != "replace_card" {
			t.Fatalf("setup %+v, %v", got, err)
		}
		_, err = ob.BillingSetup(ctx, "org_other", "set_1")
		wantErr(t, "another organisation's setup", err, store.ErrNotFound)
		must(t, ob.DeclineBillingSetup(ctx, "set_1", "card_declined"))
		must(t, ob.DeclineBillingSetup(ctx, "set_1", "insufficient_funds"))
		if got, _ := ob.BillingSetup(ctx, w.org, "set_1"); got.State != "declined" || got.DeclineCode != "insufficient_funds" {
			t.Fatalf("declined %+v", got)
		}
		wins := race(t, 4, func(i int) error { return ob.CompleteBillingSetup(ctx, "set_1", "pm_1", t0.Add(time.Minute)) }, store.ErrConflict)
		if wins != 1 {
			t.Fatalf("completed %d times", wins)
		}
		must(t, ob.DeclineBillingSetup(ctx, "set_1", "late")) // a complete flow stays complete
		must(t, w.st.InTx(ctx, func(tx *store.Tx) error {
			got, err := tx.Onboarding().LockBillingSetup(ctx, w.org, "set_1")
			if err != nil || got.State != "complete" || got.DeclineCode != "" || got.PaymentMethodID != "pm_1" || got.CompletedAt == nil {
				t.Errorf("lock %+v, %v", got, err)
			}
			return err
		}))
		_, err = ob.ActivePaymentMethod(ctx, w.org)
		wantErr(t, "no card yet", err, store.ErrNotFound)
		pm := store.PaymentMethod{ID: "pm_1", OrgID: w.org, Brand: "visa", Last4: "4242", ExpMonth: 12, ExpYear: 2030, State: "active", CreatedAt: t0}
		must(t, ob.AddPaymentMethod(ctx, pm))
		if got, err := ob.ActivePaymentMethod(ctx, w.org); err != nil || got != pm {
			t.Fatalf("card %+v, %v", got, err)
		}
		pm2 := pm
		pm2.ID, pm2.Last4, pm2.CreatedAt = "pm_2", "0005", t0.Add(time.Minute)
		must(t, w.st.InTx(ctx, func(tx *store.Tx) error { return tx.Onboarding().AddPaymentMethod(ctx, pm2) }))
		if got, err := ob.ActivePaymentMethod(ctx, w.org); err != nil || got != pm2 {
			t.Fatalf("replaced card %+v, %v", got, err)
		}
		bad := pm
		bad.ID, bad.ExpMonth = "pm_bad", 13
		if err := ob.AddPaymentMethod(ctx, bad); err == nil {
			t.Fatal("a card expiring in month 13 was stored")
		}
		su := store.Signup{ID: "sgn_1", SecretHash: "s", ReviewHash: "r", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
		must(t, ob.CreateSignup(ctx, su))
		must(t, ob.CreateBillingSetup(ctx, store.BillingSetup{ID: "set_2", OrgID: w.org, SecretHash: "s2", Reason: "signup", SignupID: "sgn_1", CreatedAt: t0, ExpiresAt: t0}))
		if got, _ := ob.BillingSetup(ctx, w.org, "set_2"); got.SignupID != "sgn_1" {
			t.Fatalf("setup's signup %+v", got)
		}
	}},
}
