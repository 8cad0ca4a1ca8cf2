package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

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
