package service

import (
	"errors"
	"strings"
	"testing"

	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

// Keys are made, granted and revoked by a person of their organisation
// only.
func TestKeys(t *testing.T) {
	h := newHarness(t)
	a, b := h.tenant(10, DefaultPolicy()), h.tenant(10, DefaultPolicy())
	for _, c := range []struct {
		name   string
		scopes []string
	}{{strings.Repeat("k", 101), []string{"read"}}, {"k", nil}, {"k", []string{"root"}}} {
		_, _, err := h.svc.Accounts.CreateKey(h.ctx, a.human, c.name, c.scopes)
		wantCode(t, err, "input:invalid")
	}
	secret, k, err := h.svc.Accounts.CreateKey(h.ctx, a.human, "  ", []string{"read"})
	h.must(err)
	if k.Name != "agent" || secret == "" {
		t.Fatalf("key %+v", k)
	}
	wantCode(t, h.svc.Accounts.GrantScope(h.ctx, b.human, k.ID, "launch"), "not_found:resource")
	wantCode(t, h.svc.Accounts.GrantScope(h.ctx, a.human, k.ID, "root"), "input:invalid")
	h.must(h.svc.Accounts.GrantScope(h.ctx, a.human, k.ID, "buy_domain"))
	h.must(h.svc.Accounts.GrantScope(h.ctx, a.human, k.ID, "buy_domain")) // again: nothing changes
	keys, _ := h.svc.Accounts.ListKeys(h.ctx, a.org)
	for _, kk := range keys {
		if kk.ID == k.ID && !slicesEqual(kk.Scopes, []string{"read", "buy_domain"}) {
			t.Fatalf("scopes %v", kk.Scopes)
		}
	}
	wantCode(t, h.svc.Accounts.RevokeKey(h.ctx, b.human, k.ID), "not_found:resource")
	h.must(h.svc.Accounts.RevokeKey(h.ctx, a.human, k.ID))
	wantCode(t, h.svc.Accounts.GrantScope(h.ctx, a.human, k.ID, "launch"), "not_found:resource")
	if stored, err := h.st.Keys().ByHash(h.ctx, auth.HashKey(secret)); err == nil && stored.RevokedAt == nil {
		t.Fatal("a revoked key is live")
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

// Sign-in links work once, within their time; sessions end on sign-out;
// an agent's key secret is no session, so no agent reaches a human's
// decisions.
func TestSignIn(t *testing.T) {
	h := newHarness(t)
	if _, _, err := h.svc.Accounts.LocalOperatorSignIn(h.ctx, "", "/"); !errors.Is(err, ErrNoOrganization) {
		t.Fatalf("no org yet: %v", err)
	}
	a := h.tenant(10, DefaultPolicy())
	if _, _, err := h.svc.Accounts.LocalOperatorSignIn(h.ctx, "org_nope", "/"); !errors.Is(err, ErrNoOrganization) {
		t.Fatalf("unknown org: %v", err)
	}
	link, _, err := h.svc.Accounts.LocalOperatorSignIn(h.ctx, "", "//evil.example/x")
	h.must(err)
	link2, _, err := h.svc.Accounts.LocalOperatorSignIn(h.ctx, a.org, "/approvals")
	h.must(err)
	secret, sess, next, err := h.svc.Accounts.SignIn(h.ctx, reviewToken(link))
	h.must(err)
	if next != "" || sess.OrgID != a.org || sess.Name != "Local operator" || sess.OrgName == "" {
		t.Fatalf("session %+v next %q", sess, next)
	}
	wantCode(t, second4(h.svc.Accounts.SignIn(h.ctx, reviewToken(link))), "auth:invalid_credentials")
	got, err := h.svc.Accounts.SessionFor(h.ctx, secret)
	h.must(err)
	if got.UserID != sess.UserID {
		t.Fatalf("session %+v", got)
	}
	// An agent's key secret opens no session.
	keySecret, _, _ := h.svc.Accounts.CreateKey(h.ctx, a.human, "bot", []string{"read"})
	for _, s := range []string{"", keySecret} {
		if _, err := h.svc.Accounts.SessionFor(h.ctx, s); err == nil {
			t.Fatalf("%q opened a session", s)
		}
	}
	h.must(h.svc.Accounts.SignOut(h.ctx, secret))
	h.must(h.svc.Accounts.SignOut(h.ctx, ""))
	if _, err := h.svc.Accounts.SessionFor(h.ctx, secret); err == nil {
		t.Fatal("a session outlived its sign-out")
	}
	h.clock.Advance(SignInTTL + 1)
	wantCode(t, second4(h.svc.Accounts.SignIn(h.ctx, reviewToken(link2))), "auth:invalid_credentials")
	if _, _, err := h.svc.Accounts.MintSignIn(h.ctx, "usr_nope", "/"); err == nil {
		t.Fatal("a link for nobody")
	}
	for in, want := range map[string]string{"/a": "/a", "//x": "", "/\\x": "", "http://x": "", "/a\r\nb": ""} {
		if SafeNext(in) != want {
			t.Fatalf("SafeNext(%q) = %q", in, SafeNext(in))
		}
	}
}

func second4[A, B, C any](_ A, _ B, _ C, err error) error { return err }

// The dashboard and the ledger show one organisation, its own.
func TestDashboardAndLedger(t *testing.T) {
	h := newHarness(t)
	a, b := h.tenant(10, DefaultPolicy()), h.tenant(10, DefaultPolicy())
	h.edge(a, "site", LaunchRequest{})
	h.svc.Approvals.RequestBudgetRaise(h.ctx, a.agent, a.project, money.FromUSD(1), "x")
	h.must(second2(h.svc.Onboarding.OpenCardSetup(h.ctx, a.human)))
	d, err := h.svc.Approvals.DashboardFor(h.ctx, a.human)
	h.must(err)
	if d.Org.ID != a.org || len(d.Projects) != 1 || len(d.Pending) != 1 || len(d.Keys) != 1 || len(d.Tasks) != 2 || d.Card != nil {
		t.Fatalf("dashboard %+v", d)
	}
	if d.Pending[0].Title != "Raise the budget of main by $1.00" {
		t.Fatalf("title %q", d.Pending[0].Title)
	}
	db, _ := h.svc.Approvals.DashboardFor(h.ctx, b.human)
	if len(db.Pending) != 0 || len(db.Tasks) != 0 {
		t.Fatal("org B's dashboard shows A's work")
	}
	all, err := h.svc.Approvals.LedgerFor(h.ctx, a.human)
	h.must(err)
	page, err := h.svc.Projects.LedgerEntries(h.ctx, a.org, 0, 2)
	h.must(err)
	if len(page.Entries) != 2 || page.HeadHash != page.Entries[1].Hash || len(all) < 5 {
		t.Fatalf("ledger page %d of %d", len(page.Entries), len(all))
	}
	for _, e := range all {
		if e.OrgID != a.org {
			t.Fatalf("org A's ledger holds %+v", e)
		}
	}
	rest, _ := h.svc.Projects.LedgerEntries(h.ctx, a.org, 0, 1000)
	if rest.HeadHash != all[len(all)-1].Hash || len(rest.Entries) != len(all) {
		t.Fatal("head hash is not the last entry's")
	}
}

// Whoami names the key or grant, the organisation, its projects and caps.
func TestWhoami(t *testing.T) {
	h := newHarness(t, withQuotas(Quotas{Services: 3}))
	tn := h.tenant(10, DefaultPolicy())
	w, err := h.svc.Projects.Whoami(h.ctx, tn.agent)
	h.must(err)
	if w.KeyName != "agent" || w.OrgID != tn.org || w.Project != tn.project || w.Quotas.Services != 3 || w.KeyKind != APIKey {
		t.Fatalf("whoami %+v", w)
	}
	grant := &auth.Principal{Kind: "agent", OrgID: tn.org, GrantID: "grt_1", Scopes: []string{"read"}}
	w, err = h.svc.Projects.Whoami(h.ctx, grant)
	h.must(err)
	if w.KeyKind != OAuthGrant || w.KeyID != "grt_1" {
		t.Fatalf("grant %+v", w)
	}
	if actorOf(grant) != "oauth:grt_1" || actorOf(&auth.Principal{Kind: "system"}) != "system" {
		t.Fatal("actor names")
	}
	st, err := h.svc.Projects.State(h.ctx, tn.agent, tn.project)
	h.must(err)
	h.quote(tn, serviceItem("dynamic_service", "process", "api"))
	st2, _ := h.svc.Projects.State(h.ctx, tn.agent, tn.project)
	if st.Version != st2.Version || st2.RemainingMicro >= st.RemainingMicro {
		t.Fatalf("state %+v then %+v", st, st2)
	}
	wantCode(t, second2(h.svc.Projects.State(h.ctx, tn.agent, "prj_nope")), "not_found:resource")
	wantCode(t, second2(h.svc.Projects.Get(h.ctx, tn.org, "prj_nope")), "not_found:resource")
	wantCode(t, second2(h.svc.Projects.Export(h.ctx, tn.agent, "prj_nope")), "not_found:resource")
	if _, err := h.st.Projects().Get(h.ctx, "org_other", tn.project); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("a project is found under another organisation")
	}
}
