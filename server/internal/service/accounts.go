package service

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/store"
)

func keyNotFound(id string) *apierr.Error {
	return apierr.Newf("not_found:resource", "no live key %s in your organisation", id)
}

func checkScopes(scopes []string) error {
	if len(scopes) == 0 {
		return apierr.New("input:invalid", "choose at least one scope")
	}
	for _, sc := range scopes {
		if !slices.Contains(auth.Scopes, sc) {
			return apierr.Newf("input:invalid", "unknown scope %q; scopes are %s", sc, strings.Join(auth.Scopes, ", "))
		}
	}
	return nil
}

// ErrNoOrganization is returned when the local operator is asked for before
// any organisation exists.
var ErrNoOrganization = errors.New("no organisation exists yet")

// Session is a signed-in human.
type Session struct {
	Human
	Name, Email, OrgName string
	ExpiresAt            time.Time
}

func signedInActor(h Human) string { return "human:" + h.UserID }

// SafeNext keeps a post-sign-in redirect on this site: a path, never a URL
// or a scheme-relative //host.
func SafeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") || strings.ContainsAny(next, "\r\n") {
		return ""
	}
	return next
}

func signInRefused() *apierr.Error {
	return apierr.New("auth:invalid_credentials", "This sign-in link was already used, has expired, or never existed.")
}

// ListKeys lists the organisation's keys, revoked ones included.
func (s *Accounts) ListKeys(ctx context.Context, orgID string) ([]store.APIKey, error) {
	return s.store.Keys().List(ctx, orgID)
}

// CreateKey mints a key for the human's organisation. The secret is
// returned here once and stored only as a hash.
func (s *Accounts) CreateKey(ctx context.Context, h Human, name string, scopes []string) (string, store.APIKey, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		name = "agent"
	}
	if len(name) > 100 {
		return "", store.APIKey{}, apierr.New("input:invalid", "the key name is longer than 100 characters")
	}
	if err := checkScopes(scopes); err != nil {
		return "", store.APIKey{}, err
	}
	var secret string
	var k store.APIKey
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		secret, k, err = s.createKey(ctx, tx, h.OrgID, name, scopes, signedInActor(h))
		return err
	})
	return secret, k, err
}

func (s *Accounts) createKey(ctx context.Context, tx *store.Tx, orgID, name string, scopes []string, actor string) (string, store.APIKey, error) {
	now := s.Now()
	secret, hash := auth.NewKey()
	k := store.APIKey{ID: auth.ID("key"), OrgID: orgID, Name: name, Scopes: scopes, CreatedAt: now.UTC()}
	if err := tx.Keys().Create(ctx, k, hash); err != nil {
		return "", k, err
	}
	_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: orgID, Actor: actor, Action: "create_key", ObjectType: "key", ObjectID: k.ID,
		Details: map[string]any{"name": name, "scopes": scopes}}, now)
	return secret, k, err
}

// RevokeKey revokes a key of the human's organisation; it stops working on
// its next request.
func (s *Accounts) RevokeKey(ctx context.Context, h Human, keyID string) error {
	return s.store.InTx(ctx, func(tx *store.Tx) error {
		now := s.Now()
		if err := tx.Keys().Revoke(ctx, h.OrgID, keyID, now); errors.Is(err, store.ErrNotFound) {
			return keyNotFound(keyID)
		} else if err != nil {
			return err
		}
		_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: h.OrgID, Actor: signedInActor(h), Action: "revoke_key", ObjectType: "key", ObjectID: keyID}, now)
		return err
	})
}

// GrantScope adds a scope to a live key of the human's organisation, such
// as buy_domain, which lets the key skip the per-purchase gate.
func (s *Accounts) GrantScope(ctx context.Context, h Human, keyID, scope string) error {
	if err := checkScopes([]string{scope}); err != nil {
		return err
	}
	return s.store.InTx(ctx, func(tx *store.Tx) error {
		now := s.Now()
		k, err := tx.Keys().Lock(ctx, h.OrgID, keyID)
		if errors.Is(err, store.ErrNotFound) || err == nil && k.RevokedAt != nil {
			return keyNotFound(keyID)
		}
		if err != nil {
			return err
		}
		if k.HasScope(scope) {
			return nil
		}
		scopes := append(slices.Clone(k.Scopes), scope)
		if err := tx.Keys().SetScopes(ctx, h.OrgID, keyID, scopes); err != nil {
			return err
		}
		_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: h.OrgID, Actor: signedInActor(h), Action: "grant_scope", ObjectType: "key", ObjectID: keyID,
			Details: map[string]any{"scope": scope, "scopes": scopes}}, now)
		return err
	})
}

// MintSignIn issues a one-time sign-in token for a human. next is where the
// link lands after signing in (a path on this site, or "").
func (s *Accounts) MintSignIn(ctx context.Context, humanID, next string) (token string, expires time.Time, err error) {
	token = auth.Token(32)
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		now := s.Now()
		h, err := tx.Accounts().Human(ctx, humanID)
		if err != nil {
			return err
		}
		expires = now.Add(SignInTTL).UTC()
		if err := tx.Accounts().CreateSignInToken(ctx, auth.HashKey(token), h.ID, SafeNext(next), now, expires); err != nil {
			return err
		}
		_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: h.OrgID, Actor: "system", Action: "issue_signin_link", ObjectType: "human", ObjectID: h.ID,
			Details: map[string]any{"expiresAt": expires.Format(time.RFC3339)}}, now)
		return err
	})
	return token, expires, err
}

// LocalOperatorSignIn mints a one-time sign-in link for the local operator
// of an organisation (the first one when orgID is ""), creating that human
// on first use. ErrNoOrganization when there is none.
func (s *Accounts) LocalOperatorSignIn(ctx context.Context, orgID, next string) (link string, expires time.Time, err error) {
	if orgID == "" {
		o, err := s.store.Accounts().FirstOrganization(ctx)
		if errors.Is(err, store.ErrNotFound) {
			return "", time.Time{}, ErrNoOrganization
		}
		if err != nil {
			return "", time.Time{}, err
		}
		orgID = o.ID
	} else if _, err := s.store.Accounts().Organization(ctx, orgID); errors.Is(err, store.ErrNotFound) {
		return "", time.Time{}, ErrNoOrganization
	} else if err != nil {
		return "", time.Time{}, err
	}
	var humanID string
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		h, err := tx.Accounts().LocalOperator(ctx, orgID)
		if err == nil {
			humanID = h.ID
			return nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		now := s.Now()
		h = store.Human{ID: auth.ID("usr"), OrgID: orgID, Kind: "local_operator", Name: "Local operator", CreatedAt: now.UTC()}
		if err := tx.Accounts().CreateHuman(ctx, h); err != nil {
			return err
		}
		humanID = h.ID
		_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: orgID, Actor: "system", Action: "create_human", ObjectType: "human", ObjectID: h.ID,
			Details: map[string]any{"kind": h.Kind, "name": h.Name}}, now)
		return err
	})
	if err != nil {
		return "", time.Time{}, err
	}
	token, expires, err := s.MintSignIn(ctx, humanID, next)
	if err != nil {
		return "", time.Time{}, err
	}
	return s.SignInURL(token), expires, nil
}

// SignIn spends a one-time token and starts a session. It returns the
// session's secret (for the cookie) and where to go next.
func (s *Accounts) SignIn(ctx context.Context, token string) (secret string, sess Session, next string, err error) {
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		now := s.Now()
		humanID, n, err := tx.Accounts().UseSignInToken(ctx, auth.HashKey(token), now)
		if errors.Is(err, store.ErrNotFound) {
			return signInRefused()
		}
		if err != nil {
			return err
		}
		h, err := tx.Accounts().Human(ctx, humanID)
		if err != nil {
			return err
		}
		next = n
		secret, sess, err = s.startSession(ctx, tx, h, "signin_link", now)
		return err
	})
	if err != nil {
		return "", Session{}, "", err
	}
	return secret, s.fillSession(ctx, sess), next, nil
}

// startSession creates a session for h inside tx and records the sign-in.
func (s *Accounts) startSession(ctx context.Context, tx *store.Tx, h store.Human, via string, now time.Time) (string, Session, error) {
	secret := auth.Token(32)
	hs := store.HumanSession{HumanID: h.ID, OrgID: h.OrgID, CreatedAt: now.UTC(), ExpiresAt: now.Add(SessionTTL).UTC()}
	if err := tx.Accounts().CreateSession(ctx, auth.HashKey(secret), hs); err != nil {
		return "", Session{}, err
	}
	_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: h.OrgID, Actor: "human:" + h.ID, Action: "sign_in", ObjectType: "human", ObjectID: h.ID,
		Details: map[string]any{"via": via}}, now)
	return secret, Session{Human: Human{OrgID: h.OrgID, UserID: h.ID}, Name: h.Name, Email: h.Email, ExpiresAt: hs.ExpiresAt}, err
}

func (s *Accounts) fillSession(ctx context.Context, sess Session) Session {
	if o, err := s.store.Accounts().Organization(ctx, sess.OrgID); err == nil {
		sess.OrgName = o.Name
	}
	return sess
}

// SessionFor finds the live session behind a cookie secret.
func (s *Accounts) SessionFor(ctx context.Context, secret string) (Session, error) {
	if secret == "" {
		return Session{}, store.ErrNotFound
	}
	hs, err := s.store.Accounts().SessionByHash(ctx, auth.HashKey(secret), s.Now())
	if err != nil {
		return Session{}, err
	}
	h, err := s.store.Accounts().Human(ctx, hs.HumanID)
	if err != nil {
		return Session{}, err
	}
	return s.fillSession(ctx, Session{Human: Human{OrgID: hs.OrgID, UserID: h.ID}, Name: h.Name, Email: h.Email, ExpiresAt: hs.ExpiresAt}), nil
}

// SignOut ends the session behind a cookie secret.
func (s *Accounts) SignOut(ctx context.Context, secret string) error {
	if secret == "" {
		return nil
	}
	return s.store.Accounts().EndSession(ctx, auth.HashKey(secret), s.Now())
}

// Human identity: one-time sign-in links and sessions. Only a human session
// can review a signup, decide a gate, set up a card or manage keys; none of
// these is reachable with an agent key.

const (
	// SignInTTL bounds how long a one-time sign-in link works.
	SignInTTL = 15 * time.Minute
	// SessionTTL bounds a signed-in session.
	SessionTTL = 12 * time.Hour
)
