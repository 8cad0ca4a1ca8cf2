package oauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/store"
)

// Token formats: opaque, prefixed so that a leaked one is recognisable and
// so that the API tells them from keys (agk_) without a lookup.
const (
	AccessTokenPrefix  = "pat_"
	RefreshTokenPrefix = "prt_"
)

// Lifetimes.
const (
	// RequestTTL bounds how long an authorization request waits for a human.
	RequestTTL = 10 * time.Minute
	// CodeTTL is short: the client exchanges the code right after the
	// redirect.
	CodeTTL    = time.Minute
	AccessTTL  = time.Hour
	RefreshTTL = 30 * 24 * time.Hour
)

// Scopes are the keys' scopes; buy_domain is never granted unless the human
// ticks it.
var Scopes = auth.Scopes

// defaultScopes is what a request without a scope parameter asks for.
var defaultScopes = []string{"read", "quote", "launch"}

// Records is what the authorization server keeps in the store: its
// clients, authorizations, grants and tokens, written in transactions that
// record each grant and revocation in the ledger. *store.Store is one.
type Records interface {
	OAuth() store.OAuth
	InTx(ctx context.Context, fn func(tx *store.Tx) error) error
}

// Config wires the authorization server.
type Config struct {
	Store Records
	Log   *slog.Logger
	Now   func() time.Time
	// Issuer is the base URL: the authorization server's identifier.
	Issuer func() string
	// Resource is the protected resource's identifier, the MCP endpoint's
	// URL. Tokens are issued for it alone and accepted only for it.
	Resource func() string
}

// Server is the authorization server.
type Server struct {
	cfg Config
}

// New returns the authorization server.
func New(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Server{cfg: cfg}
}

func (s *Server) issuer() string   { return strings.TrimRight(s.cfg.Issuer(), "/") }
func (s *Server) resource() string { return s.cfg.Resource() }

// Error is an OAuth error (RFC 6749 §4.1.2.1, §5.2). When redirect is set
// the error goes back to the client at that URL; otherwise it is shown to
// the person, because the redirect URI cannot be trusted.
type Error struct {
	Code        string
	Description string
	Status      int
	redirect    string
}

func (e *Error) Error() string { return e.Code + ": " + e.Description }

// RedirectURL is where the error is sent back to the client, or "" when it
// must be shown instead.
func (e *Error) RedirectURL() string { return e.redirect }

func oauthError(status int, code, format string, args ...any) *Error {
	return &Error{Code: code, Description: fmt.Sprintf(format, args...), Status: status}
}

func hash(secret string) string { return auth.HashKey(secret) }

// ---- registration (RFC 7591) ----

// ClientMetadata is a registration request; fields Pier does not use are
// ignored.
type ClientMetadata struct {
	RedirectURIs            []string `json:"redirect_uris"`
	ClientName              string   `json:"client_name,omitempty"`
	GrantTypes              []string `json:"grant_types,omitempty"`
	ResponseTypes           []string `json:"response_types,omitempty"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method,omitempty"`
	Scope                   string   `json:"scope,omitempty"`
}

// ClientInformation is the registration response.
type ClientInformation struct {
	ClientID                string   `json:"client_id"`
	ClientIDIssuedAt        int64    `json:"client_id_issued_at"`
	ClientName              string   `json:"client_name,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	Scope                   string   `json:"scope,omitempty"`
}

// Register stores a public client. Every client is public: whatever
// authentication method it asks for, the answer is "none", which RFC 7591
// lets the server decide.
func (s *Server) Register(ctx context.Context, m ClientMetadata) (ClientInformation, error) {
	if len(m.RedirectURIs) == 0 {
		return ClientInformation{}, oauthError(400, "invalid_redirect_uri", "redirect_uris must list at least one URI")
	}
	if len(m.RedirectURIs) > 10 {
		return ClientInformation{}, oauthError(400, "invalid_redirect_uri", "at most 10 redirect_uris")
	}
	for _, u := range m.RedirectURIs {
		if err := checkRedirectURI(u); err != nil {
			return ClientInformation{}, oauthError(400, "invalid_redirect_uri", "%s: %v", u, err)
		}
	}
	for _, g := range m.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return ClientInformation{}, oauthError(400, "invalid_client_metadata", "grant type %q is not supported; use authorization_code and refresh_token", g)
		}
	}
	for _, rt := range m.ResponseTypes {
		if rt != "code" {
			return ClientInformation{}, oauthError(400, "invalid_client_metadata", "response type %q is not supported; use code", rt)
		}
	}
	if m.Scope != "" {
		if _, err := parseScopes(m.Scope); err != nil {
			return ClientInformation{}, oauthError(400, "invalid_client_metadata", "%v", err)
		}
	}
	name := strings.TrimSpace(m.ClientName)
	if len(name) > 200 {
		return ClientInformation{}, oauthError(400, "invalid_client_metadata", "client_name is longer than 200 characters")
	}
	if name == "" {
		name = "Unnamed client"
	}
	now := s.cfg.Now().UTC()
	c := store.OAuthClient{ID: auth.ID("pcl"), Name: name, RedirectURIs: m.RedirectURIs, CreatedAt: now}
	if err := s.cfg.Store.OAuth().CreateClient(ctx, c); err != nil {
		return ClientInformation{}, err
	}
	return ClientInformation{
		ClientID: c.ID, ClientIDIssuedAt: now.Unix(), ClientName: name, RedirectURIs: c.RedirectURIs,
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		TokenEndpointAuthMethod: "none", Scope: m.Scope,
	}, nil
}

// checkRedirectURI accepts https URIs and http ones on a loopback host
// (RFC 8252 §7.3), without fragments. Custom schemes are refused: on this
// service every client is a program that can listen on loopback or a web
// application with TLS.
func checkRedirectURI(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return errors.New("not an absolute URL")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return errors.New("a redirect URI has no fragment")
	}
	if u.User != nil {
		return errors.New("a redirect URI has no user information")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopback(u.Hostname()) {
			return nil
		}
		return errors.New("http is allowed only on a loopback host (127.0.0.1, [::1] or localhost); use https")
	}
	return fmt.Errorf("scheme %q is not allowed; use https, or http on loopback", u.Scheme)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// matchRedirect finds the registered URI a request names. Loopback URIs
// match on any port, since a native client listens where it can (RFC 8252
// §7.3); everything else matches exactly.
func matchRedirect(registered []string, given string) (string, bool) {
	if given == "" {
		if len(registered) == 1 {
			return registered[0], true
		}
		return "", false
	}
	g, err := url.Parse(given)
	if err != nil {
		return "", false
	}
	for _, r := range registered {
		if r == given {
			return given, true
		}
		ru, err := url.Parse(r)
		if err != nil || ru.Scheme != "http" || g.Scheme != "http" || !isLoopback(ru.Hostname()) {
			continue
		}
		if ru.Hostname() == g.Hostname() && ru.Path == g.Path && ru.RawQuery == g.RawQuery && g.Fragment == "" && g.User == nil {
			return given, true
		}
	}
	return "", false
}

func parseScopes(raw string) ([]string, error) {
	var out []string
	for _, sc := range strings.Fields(raw) {
		if !slices.Contains(Scopes, sc) {
			return nil, fmt.Errorf("unknown scope %q; scopes are %s", sc, strings.Join(Scopes, " "))
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out, nil
}

// ---- authorization ----

// Authorize checks an authorization request (the query of GET
// /oauth/authorize) and records it for a human's consent, returning its id.
// An unknown client or redirect URI is an *Error without a redirect, shown
// to the person; every other refusal redirects back to the client.
func (s *Server) Authorize(ctx context.Context, q url.Values) (string, error) {
	clientID := q.Get("client_id")
	if clientID == "" {
		return "", oauthError(400, "invalid_request", "the request names no client_id")
	}
	c, err := s.cfg.Store.OAuth().Client(ctx, clientID)
	if errors.Is(err, store.ErrNotFound) {
		return "", oauthError(400, "invalid_client", "no client is registered as %s", clientID)
	}
	if err != nil {
		return "", err
	}
	if len(q["redirect_uri"]) > 1 {
		return "", oauthError(400, "invalid_request", "redirect_uri appears more than once")
	}
	redirect, ok := matchRedirect(c.RedirectURIs, q.Get("redirect_uri"))
	if !ok {
		return "", oauthError(400, "invalid_request", "the redirect_uri is not one the client registered")
	}
	state := q.Get("state")
	fail := func(code, format string, args ...any) (string, error) {
		e := oauthError(302, code, format, args...)
		e.redirect = s.callback(redirect, url.Values{"error": {code}, "error_description": {e.Description}}, state)
		return "", e
	}
	for _, p := range []string{"response_type", "client_id", "scope", "state", "code_challenge", "code_challenge_method"} {
		if len(q[p]) > 1 {
			return fail("invalid_request", "%s appears more than once", p)
		}
	}
	if q.Get("response_type") != "code" {
		return fail("unsupported_response_type", "only response_type=code is supported")
	}
	challenge, method := q.Get("code_challenge"), q.Get("code_challenge_method")
	if challenge == "" {
		return fail("invalid_request", "PKCE is required: send code_challenge with code_challenge_method=S256")
	}
	if method != "S256" {
		if method == "" {
			method = "plain (the default)"
		}
		return fail("invalid_request", "code_challenge_method %s is not supported; only S256 is", method)
	}
	if b, err := base64.RawURLEncoding.DecodeString(challenge); err != nil || len(b) != sha256.Size {
		return fail("invalid_request", "code_challenge must be the base64url SHA-256 of the verifier, 43 characters")
	}
	scopes := defaultScopes
	if q.Has("scope") {
		if scopes, err = parseScopes(q.Get("scope")); err != nil {
			return fail("invalid_scope", "%v", err)
		}
		if len(scopes) == 0 {
			scopes = defaultScopes
		}
	}
	resource := s.resource()
	switch rs := q["resource"]; {
	case len(rs) > 1:
		return fail("invalid_target", "this server protects one resource, %s; name it once", resource)
	case len(rs) == 1 && !sameResource(rs[0], resource):
		return fail("invalid_target", "the resource %q is not served here; tokens are issued for %s", rs[0], resource)
	}
	now := s.cfg.Now().UTC()
	a := store.OAuthAuthorization{ID: auth.Token(24), ClientID: c.ID, RedirectURI: redirect, Scopes: scopes, ClientState: state,
		CodeChallenge: challenge, Resource: resource, CreatedAt: now, ExpiresAt: now.Add(RequestTTL)}
	if err := s.cfg.Store.OAuth().CreateAuthorization(ctx, a); err != nil {
		return "", err
	}
	return a.ID, nil
}

// sameResource compares resource identifiers, ignoring a trailing slash.
func sameResource(a, b string) bool {
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}

// callback builds the redirect back to the client, with the state echoed
// and the issuer named (RFC 9207) so a client talking to several servers
// can tell which one answered.
func (s *Server) callback(redirect string, params url.Values, state string) string {
	u, _ := url.Parse(redirect)
	q := u.Query()
	for k, vs := range params {
		q[k] = vs
	}
	if state != "" {
		q.Set("state", state)
	}
	q.Set("iss", s.issuer())
	u.RawQuery = q.Encode()
	return u.String()
}

// Pending is an authorization request as the consent page shows it.
type Pending struct {
	ID          string
	ClientID    string
	ClientName  string
	RedirectURI string
	// RedirectOrigin is where the browser goes after the decision, for the
	// page's form-action policy.
	RedirectOrigin string
	Scopes         []string
	Resource       string
	ExpiresAt      time.Time
}

// PendingAuthorization reads a request awaiting consent. A request that is
// unknown, decided or expired is an apierr for the human pages.
func (s *Server) PendingAuthorization(ctx context.Context, id string) (Pending, error) {
	a, err := s.cfg.Store.OAuth().Authorization(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return Pending{}, apierr.New("not_found:resource", "There is no such sign-in request.")
	}
	if err != nil {
		return Pending{}, err
	}
	if a.Status != "pending" {
		return Pending{}, apierr.New("conflict:state", "This sign-in request was already decided.")
	}
	if !s.cfg.Now().Before(a.ExpiresAt) {
		return Pending{}, apierr.New("conflict:expired", "This sign-in request expired. Start again from the application.")
	}
	c, err := s.cfg.Store.OAuth().Client(ctx, a.ClientID)
	if err != nil {
		return Pending{}, err
	}
	u, _ := url.Parse(a.RedirectURI)
	return Pending{ID: a.ID, ClientID: c.ID, ClientName: c.Name, RedirectURI: a.RedirectURI, RedirectOrigin: u.Scheme + "://" + u.Host,
		Scopes: a.Scopes, Resource: a.Resource, ExpiresAt: a.ExpiresAt}, nil
}

// Decide records a signed-in human's decision on a request and returns the
// URL to send the browser to: the client's redirect URI with a code, or
// with access_denied. The granted scopes must be among those requested.
// orgID and humanID come from the human's session and nowhere else.
func (s *Server) Decide(ctx context.Context, id, orgID, humanID string, approve bool, scopes []string) (string, error) {
	var redirect string
	err := s.cfg.Store.InTx(ctx, func(tx *store.Tx) error {
		now := s.cfg.Now().UTC()
		a, err := tx.OAuth().LockAuthorization(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return apierr.New("not_found:resource", "There is no such sign-in request.")
		}
		if err != nil {
			return err
		}
		if a.Status != "pending" {
			return apierr.New("conflict:state", "This sign-in request was already decided; the first decision stands.")
		}
		if !now.Before(a.ExpiresAt) {
			return apierr.New("conflict:expired", "This sign-in request expired. Start again from the application.")
		}
		actor := "human:" + humanID
		if !approve {
			if err := tx.OAuth().DenyAuthorization(ctx, id, now); err != nil {
				return err
			}
			redirect = s.callback(a.RedirectURI, url.Values{"error": {"access_denied"}, "error_description": {"the person declined"}}, a.ClientState)
			_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: orgID, Actor: actor, Action: "deny_oauth_client", ObjectType: "oauth_client", ObjectID: a.ClientID}, now)
			return err
		}
		if len(scopes) == 0 {
			return apierr.New("input:invalid", "Choose at least one permission to grant, or deny.")
		}
		for _, sc := range scopes {
			if !slices.Contains(a.Scopes, sc) {
				return apierr.Newf("input:invalid", "The application did not ask for %s.", sc)
			}
		}
		g := store.OAuthGrant{ID: auth.ID("oag"), ClientID: a.ClientID, OrgID: orgID, HumanID: humanID, Scopes: scopes, Resource: a.Resource, CreatedAt: now}
		if err := tx.OAuth().CreateGrant(ctx, g); err != nil {
			return err
		}
		code := auth.Token(32)
		if err := tx.OAuth().ApproveAuthorization(ctx, id, g.ID, hash(code), now.Add(CodeTTL), now); err != nil {
			return err
		}
		redirect = s.callback(a.RedirectURI, url.Values{"code": {code}}, a.ClientState)
		_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: orgID, Actor: actor, Action: "authorize_oauth_client", ObjectType: "oauth_grant", ObjectID: g.ID,
			Details: map[string]any{"clientId": a.ClientID, "scopes": scopes, "resource": a.Resource}}, now)
		return err
	})
	return redirect, err
}

// ---- tokens ----

// TokenResponse is the token endpoint's answer (RFC 6749 §5.1).
type TokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

// Token serves the token endpoint's two grants. A replayed code or
// refresh token revokes the grant it belongs to, so a thief and the
// rightful client both lose it and the human must approve again.
func (s *Server) Token(ctx context.Context, form url.Values) (TokenResponse, error) {
	clientID := form.Get("client_id")
	if clientID == "" {
		return TokenResponse{}, oauthError(401, "invalid_client", "send client_id: every client is public and authenticates by it alone")
	}
	if _, err := s.cfg.Store.OAuth().Client(ctx, clientID); errors.Is(err, store.ErrNotFound) {
		return TokenResponse{}, oauthError(401, "invalid_client", "no client is registered as %s", clientID)
	} else if err != nil {
		return TokenResponse{}, err
	}
	if rs := form["resource"]; len(rs) > 1 || len(rs) == 1 && !sameResource(rs[0], s.resource()) {
		return TokenResponse{}, oauthError(400, "invalid_target", "tokens are issued for %s only", s.resource())
	}
	switch form.Get("grant_type") {
	case "authorization_code":
		return s.exchangeCode(ctx, clientID, form)
	case "refresh_token":
		return s.refresh(ctx, clientID, form)
	case "":
		return TokenResponse{}, oauthError(400, "invalid_request", "grant_type is missing")
	}
	return TokenResponse{}, oauthError(400, "unsupported_grant_type", "grant_type %q is not supported; use authorization_code or refresh_token", form.Get("grant_type"))
}

func (s *Server) exchangeCode(ctx context.Context, clientID string, form url.Values) (TokenResponse, error) {
	code, verifier := form.Get("code"), form.Get("code_verifier")
	if code == "" {
		return TokenResponse{}, oauthError(400, "invalid_request", "code is missing")
	}
	if verifier == "" {
		return TokenResponse{}, oauthError(400, "invalid_request", "code_verifier is missing: PKCE is required")
	}
	var resp TokenResponse
	var refusal *Error
	err := s.cfg.Store.InTx(ctx, func(tx *store.Tx) error {
		now := s.cfg.Now().UTC()
		a, err := tx.OAuth().LockAuthorizationByCode(ctx, hash(code))
		if errors.Is(err, store.ErrNotFound) {
			refusal = oauthError(400, "invalid_grant", "the code is unknown")
			return nil
		}
		if err != nil {
			return err
		}
		if a.ClientID != clientID {
			refusal = oauthError(400, "invalid_grant", "the code was issued to another client")
			return nil
		}
		if a.Status == "exchanged" {
			// A code used twice was stolen or replayed: end what it bought.
			revoked, err := tx.OAuth().RevokeGrant(ctx, a.GrantID, "code_replayed", now)
			if err != nil {
				return err
			}
			if revoked {
				g, err := tx.OAuth().Grant(ctx, a.GrantID)
				if err != nil {
					return err
				}
				if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: g.OrgID, Actor: "system", Action: "revoke_oauth_grant", ObjectType: "oauth_grant", ObjectID: g.ID,
					Details: map[string]any{"reason": "code_replayed"}}, now); err != nil {
					return err
				}
			}
			refusal = oauthError(400, "invalid_grant", "the code was already used; the tokens issued for it are revoked")
			return nil
		}
		if a.Status != "approved" || !now.Before(a.CodeExpiresAt) {
			refusal = oauthError(400, "invalid_grant", "the code expired")
			return nil
		}
		if r := form.Get("redirect_uri"); r != "" && r != a.RedirectURI {
			refusal = oauthError(400, "invalid_grant", "redirect_uri differs from the authorization request's")
			return nil
		}
		if !verifierMatches(verifier, a.CodeChallenge) {
			refusal = oauthError(400, "invalid_grant", "code_verifier does not match the code_challenge")
			return nil
		}
		if err := tx.OAuth().SpendCode(ctx, a.ID); err != nil {
			return err
		}
		grant, err := tx.OAuth().Grant(ctx, a.GrantID)
		if err != nil {
			return err
		}
		resp, err = s.issue(ctx, tx, grant, grant.Scopes, now)
		return err
	})
	if err != nil {
		return TokenResponse{}, err
	}
	if refusal != nil {
		return TokenResponse{}, refusal
	}
	return resp, nil
}

// verifierMatches checks RFC 7636 S256: BASE64URL(SHA256(verifier)) equals
// the challenge. The verifier must be 43 to 128 unreserved characters.
func verifierMatches(verifier, challenge string) bool {
	if len(verifier) < 43 || len(verifier) > 128 {
		return false
	}
	for _, c := range verifier {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
			return false
		}
	}
	sum := sha256.Sum256([]byte(verifier))
	got := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(got), []byte(challenge)) == 1
}

func (s *Server) issue(ctx context.Context, tx *store.Tx, g store.OAuthGrant, scopes []string, now time.Time) (TokenResponse, error) {
	access := AccessTokenPrefix + auth.Token(32)
	refresh := RefreshTokenPrefix + auth.Token(32)
	if err := tx.OAuth().CreateToken(ctx, hash(access), g.ID, "access", scopes, now, now.Add(AccessTTL)); err != nil {
		return TokenResponse{}, err
	}
	if err := tx.OAuth().CreateToken(ctx, hash(refresh), g.ID, "refresh", g.Scopes, now, now.Add(RefreshTTL)); err != nil {
		return TokenResponse{}, err
	}
	return TokenResponse{AccessToken: access, TokenType: "Bearer", ExpiresIn: int64(AccessTTL / time.Second),
		RefreshToken: refresh, Scope: strings.Join(scopes, " ")}, nil
}

func (s *Server) refresh(ctx context.Context, clientID string, form url.Values) (TokenResponse, error) {
	secret := form.Get("refresh_token")
	if secret == "" {
		return TokenResponse{}, oauthError(400, "invalid_request", "refresh_token is missing")
	}
	var resp TokenResponse
	var refusal *Error
	err := s.cfg.Store.InTx(ctx, func(tx *store.Tx) error {
		now := s.cfg.Now().UTC()
		t, err := tx.OAuth().LockToken(ctx, hash(secret))
		if errors.Is(err, store.ErrNotFound) || err == nil && t.Kind != "refresh" {
			refusal = oauthError(400, "invalid_grant", "the refresh token is unknown")
			return nil
		}
		if err != nil {
			return err
		}
		if t.Grant.ClientID != clientID {
			refusal = oauthError(400, "invalid_grant", "the refresh token was issued to another client")
			return nil
		}
		if t.Grant.RevokedAt != nil || t.RevokedAt != nil {
			refusal = oauthError(400, "invalid_grant", "the refresh token was revoked")
			return nil
		}
		if t.RotatedAt != nil {
			// Rotated tokens are spent: a second use means two parties
			// hold it. Revoke the whole family.
			if _, err := tx.OAuth().RevokeGrant(ctx, t.GrantID, "refresh_token_replayed", now); err != nil {
				return err
			}
			if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: t.Grant.OrgID, Actor: "system", Action: "revoke_oauth_grant", ObjectType: "oauth_grant", ObjectID: t.GrantID,
				Details: map[string]any{"reason": "refresh_token_replayed"}}, now); err != nil {
				return err
			}
			refusal = oauthError(400, "invalid_grant", "the refresh token was already used; every token of this grant is revoked")
			return nil
		}
		if !now.Before(t.ExpiresAt) {
			refusal = oauthError(400, "invalid_grant", "the refresh token expired")
			return nil
		}
		scopes := t.Grant.Scopes
		if form.Has("scope") {
			asked, err := parseScopes(form.Get("scope"))
			if err != nil {
				refusal = oauthError(400, "invalid_scope", "%v", err)
				return nil
			}
			for _, sc := range asked {
				if !slices.Contains(t.Grant.Scopes, sc) {
					refusal = oauthError(400, "invalid_scope", "%s was not granted", sc)
					return nil
				}
			}
			if len(asked) > 0 {
				scopes = asked
			}
		}
		if err := tx.OAuth().RotateToken(ctx, hash(secret), now); err != nil {
			return err
		}
		resp, err = s.issue(ctx, tx, t.Grant, scopes, now)
		return err
	})
	if err != nil {
		return TokenResponse{}, err
	}
	if refusal != nil {
		return TokenResponse{}, refusal
	}
	return resp, nil
}

// Revoke serves RFC 7009. Revoking a refresh token ends its grant and every
// token of it; revoking an access token ends that token. An unknown token
// is not an error.
func (s *Server) Revoke(ctx context.Context, form url.Values) error {
	secret, clientID := form.Get("token"), form.Get("client_id")
	if secret == "" {
		return oauthError(400, "invalid_request", "token is missing")
	}
	if clientID == "" {
		return oauthError(401, "invalid_client", "send client_id: every client is public and authenticates by it alone")
	}
	return s.cfg.Store.InTx(ctx, func(tx *store.Tx) error {
		now := s.cfg.Now().UTC()
		t, err := tx.OAuth().LockToken(ctx, hash(secret))
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if t.Grant.ClientID != clientID {
			return oauthError(400, "unauthorized_client", "the token was issued to another client")
		}
		if t.Kind == "access" {
			return tx.OAuth().RevokeToken(ctx, hash(secret), now)
		}
		revoked, err := tx.OAuth().RevokeGrant(ctx, t.GrantID, "revoked_by_client", now)
		if err != nil || !revoked {
			return err
		}
		_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: t.Grant.OrgID, Actor: "oauth:" + t.GrantID, Action: "revoke_oauth_grant", ObjectType: "oauth_grant", ObjectID: t.GrantID,
			Details: map[string]any{"reason": "revoked_by_client"}}, now)
		return err
	})
}

// ---- resource side ----

// ErrInvalidToken is an access token that does not authenticate: unknown,
// expired, revoked, or issued for another audience.
var ErrInvalidToken = errors.New("oauth: invalid access token")

// Authenticate turns an access token into the agent it stands for: the
// organisation and scopes a human granted. Both doors of the API (REST and
// MCP) call it, and both are the one resource the token must name.
func (s *Server) Authenticate(ctx context.Context, token string) (*auth.Principal, error) {
	if !strings.HasPrefix(token, AccessTokenPrefix) {
		return nil, fmt.Errorf("%w: not an access token", ErrInvalidToken)
	}
	t, err := s.cfg.Store.OAuth().TokenByHash(ctx, hash(token))
	if errors.Is(err, store.ErrNotFound) || err == nil && t.Kind != "access" {
		return nil, fmt.Errorf("%w: unknown", ErrInvalidToken)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case t.RevokedAt != nil || t.Grant.RevokedAt != nil:
		return nil, fmt.Errorf("%w: revoked", ErrInvalidToken)
	case !s.cfg.Now().Before(t.ExpiresAt):
		return nil, fmt.Errorf("%w: expired", ErrInvalidToken)
	case !sameResource(t.Grant.Resource, s.resource()):
		return nil, fmt.Errorf("%w: issued for another audience (%s)", ErrInvalidToken, t.Grant.Resource)
	}
	return &auth.Principal{Kind: "agent", OrgID: t.Grant.OrgID, GrantID: t.GrantID, Scopes: t.Scopes, Caller: "oauth:" + t.GrantID}, nil
}

// ResourceMetadataURL is where the protected resource metadata lives, for
// WWW-Authenticate challenges.
func (s *Server) ResourceMetadataURL() string {
	return s.issuer() + "/.well-known/oauth-protected-resource"
}

// noStore marks token answers uncacheable (RFC 6749 §5.1).
func noStore(h http.Header) {
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
}
