package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/pierhq/pier/cli"
	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
)

// hintLine finds the pier commands the CLI prints as next steps: "→ pier …"
// in an answer's Next list, and "Next: pier …" lines with their indented
// continuations.
var hintLine = regexp.MustCompile(`(?m)^\s*(?:→ |Next: )?(?:[a-z]+: )?(pier [^\n]*?)(?:  \(|$)`)

// placeholder marks a value the reader fills in, such as <PROJECT-ID>.
var placeholder = regexp.MustCompile(`<([A-Z0-9-]+)>`)

// splitWords splits a hint as a POSIX shell would, for the quoting the CLI
// prints: single quotes and plain words.
func splitWords(t *testing.T, s string) []string {
	var out []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted && c == '\'':
			quoted = false
		case quoted:
			cur.WriteByte(c)
		case c == '\'':
			quoted, inWord = true, true
		case c == ' ':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quote in hint %q", s)
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// TestEveryHintRuns drives the common scenarios through the CLI against a
// real server (search, estimate, projects, quotes, launch with and
// without a human gate, services, tasks, teardown, export, the sandbox,
// and errors), collects every pier command printed as a next step, fills
// in only the placeholders it marks, runs it, and requires that none is a
// usage error (exit 2).
func TestEveryHintRuns(t *testing.T) {
	dir := t.TempDir()
	s := testserver.Start(t, server.Config{DataDir: dir + "/data"})

	env := map[string]string{"PIER_BASE_URL": "http://" + s.Addr(), "PIER_DATA_DIR": dir + "/data", "NO_COLOR": "1", "PIER_CACHE_DIR": dir + "/cache"}
	run := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		f := cli.NewFactory(&cli.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		f.Getenv = func(k string) string { return env[k] }
		code := cli.Run(f, args, server.NewCommands()...)
		return code, out.String() + errOut.String()
	}
	mustJSON := func(out string, v any) {
		t.Helper()
		if err := json.Unmarshal([]byte(strings.SplitN(out, "\n{", 2)[0]), v); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
	}
	code, out := run("admin", "create-key", "--data-dir", dir+"/data", "--scopes", "read,quote,launch", "--json")
	var key struct{ APIKey string }
	mustJSON(out, &key)
	if code != 0 || key.APIKey == "" {
		t.Fatalf("create-key: %d %s", code, out)
	}
	env["PIER_API_KEY"] = key.APIKey
	_, out = run("projects", "list", "--json")
	var projects struct {
		Data struct{ Projects []struct{ ID string } }
	}
	mustJSON(out, &projects)
	project := projects.Data.Projects[0].ID
	site := filepath.Join(dir, "site")
	os.MkdirAll(site, 0o755)
	os.WriteFile(filepath.Join(site, "index.html"), []byte("<h1>hints</h1>"), 0o644)

	// Values for the placeholders a hint may mark, by name.
	fill := map[string]string{
		"PROJECT-ID": project, "ID": project, "Q": "hinted", "NAME": "hinted", "WORKLOAD": "static_site", "TARGET": "edge",
		"ITEMS": `[{"kind":"service","target":"edge","workload":"static_site","name":"hinted"}]`, "DOMAIN": "hinted.dev",
		"BUNDLE-ID": "bnd_none", "QUOTE-ID": "quo_none", "MANDATE": "x.y.z", "REGISTRATION-SECRET": "sbr_none",
		"SCENARIO": "allowed", "KEY-FILE": filepath.Join(dir, "holder.jwk"), "CAPABILITY": "sbx_none", "ATTEMPT-JSON": filepath.Join(dir, "attempt.json"), "DECISION": "x.y.z", "GATE-ID": "gat_none", "PROOF-ID": "sbp_00000000000000000000", "AMOUNT-USD": "1", "REASON": "hinted",
		"SERVICE-ID": "svc_none", "ADDRESS": "hinted@hintsmail0.dev",
	}

	scenarios := [][]string{
		{"domains", "search", "acme"},
		{"domains", "search", "acme", "--include-exotic"},
		{"estimate", "--workload", "static_site"},
		{"whoami"},
		{"projects", "list"},
		{"projects", "get", project},
		{"quotes", "create", "--project", project, "--items", `[{"kind":"domain","domain":"hintsquote.dev","years":1}]`},
		{"launch", site, "--project", project, "--name", "first"},
		{"launch", site, "--project", project, "--name", "gated", "--domain", "hintsgate0.dev"},
		{"services", "list"},
		{"tasks", "list"},
		{"bundles", "list"},
		{"quotes", "list"},
		{"domains", "list"},
		{"projects", "get", "prj_nope"},
		{"tasks", "get", "tsk_nope"},
		{"sandbox", "sessions", "create"},
		{"export", project, "--out", filepath.Join(dir, "leave")},
	}
	seen := map[string]bool{}
	var hints []string
	collect := func(out string) {
		for _, m := range hintLine.FindAllStringSubmatch(out, -1) {
			h := strings.TrimSpace(m[1])
			if !seen[h] {
				seen[h] = true
				hints = append(hints, h)
			}
		}
	}
	for _, sc := range scenarios {
		code, out := run(sc...)
		if code == 2 {
			t.Errorf("scenario %v is itself a usage error:\n%s", sc, out)
		}
		collect(out)
	}
	for _, out := range domainScenarios(t, dir, s.DNSAddr(), project, site, run) {
		collect(out)
	}
	// Tear the first service down through its hint's command too.
	_, out = run("services", "list", "--json")
	var svcs struct {
		Data struct{ Services []struct{ ID string } }
	}
	mustJSON(out, &svcs)
	for _, sv := range svcs.Data.Services {
		_, out := run("services", "teardown", sv.ID)
		collect(out)
	}
	if len(hints) < 10 {
		t.Fatalf("only %d hints printed: %v", len(hints), hints)
	}
	ran := 0
	for _, h := range hints {
		filled := placeholder.ReplaceAllStringFunc(h, func(p string) string {
			name := p[1 : len(p)-1]
			if v, ok := fill[name]; ok {
				return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
			}
			t.Errorf("hint %q marks a placeholder %s the test has no value for", h, p)
			return "x"
		})
		words := splitWords(t, filled)
		if len(words) < 2 || words[0] != "pier" {
			continue
		}
		code, out := run(append(words[1:], "--no-wait")...)
		ran++
		if code == 2 {
			t.Errorf("hint %q exits 2 (a usage error):\n%s", h, out)
		}
	}
	t.Logf("ran %d hints", ran)
}

// domainScenarios drives a domain through its life with a key that may buy
// domains: bought by a launch, mail set up on it, its site torn down (the
// mail records stay in DNS, and the receipt says so), launched on again
// with no quote (it is owned), refused to another service while one holds
// it (the answer names the holder and the commands that move it),
// detached, and launched on once more by a service of an existing name
// (attached first). Every step's DNS is checked with real queries. It
// returns each step's output for its hints.
func domainScenarios(t *testing.T, dir, dnsAddr, project, site string, run func(args ...string) (int, string)) []string {
	t.Helper()
	var outs []string
	step := func(want int, args ...string) string {
		t.Helper()
		code, out := run(args...)
		if want >= 0 && code != want || want < 0 && code == 0 {
			t.Fatalf("%v: exit %d, want %d\n%s", args, code, want, out)
		}
		outs = append(outs, out)
		return out
	}
	jsonOf := func(out string, v any) {
		t.Helper()
		if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), v); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
	}
	count := func(name string, typ uint16) int {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), typ)
		in, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, dnsAddr)
		if err != nil {
			t.Fatal(err)
		}
		return len(in.Answer)
	}
	serviceNamed := func(name string) string {
		t.Helper()
		var l struct {
			Data struct {
				Services []struct{ ID, Name, State string }
			}
		}
		jsonOf(step(0, "services", "list", "--project", project, "--json"), &l)
		for _, s := range l.Data.Services {
			if s.Name == name && s.State == "live" {
				return s.ID
			}
		}
		t.Fatalf("no live service %s", name)
		return ""
	}
	const domain = "hintsmail0.dev"
	var key struct{ APIKey string }
	jsonOf(step(0, "admin", "create-key", "--data-dir", dir+"/data", "--scopes", "read,quote,launch,buy_domain", "--json"), &key)
	step(0, "launch", site, "--project", project, "--name", "mailsite", "--domain", domain, "--api-key", key.APIKey)
	var q struct{ Data struct{ QuoteID string } }
	jsonOf(step(0, "quotes", "create", "--project", project, "--items", `[{"kind":"email","domain":"`+domain+`"}]`, "--json"), &q)
	step(0, "email", "setup", domain, "--quote-id", q.Data.QuoteID)
	if count(domain, dns.TypeMX) != 1 || count(domain, dns.TypeA) != 1 {
		t.Fatalf("after email setup: MX %d, A %d", count(domain, dns.TypeMX), count(domain, dns.TypeA))
	}

	out := step(0, "services", "teardown", serviceNamed("mailsite"))
	if !strings.Contains(out, "mail_records:"+domain) {
		t.Fatalf("the teardown's receipt does not say the mail records were kept:\n%s", out)
	}
	if count(domain, dns.TypeMX) != 1 || count("_dmarc."+domain, dns.TypeTXT) != 1 || count("pier1._domainkey."+domain, dns.TypeTXT) != 1 || count(domain, dns.TypeA) != 0 {
		t.Fatalf("after teardown: MX %d, A %d", count(domain, dns.TypeMX), count(domain, dns.TypeA))
	}

	// Owned: the launch attaches it, with no quote.
	out = step(0, "launch", site, "--project", project, "--name", "second", "--domain", domain)
	if strings.Contains(out, "quoting") || !strings.Contains(out, "https://"+domain) || count(domain, dns.TypeA) != 1 || count(domain, dns.TypeMX) != 1 {
		t.Fatalf("launch on an owned domain:\n%s", out)
	}
	second := serviceNamed("second")
	step(0, "launch", site, "--project", project, "--name", "third")
	third := serviceNamed("third")

	out = step(-1, "domains", "attach", domain, third)
	if !strings.Contains(out, "conflict:domain_attached") || !strings.Contains(out, second) ||
		!strings.Contains(out, "pier domains detach "+domain) || !strings.Contains(out, "pier domains attach "+domain+" "+third) {
		t.Fatalf("attach of a held domain:\n%s", out)
	}
	out = step(0, "domains", "detach", domain)
	if !strings.Contains(out, "undo: pier domains attach "+domain+" "+second) || count(domain, dns.TypeA) != 0 || count(domain, dns.TypeMX) != 1 {
		t.Fatalf("detach:\n%s", out)
	}
	out = step(0, "domains", "attach", domain, second)
	if !strings.Contains(out, "undo: pier domains detach "+domain) || count(domain, dns.TypeA) != 1 {
		t.Fatalf("attach:\n%s", out)
	}
	step(0, "domains", "detach", domain)

	// A service of that name runs: the domain is attached to it first.
	step(0, "launch", site, "--project", project, "--name", "third", "--domain", domain)
	var d struct{ Data struct{ ServiceID string } }
	jsonOf(step(0, "domains", "get", domain, "--json"), &d)
	if d.Data.ServiceID != third || count(domain, dns.TypeA) != 1 || count(domain, dns.TypeMX) != 1 {
		t.Fatalf("relaunch of third with %s: it serves %q", domain, d.Data.ServiceID)
	}
	return outs
}
