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
	"github.com/pierhq/pier/cli/cmdutil"
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
// real server (search, estimate, whoami, projects, quotes, launch with and
// without a human gate, a process that never becomes healthy and its
// removal, services, tasks, teardown, export, the sandbox, domains that
// move, mail that outlives a site, and errors), collects every pier
// command printed as a next step, fills in only the placeholders it
// marks, runs it, and requires that none is a usage error (exit 2).
func TestEveryHintRuns(t *testing.T) {
	h := newHintRun(t)
	for _, sc := range h.scenarios() {
		code, out := h.run(sc.args...)
		if code == 2 || sc.exit >= 0 && code != sc.exit {
			t.Errorf("scenario %v exits %d, want %d:\n%s", sc.args, code, sc.exit, out)
		}
		h.collect(out)
	}
	for _, out := range domainScenarios(t, h.dir, h.dnsAddr, h.project, h.site, h.run) {
		h.collect(out)
	}
	for _, out := range h.childScenarios() {
		h.collect(out)
	}
	h.tearDownEveryService()
	if len(h.hints) < 10 {
		t.Fatalf("only %d hints printed: %v", len(h.hints), h.hints)
	}
	t.Logf("ran %d hints", h.runHints())
}

// hintRun is one server, a key and a project, and the hints collected
// from what the CLI printed.
type hintRun struct {
	t                           *testing.T
	dir, dnsAddr, project, site string
	env                         map[string]string
	seen                        map[string]bool
	hints                       []string
}

func newHintRun(t *testing.T) *hintRun {
	dir := t.TempDir()
	s := testserver.Start(t, server.Config{DataDir: dir + "/data"})
	h := &hintRun{t: t, dir: dir, dnsAddr: s.DNSAddr(), seen: map[string]bool{},
		env: map[string]string{"PIER_BASE_URL": "http://" + s.Addr(), "PIER_DATA_DIR": dir + "/data", "NO_COLOR": "1", "PIER_CACHE_DIR": dir + "/cache"}}
	code, out := h.run("admin", "create-key", "--data-dir", dir+"/data", "--scopes", "read,quote,launch", "--json")
	var key struct{ APIKey string }
	h.mustJSON(out, &key)
	if code != 0 || key.APIKey == "" {
		t.Fatalf("create-key: %d %s", code, out)
	}
	h.env["PIER_API_KEY"] = key.APIKey
	_, out = h.run("projects", "list", "--json")
	var projects struct {
		Data struct{ Projects []struct{ ID string } }
	}
	h.mustJSON(out, &projects)
	h.project = projects.Data.Projects[0].ID
	h.site = filepath.Join(dir, "site")
	os.MkdirAll(h.site, 0o755)
	os.WriteFile(filepath.Join(h.site, "index.html"), []byte("<h1>hints</h1>"), 0o644)
	return h
}

func (h *hintRun) run(args ...string) (int, string) {
	var out, errOut bytes.Buffer
	f := cmdutil.NewFactory(&cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	f.Getenv = func(k string) string { return h.env[k] }
	code := cli.Run(f, args, server.NewCommands()...)
	return code, out.String() + errOut.String()
}

func (h *hintRun) mustJSON(out string, v any) {
	h.t.Helper()
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n{", 2)[0]), v); err != nil {
		h.t.Fatalf("not JSON: %v\n%s", err, out)
	}
}

// hintScenario is one command and the exit code it must end with (-1:
// any but a usage error).
type hintScenario struct {
	args []string
	exit int
}

func (h *hintRun) scenarios() []hintScenario {
	p, site := h.project, h.site
	any := func(args ...string) hintScenario { return hintScenario{args, -1} }
	return []hintScenario{
		any("domains", "search", "acme"),
		any("domains", "search", "acme", "--include-exotic"),
		any("estimate", "--workload", "static_site"),
		{[]string{"whoami"}, 0},
		any("projects", "list"),
		any("projects", "get", p),
		any("quotes", "create", "--project", p, "--items", `[{"kind":"domain","domain":"hintsquote.dev","years":1}]`),
		{[]string{"launch", site, "--project", p, "--name", "first"}, 0},
		any("launch", site, "--project", p, "--name", "gated", "--domain", "hintsgate0.dev"),
		// A process that never becomes healthy: exit 10, with the way to
		// remove it (its teardown retires it from services list).
		{[]string{"launch", site, "--project", p, "--name", "broken", "--target", "process", "--run", "false", "--health-timeout", "2s"}, 10},
		any("services", "list"),
		any("tasks", "list"),
		any("bundles", "list"),
		any("quotes", "list"),
		any("domains", "list"),
		any("projects", "get", "prj_nope"),
		any("tasks", "get", "tsk_nope"),
		any("sandbox", "sessions", "create"),
		any("export", p, "--out", filepath.Join(h.dir, "leave")),
	}
}

func (h *hintRun) collect(out string) {
	for _, m := range hintLine.FindAllStringSubmatch(out, -1) {
		hint := strings.TrimSpace(m[1])
		if !h.seen[hint] {
			h.seen[hint] = true
			h.hints = append(h.hints, hint)
		}
	}
}

// tearDownEveryService tears each listed service down through the command
// its hints name, the failed one included, and checks that a failed
// service leaves the list once torn down.
func (h *hintRun) tearDownEveryService() {
	_, out := h.run("services", "list", "--json")
	var svcs struct {
		Data struct {
			Services []struct{ ID, Name, State string }
		}
	}
	h.mustJSON(out, &svcs)
	for _, sv := range svcs.Data.Services {
		code, out := h.run("services", "teardown", sv.ID)
		if sv.State == "failed" && code != 0 {
			h.t.Errorf("teardown of the failed service %s: exit %d\n%s", sv.Name, code, out)
		}
		h.collect(out)
	}
	_, out = h.run("services", "list", "--json")
	if strings.Contains(out, `"broken"`) && strings.Contains(out, `"failed"`) {
		h.t.Errorf("a torn-down failed service is still listed as failed:\n%s", out)
	}
}

// fill is the value for each placeholder a hint may mark, by name.
func (h *hintRun) fill() map[string]string {
	return map[string]string{
		"PROJECT-ID": h.project, "ID": h.project, "Q": "hinted", "NAME": "hinted", "WORKLOAD": "static_site", "TARGET": "edge",
		"ITEMS": `[{"kind":"service","target":"edge","workload":"static_site","name":"hinted"}]`, "DOMAIN": "hinted.dev",
		"BUNDLE-ID": "bnd_none", "QUOTE-ID": "quo_none", "MANDATE": "x.y.z", "REGISTRATION-SECRET": "sbr_none",
		"SCENARIO": "allowed", "KEY-FILE": filepath.Join(h.dir, "holder.jwk"), "CAPABILITY": "sbx_none", "ATTEMPT-JSON": filepath.Join(h.dir, "attempt.json"),
		"DECISION": "x.y.z", "GATE-ID": "gat_none", "PROOF-ID": "sbp_00000000000000000000", "AMOUNT-USD": "1", "REASON": "hinted",
		"SERVICE-ID": "svc_none", "ADDRESS": "hinted@hintsmail0.dev", "PARENT-PROJECT-ID": h.project, "BUDGET-USD": "1",
	}
}

// runHints runs every collected hint with its placeholders filled and
// fails on a usage error; it returns how many ran.
func (h *hintRun) runHints() int {
	fill, ran := h.fill(), 0
	for _, hint := range h.hints {
		filled := placeholder.ReplaceAllStringFunc(hint, func(p string) string {
			if v, ok := fill[p[1:len(p)-1]]; ok {
				return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
			}
			h.t.Errorf("hint %q marks a placeholder %s the test has no value for", hint, p)
			return "x"
		})
		words := splitWords(h.t, filled)
		if len(words) < 2 || words[0] != "pier" {
			continue
		}
		code, out := h.run(append(words[1:], "--no-wait")...)
		ran++
		if code == 2 {
			h.t.Errorf("hint %q exits 2 (a usage error):\n%s", hint, out)
		}
	}
	return ran
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
	d := domainSteps{t: t, step: step, jsonOf: jsonOf, count: count, serviceNamed: serviceNamed, project: project, site: site, domain: "hintsmail0.dev"}
	d.mailOutlivesTheSite(dir)
	d.movesBetweenServices()
	return outs
}

// domainSteps are domainScenarios' steps, over its helpers.
type domainSteps struct {
	t                     *testing.T
	step                  func(want int, args ...string) string
	jsonOf                func(out string, v any)
	count                 func(name string, typ uint16) int
	serviceNamed          func(name string) string
	project, site, domain string
}

// mailOutlivesTheSite buys the domain with a launch, sets up mail, tears
// the site down (the mail records stay, and the receipt says so) and
// launches on the owned domain with no quote.
func (d domainSteps) mailOutlivesTheSite(dir string) {
	t, step, jsonOf, count, serviceNamed, project, site, domain := d.t, d.step, d.jsonOf, d.count, d.serviceNamed, d.project, d.site, d.domain
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
}

// movesBetweenServices refuses the domain to a second service while one
// holds it, detaches and attaches it, and attaches it to a running service
// of an existing name through its launch.
func (d domainSteps) movesBetweenServices() {
	t, step, jsonOf, count, serviceNamed, project, site, domain := d.t, d.step, d.jsonOf, d.count, d.serviceNamed, d.project, d.site, d.domain
	second := serviceNamed("second")
	step(0, "launch", site, "--project", project, "--name", "third")
	third := serviceNamed("third")

	out := step(-1, "domains", "attach", domain, third)
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
	var got struct{ Data struct{ ServiceID string } }
	jsonOf(step(0, "domains", "get", domain, "--json"), &got)
	if got.Data.ServiceID != third || count(domain, dns.TypeA) != 1 || count(domain, dns.TypeMX) != 1 {
		t.Fatalf("relaunch of third with %s: it serves %q", domain, got.Data.ServiceID)
	}
}

// childScenarios drives a child project through its life: carved out of
// the project's budget (and refused when it asks for more than is left),
// a site launched in it, deleted while its teardown runs (deleting, with
// the task to poll and the delete to repeat), deleted for good, deleted
// again (a replay), and the organisation's own project refused. It
// returns each step's output for its hints.
func (h *hintRun) childScenarios() []string {
	var outs []string
	step := func(want int, args ...string) string {
		code, out := h.run(args...)
		if code == 2 || want >= 0 && code != want {
			h.t.Errorf("%v exits %d, want %d:\n%s", args, code, want, out)
		}
		outs = append(outs, out)
		return out
	}
	step(4, "projects", "create", "--name", "too-big", "--parent-project-id", h.project, "--budget-usd", "1000000")
	out := step(0, "projects", "create", "--name", "hints-child", "--parent-project-id", h.project, "--budget-usd", "5", "--json")
	var created struct {
		Data struct{ Project struct{ ID string } }
	}
	h.mustJSON(out, &created)
	child := created.Data.Project.ID
	step(0, "projects", "create", "--name", "hints-child-2", "--parent-project-id", h.project, "--budget-usd", "1")
	step(0, "launch", h.site, "--project", child, "--name", "in-child")
	step(0, "projects", "delete", child)
	for i := 0; ; i++ {
		var d struct{ Data struct{ State string } }
		h.mustJSON(step(0, "projects", "delete", child, "--json"), &d)
		if d.Data.State == "deleted" {
			break
		}
		if i == 100 {
			h.t.Fatalf("child project %s still %s", child, d.Data.State)
		}
		time.Sleep(100 * time.Millisecond)
	}
	step(0, "projects", "delete", child)
	step(-1, "projects", "delete", h.project)
	return outs
}
