package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/pierhq/pier/server/internal/service"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/conformance"
	"github.com/pierhq/pier/holder"
	"github.com/pierhq/pier/server"
)

// TestConformanceAgainstPier runs both profiles against a live server on
// each engine: every probe the profile runs passes (none skips), the
// governed suite alone is not_run under anonymous, and the signed reports
// verify and chain.
func TestConformanceAgainstPier(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		// What the governed suite needs: a key that may read, quote and
		// launch, in a project whose budget covers the quoted service and
		// whose policy lets it through, so that the quote decides ALLOW
		// and holds budget (governed.quote-hold skips otherwise).
		a := newAccount(t, ts, 50_000_000, service.ProjectPolicy{}, "read", "quote", "launch")
		base := "http://" + ts.Addr()
		key, _ := holder.GenerateKey()
		dir := t.TempDir()

		var prev *string
		var said []string
		for i, profile := range []string{conformance.ProfileAnonymous, conformance.ProfileGoverned} {
			rep, err := conformance.Run(context.Background(), conformance.Options{
				BaseURL: base, Profile: profile, APIKey: a.key, PreviousDigest: prev,
				Getenv: func(string) string { return "" },
				Say:    func(s string) { said = append(said, s) },
			})
			if err != nil {
				t.Fatal(err)
			}
			if bad := unexpectedProbes(profile, rep); len(bad) > 0 {
				t.Errorf("%s run:\n  %s", profile, strings.Join(bad, "\n  "))
			}
			if rep.Summary.Outcome != conformance.Pass {
				t.Fatalf("%s run: outcome %s", profile, rep.Summary.Outcome)
			}
			if rep.Target.SpecDigest == strings.Repeat("0", 64) || rep.Target.BuildId == "unknown" {
				t.Errorf("%s: target not read from the server: %+v", profile, rep.Target)
			}
			raw, err := conformance.Marshal(rep)
			if err != nil {
				t.Fatal(err)
			}
			if err := conformance.Validate(raw); err != nil {
				t.Fatalf("%s report does not validate: %v", profile, err)
			}
			digest, _ := conformance.Digest(raw)
			sig, err := conformance.Sign(key, digest)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, profile+".json")
			os.WriteFile(path, raw, 0o644)
			os.WriteFile(conformance.SignaturePath(path), []byte(sig), 0o644)
			if _, err := conformance.VerifyFile(path, nil); err != nil {
				t.Fatalf("report %d does not verify: %v", i, err)
			}
			prev = &digest
			time.Sleep(5 * time.Millisecond) // distinct startedAt
		}
		chain, err := conformance.VerifyChain(dir, nil)
		if err != nil || len(chain) != 2 {
			t.Fatalf("chain: %v (%d reports)", err, len(chain))
		}
		// The governed run made a throwaway project, said so, and
		// removed it: the organisation has its one project back, with
		// its whole budget, and no approval waits on a human.
		if len(said) != 2 || !strings.HasPrefix(said[0], "created throwaway project conformance-") || !strings.HasPrefix(said[1], "removed throwaway project conformance-") {
			t.Fatalf("the run said %q", said)
		}
		projects, err := ts.Store().Projects().List(context.Background(), a.org)
		if err != nil || len(projects) != 1 || projects[0].LimitMicro != 50_000_000 {
			t.Fatalf("projects after the run: %+v, %v", projects, err)
		}
		if pending, _ := ts.Store().Gates().Pending(context.Background(), a.org); len(pending) != 0 {
			t.Fatalf("approvals left waiting: %+v", pending)
		}
	})
}

// unexpectedProbes lists what keeps a run against Pier from being
// complete: under the profile every suite it runs is required and passes
// with every probe passing (a skip hides a probe whose precondition the
// test failed to set up), and a suite it does not run is not required,
// not_run, and not_run in every probe.
func unexpectedProbes(profile string, rep *conformance.Report) []string {
	runs := map[string]bool{conformance.SuiteWire: true, conformance.SuiteDiscovery: true, conformance.SuiteGoverned: profile == conformance.ProfileGoverned}
	var bad []string
	if len(rep.Suites) != len(runs) {
		return []string{fmt.Sprintf("%d suites, want %d", len(rep.Suites), len(runs))}
	}
	for _, s := range rep.Suites {
		id := string(s.Id)
		status, required := conformance.NotRun, false
		if runs[id] {
			status, required = conformance.Pass, true
		}
		if string(s.Outcome) != status || s.Required != required {
			bad = append(bad, fmt.Sprintf("suite %s: %s, required %v; want %s, required %v", id, s.Outcome, s.Required, status, required))
		}
		if len(s.Probes) == 0 {
			bad = append(bad, fmt.Sprintf("suite %s has no probes", id))
		}
		for _, p := range s.Probes {
			if string(p.Status) != status {
				bad = append(bad, fmt.Sprintf("%s: %s, want %s: %s", p.Id, p.Status, status, deref(p.Error)))
			}
		}
	}
	return bad
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestConformanceCatchesFaults serves Pier through a proxy that breaks
// one rule at a time; the probe for that rule, and only it, fails.
func TestConformanceCatchesFaults(t *testing.T) {
	ts := start(t, server.Config{})
	target := ts.Handler()
	faults := []struct {
		name, probe string
		// only: no other probe fails. Without actions no error envelope
		// matches the schema, so every error probe fails with it.
		only  bool
		fault func(w http.ResponseWriter, r *http.Request) bool
	}{
		{"no actions on errors", "wire.actions-typed", false, func(w http.ResponseWriter, r *http.Request) bool {
			rec := httptest.NewRecorder()
			target.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			if rec.Code >= 400 && strings.HasPrefix(r.URL.Path, "/v1/") {
				var m map[string]any
				if json.Unmarshal(body, &m) == nil {
					delete(m, "actions")
					body, _ = json.Marshal(m)
				}
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Del("Content-Length")
			w.WriteHeader(rec.Code)
			w.Write(body)
			return true
		}},
		{"no 406", "wire.mcp-accept-406", true, func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path == "/mcp" {
				r.Header.Set("Accept", "application/json, text/event-stream")
			}
			return false
		}},
		{"a session id", "wire.mcp-no-session", true, func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path == "/mcp" {
				w.Header().Set("Mcp-Session-Id", "s-1")
			}
			return false
		}},
		{"a tampered holder script", "discovery.scripts", true, func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path == "/sandbox-holder.mjs" {
				rec := httptest.NewRecorder()
				target.ServeHTTP(rec, r)
				w.Header().Set("Content-Type", rec.Header().Get("Content-Type"))
				w.Write(append(rec.Body.Bytes(), []byte("\n// changed\n")...))
				return true
			}
			return false
		}},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.Host = ts.Addr()
				if !f.fault(w, r) {
					target.ServeHTTP(w, r)
				}
			}))
			defer proxy.Close()
			rep, err := conformance.Run(context.Background(), conformance.Options{BaseURL: proxy.URL, Profile: conformance.ProfileAnonymous, Getenv: func(string) string { return "" }})
			if err != nil {
				t.Fatal(err)
			}
			var failed []string
			for _, s := range rep.Suites {
				for _, p := range s.Probes {
					if p.Status == conformance.Fail {
						failed = append(failed, p.Id)
					}
				}
			}
			if !slices.Contains(failed, f.probe) || (f.only && len(failed) != 1) {
				t.Fatalf("failed probes %v, want %s", failed, f.probe)
			}
			if rep.Summary.Outcome != conformance.Fail || rep.Summary.Failed != len(failed) {
				t.Fatalf("summary %+v", rep.Summary)
			}
		})
	}
}

// TestConformanceThrowawayCleanup: a governed run interrupted once its
// throwaway project exists still removes it and says so; a run whose
// delete_project is refused says what is left in the project and the
// command that removes it, and that command removes it.
func TestConformanceThrowawayCleanup(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 50_000_000, service.ProjectPolicy{}, "read", "quote", "launch")
	target := ts.Handler()
	refuseDelete := false
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Host = ts.Addr()
		if refuseDelete && r.Method == "DELETE" && strings.HasPrefix(r.URL.Path, "/v1/projects/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(503)
			w.Write([]byte(`{"blockedBy":"internal:unavailable","message":"injected","retryable":false,"actions":[]}`))
			return
		}
		target.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	run := func(ctx context.Context, say func(string)) {
		t.Helper()
		if _, err := conformance.Run(ctx, conformance.Options{BaseURL: proxy.URL, Profile: conformance.ProfileGoverned, APIKey: a.key,
			Getenv: func(string) string { return "" }, Say: say}); err != nil {
			t.Fatal(err)
		}
	}
	projects := func() int {
		t.Helper()
		ps, err := ts.Store().Projects().List(context.Background(), a.org)
		if err != nil {
			t.Fatal(err)
		}
		return len(ps)
	}

	ctx, interrupt := context.WithCancel(context.Background())
	var said []string
	run(ctx, func(s string) {
		said = append(said, s)
		interrupt() // as SIGINT would, right after the project is made
	})
	if len(said) != 2 || !strings.HasPrefix(said[1], "removed throwaway project") || projects() != 1 {
		t.Fatalf("interrupted run said %q and left %d projects", said, projects())
	}

	refuseDelete, said = true, nil
	run(context.Background(), func(s string) { said = append(said, s) })
	if len(said) != 2 || !strings.HasPrefix(said[1], "could not remove throwaway project") ||
		!strings.Contains(said[1], "a 1 USD budget raise") || !strings.Contains(said[1], "remove it with: pier projects delete prj_") || projects() != 2 {
		t.Fatalf("refused delete said %q and left %d projects", said, projects())
	}
	id := said[1][strings.LastIndex(said[1], " ")+1:]
	r := ts.Client.Do("DELETE", "/v1/projects/"+id, nil, a.header())
	if r.StatusCode != 200 {
		t.Fatalf("delete of the project left behind: %d %s", r.StatusCode, r.Body)
	}
	if r.JSON()["data"].(map[string]any)["state"] == "deleting" {
		for _, task := range r.JSON()["data"].(map[string]any)["teardownTaskIds"].([]any) {
			waitTask(t, ts, a, task.(string), "succeeded")
		}
		r = ts.Client.Do("DELETE", "/v1/projects/"+id, nil, a.header())
	}
	if r.StatusCode != 200 || r.JSON()["data"].(map[string]any)["state"] != "deleted" || projects() != 1 {
		t.Fatalf("the command it named did not remove it: %d %s", r.StatusCode, r.Body)
	}
}
