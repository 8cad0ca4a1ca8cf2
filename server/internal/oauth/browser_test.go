package oauth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// browserTools finds node, Chromium and playwright-core. Missing ones skip
// the test, unless CI=true or PIER_TEST_BROWSER=require.
func browserTools(t *testing.T) (node, chromium, tools string) {
	t.Helper()
	miss := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" || os.Getenv("PIER_TEST_BROWSER") == "require" {
			t.Fatalf(format+" (required: CI=true or PIER_TEST_BROWSER=require)", args...)
		}
		t.Skipf(format+"; skipping (set PIER_TEST_BROWSER=require to fail instead)", args...)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		miss("node is not installed")
	}
	chromium = os.Getenv("PIER_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		miss("no Chromium at %s", chromium)
	}
	wd, _ := os.Getwd()
	tools = filepath.Join(wd, "..", "..", "..", "tools")
	if _, err := os.Stat(filepath.Join(tools, "node_modules", "playwright-core", "package.json")); err != nil {
		miss("playwright-core is not installed under tools/ (npm ci --prefix tools)")
	}
	return node, chromium, tools
}

// The whole sign-in as an MCP client's user lives it: x/oauth2 registers
// and builds the authorization URL, a person consents in headless
// Chromium, and the code the browser carries back buys a token that calls
// a tool and a REST operation with the scopes the person chose.
func TestConsentInBrowser(t *testing.T) {
	node, chromium, tools := browserTools(t)
	e := start(t, "")
	ctx := context.Background()
	prm, asm := e.discover(t)
	st, reg := e.register(t, map[string]any{"client_name": "Browser Agent", "redirect_uris": []string{e.callback}})
	if st != 201 {
		t.Fatalf("register: %d %v", st, reg)
	}
	conf := &oauth2.Config{ClientID: reg["client_id"].(string), RedirectURL: e.callback, Scopes: []string{"read", "quote", "launch", "buy_domain"},
		Endpoint: oauth2.Endpoint{AuthURL: asm.AuthorizationEndpoint, TokenURL: asm.TokenEndpoint, AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	authURL := conf.AuthCodeURL("br0wser", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", prm.Resource))
	token, _, err := e.Service().Accounts.MintSignIn(ctx, e.human.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	artifacts := os.Getenv("PIER_BROWSER_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	os.MkdirAll(artifacts, 0o755)

	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, node, filepath.Join("testdata", "consent.mjs"))
	cmd.Env = append(os.Environ(), "PIER_TOOLS="+tools, "PIER_CHROMIUM="+chromium, "PIER_AUTH_URL="+authURL,
		"PIER_SIGNIN_URL="+e.Service().SignInURL(token), "PIER_CALLBACK="+e.callback, "PIER_ARTIFACTS="+artifacts)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var out struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
		URL   string `json:"url"`
		Text  string `json:"text"`
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &out); err != nil || runErr != nil || !out.OK {
		t.Fatalf("consent.mjs: %v\n%s\n%s", runErr, stdout.String(), stderr.String())
	}
	if !strings.Contains(out.Text, "close this window") {
		t.Errorf("the browser did not load the callback: %q", out.Text)
	}
	back, _ := url.Parse(out.URL)
	q := back.Query()
	if q.Get("state") != "br0wser" || q.Get("iss") != e.base {
		t.Fatalf("callback: %v", q)
	}
	tok, err := conf.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Extra("scope") != "read quote" {
		t.Fatalf("granted %v, want what the person left ticked", tok.Extra("scope"))
	}
	if got, isErr := e.tool(t, tok.AccessToken, "list_projects", map[string]any{}); isErr || !strings.Contains(mustJSON(got), e.project) {
		t.Fatalf("list_projects: %v", got)
	}
	if st, out := e.rest(t, tok.AccessToken, "GET", "/v1/projects/"+e.project); st != 200 {
		t.Fatalf("GET project: %d %v", st, out)
	}
	// Refresh through x/oauth2's token source once the token is stale.
	tok.Expiry = time.Now().Add(-time.Minute)
	fresh, err := conf.TokenSource(ctx, tok).Token()
	if err != nil || fresh.AccessToken == tok.AccessToken {
		t.Fatalf("refresh: %v", err)
	}
	if _, isErr := e.tool(t, fresh.AccessToken, "list_projects", map[string]any{}); isErr {
		t.Fatal("refreshed token refused")
	}
}

// The official MCP TypeScript client, with an auth provider, is sent to
// sign in by the 401 of a governed tool, discovers and registers on its
// own, and after consent calls the tool with its token.
func TestTypeScriptClientSignsIn(t *testing.T) {
	node, err := exec.LookPath("node")
	wd, _ := os.Getwd()
	tools := filepath.Join(wd, "..", "..", "..", "tools")
	if _, serr := os.Stat(filepath.Join(tools, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil || serr != nil {
		if os.Getenv("CI") == "true" || os.Getenv("PIER_TEST_NODE") == "require" {
			t.Fatalf("node or @modelcontextprotocol/sdk in tools/ is missing: %v %v", err, serr)
		}
		t.Skip("node or @modelcontextprotocol/sdk in tools/ is missing (set PIER_TEST_NODE=require to fail instead)")
	}
	e := start(t, "")
	token, _, err := e.Service().Accounts.MintSignIn(context.Background(), e.human.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "mcp_client.mjs"))
	cmd.Env = append(os.Environ(), "PIER_TOOLS="+tools, "PIER_MCP_URL="+e.MCPURL(), "PIER_SIGNIN_URL="+e.Service().SignInURL(token))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("mcp_client.mjs: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var out struct {
		AuthURL      string `json:"authURL"`
		Scope        string `json:"scope"`
		ListProjects struct {
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"listProjects"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	u, _ := url.Parse(out.AuthURL)
	q := u.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("resource") != e.MCPURL() || !strings.HasPrefix(out.AuthURL, e.base+"/oauth/authorize?") {
		t.Errorf("authorization URL: %s", out.AuthURL)
	}
	if out.Scope != "read quote launch" {
		t.Errorf("granted %q", out.Scope)
	}
	if out.ListProjects.IsError || !strings.Contains(mustJSON(out.ListProjects.StructuredContent), e.project) {
		t.Errorf("list_projects after sign-in: %+v", out.ListProjects)
	}
}
