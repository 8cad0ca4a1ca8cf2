package oauth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/ledger"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/oauth"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

func TestMain(m *testing.M) { os.Exit(testpg.Run(m)) }

// env is a real server with one organisation, a project, a person who can
// sign in, and a loopback listener standing for the client's redirect URI.
type env struct {
	*server.Server
	base     string
	clock    *testserver.Clock
	org      store.Organization
	project  string
	human    store.Human
	callback string
}

func start(t *testing.T, databaseURL string) *env {
	t.Helper()
	ctx := context.Background()
	c := testserver.NewClock(time.Now().UTC())
	s := testserver.Start(t, server.Config{DatabaseURL: databaseURL, Now: c.Now}).Server
	var err error
	e := &env{Server: s, base: s.BaseURL(), clock: c}
	svc, st := s.Service(), s.Store()
	if e.org, err = st.Accounts().CreateOrganization(ctx, auth.ID("org"), "Lovelace & Co", c.Now()); err != nil {
		t.Fatal(err)
	}
	p, err := svc.Projects.Create(ctx, service.NewProject{OrgID: e.org.ID, Name: "engine", LimitMicro: 50_000_000, Policy: service.DefaultPolicy(), CreatedBy: "system"})
	if err != nil {
		t.Fatal(err)
	}
	e.project = p.ID
	e.human = store.Human{ID: auth.ID("hum"), OrgID: e.org.ID, Kind: "person", Name: "Ada", Email: "ada@example.test", CreatedAt: c.Now()}
	if err := st.InTx(ctx, func(tx *store.Tx) error { return tx.Accounts().CreateHuman(ctx, e.human) }); err != nil {
		t.Fatal(err)
	}
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "You can close this window.")
	}))
	t.Cleanup(cb.Close)
	e.callback = cb.URL + "/callback"
	return e
}

var engines = testserver.Engines

// discover reads both metadata documents as a client does.
func (e *env) discover(t *testing.T) (oauth.ProtectedResourceMetadata, oauth.AuthorizationServerMetadata) {
	t.Helper()
	var prm oauth.ProtectedResourceMetadata
	var asm oauth.AuthorizationServerMetadata
	getJSON(t, e.base+"/.well-known/oauth-protected-resource", &prm)
	getJSON(t, prm.AuthorizationServers[0]+"/.well-known/oauth-authorization-server", &asm)
	return prm, asm
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", u, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// register is RFC 7591 registration, which x/oauth2 does not do.
func (e *env) register(t *testing.T, meta map[string]any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(meta)
	resp, err := http.Post(e.base+"/oauth/register", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// client registers a public client and returns its x/oauth2 config.
func (e *env) client(t *testing.T, scopes ...string) *oauth2.Config {
	t.Helper()
	_, asm := e.discover(t)
	st, reg := e.register(t, map[string]any{"client_name": "Test Agent", "redirect_uris": []string{e.callback},
		"grant_types": []string{"authorization_code", "refresh_token"}, "token_endpoint_auth_method": "none"})
	if st != 201 || reg["token_endpoint_auth_method"] != "none" {
		t.Fatalf("register: %d %v", st, reg)
	}
	return &oauth2.Config{ClientID: reg["client_id"].(string), RedirectURL: e.callback, Scopes: scopes,
		Endpoint: oauth2.Endpoint{AuthURL: asm.AuthorizationEndpoint, TokenURL: asm.TokenEndpoint, AuthStyle: oauth2.AuthStyleInParams}}
}

// browser is a person's browser without JavaScript: a cookie jar that
// stops at the client's redirect URI.
type browser struct {
	*http.Client
	e *env
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	cb, _ := url.Parse(e.callback)
	return &browser{e: e, Client: &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Host == cb.Host {
			return http.ErrUseLastResponse
		}
		return nil
	}}}
}

func (b *browser) get(t *testing.T, u string) (int, string, *http.Response) {
	t.Helper()
	resp, err := b.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp
}

func (b *browser) signIn(t *testing.T) (int, string, *http.Response) {
	t.Helper()
	token, _, err := b.e.Service().Accounts.MintSignIn(context.Background(), b.e.human.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	link := b.e.Service().SignInURL(token)
	_, body, _ := b.get(t, link)
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the sign-in link shows no confirm form:\n%s", body)
	}
	// The confirm page's button spends the link; the redirect is followed.
	resp, err := b.PostForm(link, url.Values{"csrf": {m[1]}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(page), resp
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// decide posts the consent form of the page last shown.
func (b *browser) decide(t *testing.T, page *http.Response, body string, decision string, scopes ...string) *http.Response {
	t.Helper()
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no form token on %s", page.Request.URL)
	}
	form := url.Values{"csrf": {m[1]}, "decision": {decision}}
	for _, sc := range scopes {
		form.Set("scope_"+sc, "1")
	}
	req, _ := http.NewRequest("POST", page.Request.URL.String(), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.e.base)
	resp, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// authorize runs the person's side: open the authorization URL signed
// out (and see nothing), sign in, land on the consent page, decide. It
// returns the query the client's redirect URI receives.
func (e *env) authorize(t *testing.T, authURL, decision string, scopes ...string) url.Values {
	t.Helper()
	b := e.browser()
	st, body, _ := b.get(t, authURL)
	if st != 401 || !strings.Contains(body, "Sign in to continue") || strings.Contains(body, "Test Agent") {
		t.Fatalf("signed out, the consent page answered %d:\n%s", st, body)
	}
	st, body, page := b.signIn(t)
	if st != 200 || !strings.Contains(page.Request.URL.Path, "/oauth/consent/") || !strings.Contains(body, "Allow Test Agent") {
		t.Fatalf("after sign-in: %d at %s:\n%s", st, page.Request.URL, body)
	}
	if strings.Contains(body, `name="scope_buy_domain" value="1" checked`) {
		t.Fatal("buy_domain is ticked before the person ticks it")
	}
	resp := b.decide(t, page, body, decision, scopes...)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("decision answered %d", resp.StatusCode)
	}
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if got := loc.Scheme + "://" + loc.Host + loc.Path; got != e.callback {
		t.Fatalf("redirected to %s", loc)
	}
	return loc.Query()
}

// mcpCall posts one JSON-RPC message to /mcp with the token, if any.
func (e *env) mcpCall(t *testing.T, token, method string, params any) (int, http.Header, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest("POST", e.MCPURL(), bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, resp.Header, out
}

// tool calls a tool and returns its envelope and whether it is an error.
func (e *env) tool(t *testing.T, token, name string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	st, _, out := e.mcpCall(t, token, "tools/call", map[string]any{"name": name, "arguments": args})
	res, ok := out["result"].(map[string]any)
	if st != 200 || !ok {
		t.Fatalf("tools/call %s: %d %v", name, st, out)
	}
	env, _ := res["structuredContent"].(map[string]any)
	return env, res["isError"] == true
}

func (e *env) rest(t *testing.T, token, method, path string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, e.base+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// refused checks that a token no longer authenticates on either door, and
// that /mcp asks the client to sign in again.
func (e *env) refused(t *testing.T, token string) {
	t.Helper()
	st, h, _ := e.mcpCall(t, token, "ping", nil)
	if c := h.Get("WWW-Authenticate"); st != 401 || !strings.Contains(c, `error="invalid_token"`) || !strings.Contains(c, `resource_metadata="`+e.base+`/.well-known/oauth-protected-resource"`) {
		t.Errorf("/mcp with a dead token: %d %q", st, c)
	}
	if st, out := e.rest(t, token, "GET", "/v1/projects"); st != 401 || out["blockedBy"] != "auth:invalid_credentials" {
		t.Errorf("REST with a dead token: %d %v", st, out)
	}
}

func tokenError(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// postForm calls the token or revocation endpoint directly, for what
// x/oauth2 does not do.
func (e *env) postForm(t *testing.T, path string, form url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := http.PostForm(e.base+path, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// From discovery through registration, consent, code exchange and refresh,
// with golang.org/x/oauth2 as the client; the token then works on both
// doors with the scopes the person chose.
func TestAuthorizationCodeFlow(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		e := start(t, db)
		ctx := context.Background()

		prm := e.metadataAdvertisesTheFlow(t)

		conf := e.client(t, "read", "quote", "buy_domain")
		verifier := oauth2.GenerateVerifier()
		authURL := conf.AuthCodeURL("st4te", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", prm.Resource))
		// The person grants read and quote, and leaves buy_domain unticked.
		q := e.authorize(t, authURL, "approve", "read", "quote")
		if q.Get("state") != "st4te" || q.Get("iss") != e.base || q.Get("code") == "" {
			t.Fatalf("callback: %v", q)
		}
		tok, err := conf.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(tok.AccessToken, oauth.AccessTokenPrefix) || !strings.HasPrefix(tok.RefreshToken, oauth.RefreshTokenPrefix) ||
			tok.Extra("scope") != "read quote" || tok.TokenType != "Bearer" || time.Until(tok.Expiry) < 50*time.Minute {
			t.Fatalf("token: %+v scope %v", tok, tok.Extra("scope"))
		}

		e.onlyHashesStored(t, tok)

		quote := map[string]any{"projectId": e.project, "items": []any{map[string]any{"kind": "domain", "domain": "lovelace-engine.dev"}}}
		e.tokenActsForTheOrganisation(t, tok.AccessToken, quote)

		// Refresh rotates: a new pair, and the old refresh token is spent.
		ts := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken})
		tok2, err := ts.Token()
		if err != nil {
			t.Fatal(err)
		}
		if tok2.RefreshToken == tok.RefreshToken || tok2.AccessToken == tok.AccessToken || tok2.Extra("scope") != "read quote" {
			t.Fatalf("refresh did not rotate: %+v", tok2)
		}
		if _, isErr := e.tool(t, tok2.AccessToken, "list_projects", map[string]any{}); isErr {
			t.Fatal("the refreshed token does not work")
		}

		// A refresh may narrow the scopes: a read-only token cannot quote.
		st, narrowed := e.postForm(t, "/oauth/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {conf.ClientID},
			"refresh_token": {tok2.RefreshToken}, "scope": {"read"}})
		if st != 200 || narrowed["scope"] != "read" {
			t.Fatalf("narrowing refresh: %d %v", st, narrowed)
		}
		got, isErr := e.tool(t, narrowed["access_token"].(string), "create_quote", quote)
		if !isErr || got["blockedBy"] != "auth:insufficient_scope" {
			t.Fatalf("a read-only token quoted: %v", got)
		}
		// Nor can it widen them again.
		if st, out := e.postForm(t, "/oauth/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {conf.ClientID},
			"refresh_token": {narrowed["refresh_token"].(string)}, "scope": {"read buy_domain"}}); st != 400 || out["error"] != "invalid_scope" {
			t.Fatalf("widening refresh: %d %v", st, out)
		}

		// Replaying a spent refresh token revokes the whole family.
		_, err = conf.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
		if tokenError(err) != "invalid_grant" {
			t.Fatalf("replayed refresh token: %v", err)
		}
		e.refused(t, tok.AccessToken)
		e.refused(t, tok2.AccessToken)
		e.refused(t, narrowed["access_token"].(string))
		if _, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: narrowed["refresh_token"].(string)}).Token(); tokenError(err) != "invalid_grant" {
			t.Fatalf("the newest refresh token survived the replay: %v", err)
		}

		e.ledgerRecordsConsentAndRevocation(t)
	})
}

// metadataAdvertisesTheFlow wants the protected resource and the
// authorization server to describe the flow a client needs: S256, no
// client secret, dynamic registration. It answers the resource metadata.
func (e *env) metadataAdvertisesTheFlow(t *testing.T) oauth.ProtectedResourceMetadata {
	t.Helper()
	prm, asm := e.discover(t)
	if prm.Resource != e.MCPURL() || len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != e.base ||
		strings.Join(prm.ScopesSupported, " ") != "read quote launch buy_domain" {
		t.Fatalf("protected resource metadata: %+v", prm)
	}
	if asm.Issuer != e.base || strings.Join(asm.CodeChallengeMethodsSupported, " ") != "S256" ||
		strings.Join(asm.TokenEndpointAuthMethodsSupported, " ") != "none" || asm.RegistrationEndpoint != e.base+"/oauth/register" {
		t.Fatalf("authorization server metadata: %+v", asm)
	}
	return prm
}

// Only hashes of the tokens are stored.
func (e *env) onlyHashesStored(t *testing.T, tok *oauth2.Token) {
	t.Helper()
	db2 := e.Store().DB()
	for _, secret := range []string{tok.AccessToken, tok.RefreshToken} {
		var n int
		if err := db2.QueryRow(`SELECT COUNT(*) FROM oauth_tokens WHERE token_hash = '` + auth.HashKey(secret) + `'`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("hash of the token stored %d times (%v)", n, err)
		}
		if err := db2.QueryRow(`SELECT COUNT(*) FROM oauth_tokens WHERE token_hash = '` + secret + `'`).Scan(&n); err != nil || n != 0 {
			t.Fatal("a token is stored in the clear")
		}
	}
}

// The token calls an MCP tool and a REST operation, as the organisation
// the person signed in to.
func (e *env) tokenActsForTheOrganisation(t *testing.T, access string, quote map[string]any) {
	t.Helper()
	if st, _, out := e.mcpCall(t, access, "initialize", map[string]any{"protocolVersion": "2025-03-26", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}); st != 200 || out["result"] == nil {
		t.Fatalf("initialize with the token: %d %v", st, out)
	}
	got, isErr := e.tool(t, access, "list_projects", map[string]any{})
	if isErr || !strings.Contains(mustJSON(got), e.project) {
		t.Fatalf("list_projects over MCP: %v", got)
	}
	st, out := e.rest(t, access, "GET", "/v1/projects")
	if st != 200 || !strings.Contains(mustJSON(out), e.project) {
		t.Fatalf("GET /v1/projects: %d %v", st, out)
	}
	got, _ = e.tool(t, access, "create_quote", quote)
	if b, _ := got["blockedBy"].(string); strings.HasPrefix(b, "auth:") {
		t.Fatalf("create_quote with the quote scope did not reach the operation: %v", got)
	}
}

// The organisation's chain records the consent and the revocation.
func (e *env) ledgerRecordsConsentAndRevocation(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	entries, err := e.Store().Ledger().Entries(ctx, e.org.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if b := ledger.Verify(entries); b != nil {
		t.Fatal(b)
	}
	var actions []string
	for _, en := range entries {
		actions = append(actions, en.Action)
	}
	joined := strings.Join(actions, " ")
	if !strings.Contains(joined, "authorize_oauth_client") || !strings.Contains(joined, "revoke_oauth_grant") {
		t.Fatalf("ledger: %v", actions)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// PKCE is S256 only; every other shape of request is refused, back at the
// client when its redirect URI can be trusted and on the page otherwise.
func TestAuthorizationRequestsRefused(t *testing.T) {
	e := start(t, "")
	conf := e.client(t, "read")
	verifier := oauth2.GenerateVerifier()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	base := url.Values{"response_type": {"code"}, "client_id": {conf.ClientID}, "redirect_uri": {e.callback}, "state": {"s1"},
		"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}, "resource": {e.MCPURL()}}
	with := func(change func(q url.Values)) url.Values {
		q := url.Values{}
		for k, v := range base {
			q[k] = append([]string(nil), v...)
		}
		change(q)
		return q
	}
	get := func(q url.Values) (*http.Response, string) {
		resp, err := noFollow.Get(e.base + "/oauth/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, tc := range []struct {
		name  string
		query url.Values
		err   string
	}{
		{"no code_challenge", with(func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") }), "invalid_request"},
		{"plain", with(func(q url.Values) { q.Set("code_challenge", verifier); q.Set("code_challenge_method", "plain") }), "invalid_request"},
		{"challenge without a method (plain by default)", with(func(q url.Values) { q.Del("code_challenge_method") }), "invalid_request"},
		{"malformed challenge", with(func(q url.Values) { q.Set("code_challenge", "short") }), "invalid_request"},
		{"implicit grant", with(func(q url.Values) { q.Set("response_type", "token") }), "unsupported_response_type"},
		{"unknown scope", with(func(q url.Values) { q.Set("scope", "read admin") }), "invalid_scope"},
		{"another resource", with(func(q url.Values) { q.Set("resource", "https://elsewhere.example/mcp") }), "invalid_target"},
	} {
		resp, _ := get(tc.query)
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != 302 || !strings.HasPrefix(loc.String(), e.callback) || loc.Query().Get("error") != tc.err ||
			loc.Query().Get("state") != "s1" || loc.Query().Get("iss") != e.base || loc.Query().Get("code") != "" {
			t.Errorf("%s: %d %s", tc.name, resp.StatusCode, loc)
		}
	}
	// An unknown client or redirect URI gets a page, never a redirect.
	for name, q := range map[string]url.Values{
		"unknown client":         with(func(q url.Values) { q.Set("client_id", "pcl_nobody") }),
		"unregistered redirect":  with(func(q url.Values) { q.Set("redirect_uri", "https://evil.example/cb") }),
		"redirect on other path": with(func(q url.Values) { q.Set("redirect_uri", strings.TrimSuffix(e.callback, "callback")+"other") }),
	} {
		resp, body := get(q)
		if resp.StatusCode != 400 || resp.Header.Get("Location") != "" || !strings.Contains(body, "not valid") {
			t.Errorf("%s: %d %q", name, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	// A loopback redirect URI matches on any port (RFC 8252 §7.3).
	other := strings.Replace(e.callback, e.callback[strings.LastIndex(e.callback, ":"):strings.LastIndex(e.callback, "/")], ":1", 1)
	if resp, _ := get(with(func(q url.Values) { q.Set("redirect_uri", other) })); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("loopback on another port: %d", resp.StatusCode)
	}

	e.tokenEndpointRefusesBadExchanges(t, conf, verifier)

	// Codes are short-lived.
	ctx := context.Background()
	code := e.authorize(t, conf.AuthCodeURL("s3", oauth2.S256ChallengeOption(verifier)), "approve", "read").Get("code")
	e.clock.Advance(oauth.CodeTTL + time.Second)
	if _, err := conf.Exchange(ctx, code, oauth2.VerifierOption(verifier)); tokenError(err) != "invalid_grant" {
		t.Errorf("expired code: %v", err)
	}

	// A denial goes back as access_denied.
	q := e.authorize(t, conf.AuthCodeURL("s4", oauth2.S256ChallengeOption(verifier)), "deny")
	if q.Get("error") != "access_denied" || q.Get("state") != "s4" || q.Get("code") != "" {
		t.Errorf("denied: %v", q)
	}
}

// At the token endpoint: a wrong or missing verifier, another redirect
// URI or another resource is refused; the right verifier works once, and
// a second exchange of the code revokes what the first bought.
func (e *env) tokenEndpointRefusesBadExchanges(t *testing.T, conf *oauth2.Config, verifier string) {
	t.Helper()
	authURL := conf.AuthCodeURL("s2", oauth2.S256ChallengeOption(verifier))
	code := e.authorize(t, authURL, "approve", "read").Get("code")
	ctx := context.Background()
	if _, err := conf.Exchange(ctx, code); tokenError(err) != "invalid_request" {
		t.Errorf("no verifier: %v", err)
	}
	if _, err := conf.Exchange(ctx, code, oauth2.VerifierOption(oauth2.GenerateVerifier())); tokenError(err) != "invalid_grant" {
		t.Errorf("wrong verifier: %v", err)
	}
	if st, out := e.postForm(t, "/oauth/token", url.Values{"grant_type": {"authorization_code"}, "client_id": {conf.ClientID}, "code": {code},
		"code_verifier": {verifier}, "redirect_uri": {"https://evil.example/cb"}}); st != 400 || out["error"] != "invalid_grant" {
		t.Errorf("another redirect_uri: %d %v", st, out)
	}
	if st, out := e.postForm(t, "/oauth/token", url.Values{"grant_type": {"authorization_code"}, "client_id": {conf.ClientID}, "code": {code},
		"code_verifier": {verifier}, "resource": {"https://elsewhere.example/mcp"}}); st != 400 || out["error"] != "invalid_target" {
		t.Errorf("another resource: %d %v", st, out)
	}
	// The right verifier still works once; a second exchange of the code
	// revokes what the first bought.
	tok, err := conf.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conf.Exchange(ctx, code, oauth2.VerifierOption(verifier)); tokenError(err) != "invalid_grant" {
		t.Errorf("second exchange: %v", err)
	}
	e.refused(t, tok.AccessToken)
}

func TestRegistration(t *testing.T) {
	e := start(t, "")
	for _, tc := range []struct {
		meta map[string]any
		err  string
	}{
		{map[string]any{"redirect_uris": []string{"https://app.example/cb"}, "token_endpoint_auth_method": "client_secret_basic"}, ""},
		{map[string]any{"redirect_uris": []string{"http://127.0.0.1/cb", "http://[::1]:8000/cb", "http://localhost:3/cb"}}, ""},
		{map[string]any{"redirect_uris": []string{}}, "invalid_redirect_uri"},
		{map[string]any{"redirect_uris": []string{"http://app.example/cb"}}, "invalid_redirect_uri"},
		{map[string]any{"redirect_uris": []string{"myapp://cb"}}, "invalid_redirect_uri"},
		{map[string]any{"redirect_uris": []string{"https://app.example/cb#frag"}}, "invalid_redirect_uri"},
		{map[string]any{"redirect_uris": []string{"/cb"}}, "invalid_redirect_uri"},
		{map[string]any{"redirect_uris": []string{"https://app.example/cb"}, "grant_types": []string{"client_credentials"}}, "invalid_client_metadata"},
		{map[string]any{"redirect_uris": []string{"https://app.example/cb"}, "response_types": []string{"token"}}, "invalid_client_metadata"},
		{map[string]any{"redirect_uris": []string{"https://app.example/cb"}, "scope": "read admin"}, "invalid_client_metadata"},
	} {
		st, out := e.register(t, tc.meta)
		switch {
		case tc.err == "" && (st != 201 || out["token_endpoint_auth_method"] != "none" || !strings.HasPrefix(out["client_id"].(string), "pcl_")):
			t.Errorf("%v: %d %v", tc.meta, st, out)
		case tc.err != "" && (st != 400 || out["error"] != tc.err):
			t.Errorf("%v: %d %v, want %s", tc.meta, st, out, tc.err)
		}
	}
}

// RFC 7009: revoking an access token ends it; revoking a refresh token
// ends the grant.
func TestRevocation(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		e := start(t, db)
		ctx := context.Background()
		conf := e.client(t, "read")
		verifier := oauth2.GenerateVerifier()
		code := e.authorize(t, conf.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier)), "approve", "read").Get("code")
		tok, err := conf.Exchange(ctx, code, oauth2.VerifierOption(verifier))
		if err != nil {
			t.Fatal(err)
		}
		other := e.client(t, "read")
		if st, out := e.postForm(t, "/oauth/revoke", url.Values{"token": {tok.AccessToken}, "client_id": {other.ClientID}}); st != 400 || out["error"] != "unauthorized_client" {
			t.Fatalf("another client revoked the token: %d %v", st, out)
		}
		if st, _ := e.postForm(t, "/oauth/revoke", url.Values{"token": {tok.AccessToken}, "client_id": {conf.ClientID}, "token_type_hint": {"access_token"}}); st != 200 {
			t.Fatalf("revoke: %d", st)
		}
		e.refused(t, tok.AccessToken)
		tok2, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
		if err != nil {
			t.Fatalf("the refresh token died with its access token: %v", err)
		}
		if _, isErr := e.tool(t, tok2.AccessToken, "list_projects", map[string]any{}); isErr {
			t.Fatal("the new token does not work")
		}
		if st, _ := e.postForm(t, "/oauth/revoke", url.Values{"token": {tok2.RefreshToken}, "client_id": {conf.ClientID}}); st != 200 {
			t.Fatalf("revoke: %d", st)
		}
		e.refused(t, tok2.AccessToken)
		if _, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: tok2.RefreshToken}).Token(); tokenError(err) != "invalid_grant" {
			t.Fatalf("refresh after revocation: %v", err)
		}
		if st, _ := e.postForm(t, "/oauth/revoke", url.Values{"token": {"prt_unknown"}, "client_id": {conf.ClientID}}); st != 200 {
			t.Fatalf("revoking an unknown token: %d", st)
		}
	})
}

// A token issued for another audience is refused on both doors, even
// though this server's store holds it.
func TestWrongAudience(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		e := start(t, db)
		ctx := context.Background()
		elsewhere := oauth.New(oauth.Config{Store: e.Store(), Now: e.clock.Now, Issuer: func() string { return e.base },
			Resource: func() string { return "https://elsewhere.example/mcp" }})
		reg, err := elsewhere.Register(ctx, oauth.ClientMetadata{ClientName: "Elsewhere", RedirectURIs: []string{e.callback}})
		if err != nil {
			t.Fatal(err)
		}
		verifier := oauth2.GenerateVerifier()
		id, err := elsewhere.Authorize(ctx, url.Values{"response_type": {"code"}, "client_id": {reg.ClientID}, "redirect_uri": {e.callback},
			"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}, "resource": {"https://elsewhere.example/mcp"}})
		if err != nil {
			t.Fatal(err)
		}
		redirect, err := elsewhere.Decide(ctx, id, e.org.ID, e.human.ID, true, []string{"read"})
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(redirect)
		tok, err := elsewhere.Token(ctx, url.Values{"grant_type": {"authorization_code"}, "client_id": {reg.ClientID}, "code": {u.Query().Get("code")},
			"code_verifier": {verifier}, "redirect_uri": {e.callback}})
		if err != nil {
			t.Fatal(err)
		}
		if p, err := elsewhere.Authenticate(ctx, tok.AccessToken); err != nil || p.OrgID != e.org.ID {
			t.Fatalf("the token does not work where it was meant to: %v", err)
		}
		e.refused(t, tok.AccessToken)
		// And this server's token endpoint will not mint one for it.
		if st, out := e.postForm(t, "/oauth/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {reg.ClientID},
			"refresh_token": {tok.RefreshToken}, "resource": {"https://elsewhere.example/mcp"}}); st != 400 || out["error"] != "invalid_target" {
			t.Fatalf("minting for another audience: %d %v", st, out)
		}
	})
}

// An access token is an agent's credential: it never opens a human page
// or decides anything there.
func TestTokenIsNeverAHuman(t *testing.T) {
	e := start(t, "")
	ctx := context.Background()
	conf := e.client(t, "read", "quote", "launch", "buy_domain")
	verifier := oauth2.GenerateVerifier()
	code := e.authorize(t, conf.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier)), "approve", "read", "quote", "launch", "buy_domain").Get("code")
	tok, err := conf.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Extra("scope") != "read quote launch buy_domain" {
		t.Fatalf("ticked buy_domain not granted: %v", tok.Extra("scope"))
	}
	// A pending authorization request another client started.
	pending := conf.AuthCodeURL("s2", oauth2.S256ChallengeOption(verifier))
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get(pending)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	consent := e.base + resp.Header.Get("Location")
	for _, tc := range []struct{ method, url string }{
		{"GET", e.base + "/dashboard"},
		{"GET", e.base + "/keys"},
		{"GET", consent},
		{"POST", consent},
		{"GET", pending},
		{"POST", e.base + "/approvals/gat_x"},
	} {
		req, _ := http.NewRequest(tc.method, tc.url, strings.NewReader("decision=approve&scope_read=1"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || !strings.Contains(string(body), "auth:agent_authority_refused") {
			t.Errorf("%s %s with a token: %d", tc.method, tc.url, resp.StatusCode)
		}
	}
	// The request is still pending: nothing above decided it.
	id := consent[strings.LastIndex(consent, "/")+1:]
	a, err := e.Store().OAuth().Authorization(ctx, id)
	if err != nil || a.Status != "pending" {
		t.Fatalf("authorization %v %v", a.Status, err)
	}
}

// Access tokens and waiting requests expire on the server's clock.
func TestExpiry(t *testing.T) {
	e := start(t, "")
	ctx := context.Background()
	conf := e.client(t, "read")
	verifier := oauth2.GenerateVerifier()
	code := e.authorize(t, conf.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier)), "approve", "read").Get("code")
	tok, err := conf.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(oauth.AccessTTL)
	e.refused(t, tok.AccessToken)
	// The refresh token outlives it.
	tok2, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
	if err != nil {
		t.Fatal(err)
	}
	if _, isErr := e.tool(t, tok2.AccessToken, "list_projects", map[string]any{}); isErr {
		t.Fatal("refreshed token refused")
	}
	// A consent page left open too long cannot be approved.
	b := e.browser()
	b.signIn(t)
	st, body, page := b.get(t, conf.AuthCodeURL("s2", oauth2.S256ChallengeOption(verifier)))
	if st != 200 {
		t.Fatalf("consent: %d", st)
	}
	e.clock.Advance(oauth.RequestTTL)
	if resp := b.decide(t, page, body, "approve", "read"); resp.StatusCode != 410 && resp.StatusCode != 409 {
		t.Fatalf("late approval answered %d", resp.StatusCode)
	}
}
