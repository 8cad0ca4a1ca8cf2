package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

// oauthWorld is a client, a human and a grant of the world's organisation.
func (w world) oauth(t *testing.T) (client store.OAuthClient, grant store.OAuthGrant) {
	t.Helper()
	client = store.OAuthClient{ID: "cli_1", Name: "Agent", RedirectURIs: []string{"https://a.test/cb", "http://127.0.0.1/cb"}, CreatedAt: t0}
	must(t, w.st.OAuth().CreateClient(ctx, client))
	w.human(t, "hum_1", "person")
	grant = store.OAuthGrant{ID: "grt_1", ClientID: client.ID, OrgID: w.org, HumanID: "hum_1", Scopes: []string{"read", "launch"}, Resource: "https://pier.test/mcp", CreatedAt: t0}
	must(t, w.st.OAuth().CreateGrant(ctx, grant))
	return client, grant
}

func TestOAuth(t *testing.T) { runCases(t, oAuthCases) }

// oAuthCases are TestOAuth's cases, each run on every engine.
var oAuthCases = []storeCase{
	{"clients", func(t *testing.T, w world) {
		oauth := w.st.OAuth()
		c := store.OAuthClient{ID: "cli_1", Name: "Agent", RedirectURIs: []string{"https://a.test/cb", "http://127.0.0.1/cb"}, CreatedAt: t0}
		must(t, oauth.CreateClient(ctx, c))
		got, err := oauth.Client(ctx, "cli_1")
		if err != nil || got.Name != c.Name || !slices.Equal(got.RedirectURIs, c.RedirectURIs) || !got.CreatedAt.Equal(t0) {
			t.Fatalf("client %+v, %v", got, err)
		}
		must(t, oauth.CreateClient(ctx, store.OAuthClient{ID: "cli_none", Name: "No URIs", CreatedAt: t0}))
		if got, _ := oauth.Client(ctx, "cli_none"); len(got.RedirectURIs) != 0 {
			t.Fatalf("a client with no redirect URIs reads back %q", got.RedirectURIs)
		}
		_, err = oauth.Client(ctx, "cli_x")
		wantErr(t, "unknown client", err, store.ErrNotFound)
		if err := oauth.CreateClient(ctx, c); err == nil {
			t.Fatal("a client id was taken twice")
		}
	}},
	{"an authorization is decided once, its code spent once", func(t *testing.T, w world) {
		oauth := w.st.OAuth()
		client, grant := w.oauth(t)
		a := store.OAuthAuthorization{ID: "az_1", ClientID: client.ID, RedirectURI: client.RedirectURIs[0], Scopes: []string{"read"}, ClientState: "st",
			CodeChallenge: "cc", Resource: "r", Status: "pending", CreatedAt: t0, ExpiresAt: t0.Add(10 * time.Minute)}
		must(t, oauth.CreateAuthorization(ctx, a))
		if got, err := oauth.Authorization(ctx, "az_1"); err != nil || got.Status != "pending" || got.GrantID != "" || !got.CodeExpiresAt.IsZero() || !slices.Equal(got.Scopes, a.Scopes) || got.ClientState != "st" {
			t.Fatalf("authorization %+v, %v", got, err)
		}
		_, err := oauth.Authorization(ctx, "az_none")
		wantErr(t, "unknown authorization", err, store.ErrNotFound)
		wins := race(t, 6, func(i int) error {
			if i%2 == 1 {
				return oauth.DenyAuthorization(ctx, "az_1", t0.Add(time.Minute))
			}
			return oauth.ApproveAuthorization(ctx, "az_1", grant.ID, "code_"+string(rune('a'+i)), t0.Add(2*time.Minute), t0.Add(time.Minute))
		}, store.ErrConflict)
		if wins != 1 {
			t.Fatalf("decided %d times", wins)
		}
		// A second authorization, approved, to spend.
		b := a
		b.ID = "az_2"
		must(t, oauth.CreateAuthorization(ctx, b))
		wantErr(t, "approved after expiry", oauth.ApproveAuthorization(ctx, "az_2", grant.ID, "code", t0.Add(time.Hour), t0.Add(10*time.Minute)), store.ErrConflict)
		must(t, oauth.ApproveAuthorization(ctx, "az_2", grant.ID, "code", t0.Add(2*time.Minute), t0.Add(time.Minute)))
		wantErr(t, "denied after approval", oauth.DenyAuthorization(ctx, "az_2", t0), store.ErrConflict)
		must(t, w.st.InTx(ctx, func(tx *store.Tx) error {
			got, err := tx.OAuth().LockAuthorizationByCode(ctx, "code")
			if err != nil || got.ID != "az_2" || got.Status != "approved" || got.GrantID != grant.ID || !got.CodeExpiresAt.Equal(t0.Add(2*time.Minute)) {
				t.Errorf("by code %+v, %v", got, err)
			}
			if got, err := tx.OAuth().LockAuthorization(ctx, "az_2"); err != nil || got.ID != "az_2" {
				t.Errorf("lock %+v, %v", got, err)
			}
			return err
		}))
		wins = race(t, 6, func(int) error { return oauth.SpendCode(ctx, "az_2") }, store.ErrConflict)
		if wins != 1 {
			t.Fatalf("a code spent %d times", wins)
		}
		if got, _ := oauth.Authorization(ctx, "az_2"); got.Status != "exchanged" {
			t.Fatalf("spent code's authorization is %s", got.Status)
		}
		_, err = oauth.LockAuthorizationByCode(ctx, "code_none")
		wantErr(t, "unknown code", err, store.ErrNotFound)
	}},
	{"grants and tokens", func(t *testing.T, w world) {
		oauth := w.st.OAuth()
		_, grant := w.oauth(t)
		if got, err := oauth.Grant(ctx, grant.ID); err != nil || got.ClientID != grant.ClientID || !slices.Equal(got.Scopes, grant.Scopes) || got.RevokedAt != nil || got.Resource != grant.Resource {
			t.Fatalf("grant %+v, %v", got, err)
		}
		_, err := oauth.Grant(ctx, "grt_none")
		wantErr(t, "unknown grant", err, store.ErrNotFound)
		must(t, oauth.CreateToken(ctx, "acc_1", grant.ID, "access", []string{"read"}, t0, t0.Add(time.Hour)))
		must(t, oauth.CreateToken(ctx, "ref_1", grant.ID, "refresh", grant.Scopes, t0, t0.Add(30*24*time.Hour)))
		tok, err := oauth.TokenByHash(ctx, "acc_1")
		if err != nil || tok.Kind != "access" || tok.GrantID != grant.ID || !slices.Equal(tok.Scopes, []string{"read"}) || tok.Grant.OrgID != w.org || tok.Grant.HumanID != "hum_1" ||
			!slices.Equal(tok.Grant.Scopes, grant.Scopes) || !tok.ExpiresAt.Equal(t0.Add(time.Hour)) || tok.RotatedAt != nil || tok.RevokedAt != nil {
			t.Fatalf("token %+v, %v", tok, err)
		}
		_, err = oauth.TokenByHash(ctx, "tok_none")
		wantErr(t, "unknown token", err, store.ErrNotFound)
		wantErr(t, "an access token is not rotated", oauth.RotateToken(ctx, "acc_1", t0), store.ErrConflict)
		// Of concurrent refreshes with one token, one rotates it; the
		// rest are replays.
		wins := race(t, 6, func(int) error {
			return w.st.InTx(ctx, func(tx *store.Tx) error {
				if _, err := tx.OAuth().LockToken(ctx, "ref_1"); err != nil {
					return err
				}
				return tx.OAuth().RotateToken(ctx, "ref_1", t0.Add(time.Minute))
			})
		}, store.ErrConflict)
		if wins != 1 {
			t.Fatalf("a refresh token rotated %d times", wins)
		}
		if tok, _ := oauth.TokenByHash(ctx, "ref_1"); tok.RotatedAt == nil || !tok.RotatedAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("rotated %+v", tok)
		}
		must(t, oauth.RevokeToken(ctx, "acc_1", t0.Add(time.Minute)))
		must(t, oauth.RevokeToken(ctx, "acc_1", t0.Add(time.Hour))) // the first revocation stands
		if tok, _ := oauth.TokenByHash(ctx, "acc_1"); tok.RevokedAt == nil || !tok.RevokedAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("revoked %+v", tok)
		}
		must(t, oauth.CreateToken(ctx, "acc_2", grant.ID, "access", nil, t0, t0.Add(time.Hour)))
		if revoked, err := oauth.RevokeGrant(ctx, grant.ID, "user", t0.Add(2*time.Minute)); !revoked || err != nil {
			t.Fatalf("revoke grant %v, %v", revoked, err)
		}
		if revoked, err := oauth.RevokeGrant(ctx, grant.ID, "user", t0.Add(3*time.Minute)); revoked || err != nil {
			t.Fatalf("revoked twice %v, %v", revoked, err)
		}
		tok, _ = oauth.TokenByHash(ctx, "acc_2")
		if tok.RevokedAt == nil || tok.Grant.RevokedAt == nil || !tok.Grant.RevokedAt.Equal(t0.Add(2*time.Minute)) {
			t.Fatalf("the grant's token lives on: %+v", tok)
		}
	}},
	{"purge", func(t *testing.T, w world) {
		oauth := w.st.OAuth()
		client, grant := w.oauth(t)
		for i, exp := range []time.Time{t0, t0.Add(48 * time.Hour)} {
			id := string(rune('a' + i))
			must(t, oauth.CreateToken(ctx, "tok_"+id, grant.ID, "access", nil, t0, exp))
			must(t, oauth.CreateAuthorization(ctx, store.OAuthAuthorization{ID: "az_" + id, ClientID: client.ID, CreatedAt: t0, ExpiresAt: exp}))
		}
		// An approved one whose code lives longer than its request.
		must(t, oauth.CreateAuthorization(ctx, store.OAuthAuthorization{ID: "az_code", ClientID: client.ID, CreatedAt: t0, ExpiresAt: t0.Add(time.Minute)}))
		must(t, oauth.ApproveAuthorization(ctx, "az_code", grant.ID, "code", t0.Add(48*time.Hour), t0))
		n, err := oauth.Purge(ctx, t0.Add(25*time.Hour))
		if err != nil || n != 2 {
			t.Fatalf("purged %d, %v", n, err)
		}
		for _, id := range []string{"az_b", "az_code"} {
			if _, err := oauth.Authorization(ctx, id); err != nil {
				t.Fatalf("%s purged: %v", id, err)
			}
		}
		if _, err := oauth.TokenByHash(ctx, "tok_b"); err != nil {
			t.Fatalf("live token purged: %v", err)
		}
		if _, err := oauth.Grant(ctx, grant.ID); err != nil {
			t.Fatalf("grant purged: %v", err)
		}
	}},
}
