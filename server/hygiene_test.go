package server_test

import (
	"github.com/pierhq/pier/server/internal/service"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/pierhq/pier/server"
)

// TestTextThatReadsAsSomethingElseIsRefused: invalid UTF-8 and bidi
// controls in a path, a query, or a name in a body, with input:invalid_text.
func TestTextThatReadsAsSomethingElseIsRefused(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.ProjectPolicy{}, "launch", "read", "quote")
	for name, r := range map[string]func() (int, string){
		"bidi in a bundle path": func() (int, string) {
			res := ts.Client.Do("POST", "/v1/bundles", uploadBody(a.project, map[string]string{"index\u202e.html": "x"}), a.header())
			return res.StatusCode, string(res.Body)
		},
		"escaped bidi in a service name": func() (int, string) {
			return raw(t, ts, "POST", "/v1/projects/"+a.project+"/launch", `{"name":"site\u2066","target":"edge","bundleId":"bnd_x"}`, a.header())
		},
		"invalid UTF-8 in a body": func() (int, string) {
			return raw(t, ts, "POST", "/v1/quotes", "{\"projectId\":\"prj_\xff\",\"items\":[]}", a.header())
		},
		"bidi in a query": func() (int, string) {
			return raw(t, ts, "GET", "/v1/domains/search?q="+url.QueryEscape("acme\u202e"), "", nil)
		},
		"invalid UTF-8 in a path": func() (int, string) {
			return raw(t, ts, "GET", "/v1/projects/prj_%ff", "", a.header())
		},
	} {
		code, body := r()
		if code != 400 || !strings.Contains(body, `"input:invalid_text"`) {
			t.Errorf("%s: %d %s", name, code, body)
		}
	}
}

func raw(t *testing.T, ts *testServer, method, path, body string, h http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+ts.Addr()+path, strings.NewReader(body))
	for k, v := range h {
		req.Header[k] = v
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k-"+strings.ReplaceAll(path, "/", "-"))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHTTPSHeadersAndCookies: over HTTPS the API and the human pages send
// HSTS, and the session cookie carries the __Host- prefix; over plain HTTP
// (local mode) neither.
func TestHTTPSHeadersAndCookies(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 1_000_000, service.ProjectPolicy{}, "read")
	c := httpsClient(ts)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, path := range []string{"/healthz", "/v1/projects", "/dashboard"} {
		resp, err := c.Get("https://localhost" + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if h := resp.Header.Get("Strict-Transport-Security"); !strings.Contains(h, "max-age=") {
			t.Errorf("HTTPS %s: Strict-Transport-Security %q", path, h)
		}
	}
	if resp, err := http.Get("http://" + ts.Addr() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.Header.Get("Strict-Transport-Security") != "" {
			t.Error("HSTS over plain HTTP")
		}
	}
	// Sign in over HTTPS: confirm page, then its button.
	link, _, err := ts.Service().Accounts.LocalOperatorSignIn(t.Context(), a.org, "")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link)
	secureLink := "https://localhost" + u.Path
	resp, err := c.Get(secureLink)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var formCookie *http.Cookie
	for _, ck := range resp.Cookies() {
		formCookie = ck
	}
	if formCookie == nil || !strings.HasPrefix(formCookie.Name, "__Host-") || !formCookie.Secure || formCookie.Path != "/" || formCookie.Domain != "" {
		t.Fatalf("form cookie over HTTPS: %+v", formCookie)
	}
	csrf := formField(string(page))
	req, _ := http.NewRequest("POST", secureLink, strings.NewReader(url.Values{"csrf": {csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(formCookie)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 303 {
		t.Fatalf("sign-in over HTTPS: %d", resp.StatusCode)
	}
	found := false
	for _, ck := range resp.Cookies() {
		if ck.Name == "__Host-pier_session" && ck.Value != "" {
			found = ck.Secure && ck.Path == "/" && ck.Domain == "" && ck.HttpOnly
		}
	}
	if !found {
		t.Fatalf("no __Host-pier_session cookie, Secure, HttpOnly, Path=/ and no Domain: %v", resp.Header.Values("Set-Cookie"))
	}
}

func formField(page string) string {
	const marker = `name="csrf" value="`
	i := strings.Index(page, marker)
	if i < 0 {
		return ""
	}
	rest := page[i+len(marker):]
	return rest[:strings.IndexByte(rest, '"')]
}
