package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/pierhq/pier/cli/internal/clitest"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"pier": func() { os.Exit(Main()) },
		// pier-status runs pier and reports its exit code on stderr as
		// "[exit N]", so scripts can check the code itself.
		"pier-status": func() {
			code := Main()
			fmt.Fprintf(os.Stderr, "[exit %d]\n", code)
			os.Exit(0)
		},
	})
}

// TestScripts runs testdata/script/*.txtar against a fake API. The fake
// answers with canned envelopes, each validated against the contract as it
// is served, so the fake cannot drift from the API it stands for; the real
// server is exercised from cmd/pier, since cli does not import server.
func TestScripts(t *testing.T) {
	var mu sync.Mutex
	var drift []string
	t.Cleanup(func() {
		for _, d := range drift {
			t.Errorf("the fake API drifted from the contract: %s", d)
		}
	})
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			srv := httptest.NewServer(clitest.Validated(fakeAPI(), func(p []string) {
				mu.Lock()
				drift = append(drift, p...)
				mu.Unlock()
			}))
			env.Defer(srv.Close)
			env.Setenv("PIER_BASE_URL", srv.URL)
			env.Setenv("PIER_API_KEY", "")
			env.Setenv("NO_COLOR", "1")
			return nil
		},
	})
}

// fakeAPI serves a few canned envelopes in the contract's shapes.
func fakeAPI() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/domains/search", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("q")
		if q == "" {
			clitest.WriteEnvelope(w, 400, clitest.ErrorEnvelope("input:invalid", "q is required", false,
				`"details":[{"field":"query.q","problem":"required"}],`))
			return
		}
		tlds := []string{"dev", "com"}
		if a := r.URL.Query().Get("tldAllowlist"); a != "" {
			tlds = strings.Split(a, ",")
		}
		var cands []string
		for i, tld := range tlds {
			price := "12.5"
			if i > 0 {
				price = "null"
			}
			cands = append(cands, fmt.Sprintf(`{"domain":%q,"tld":%q,"available":%t,"premium":false,"firstYearPriceUsd":%s,"renewalPriceUsd":15,"renewalPeriodYears":1}`,
				q+"."+tld, tld, i == 0, price))
		}
		tl, _ := json.Marshal(tlds)
		clitest.WriteEnvelope(w, 200, fmt.Sprintf(`{"data":{"candidates":[%s],"excluded":{"lackingPrice":0,"overFirstYearCeiling":0,"overRenewalCeiling":0},"appliedFilters":{"query":%q,"catalog":"common","includeExotic":false,"tlds":%s,"tldAllowlist":[],"tldDenylist":[],"limit":20}},"actions":[{"kind":"tool","actor":"agent","tool":"create_quote","http":{"method":"POST","path":"/v1/quotes"},"missingArguments":["items","projectId"]}],"formatVersion":"1"}`,
			strings.Join(cands, ","), q, tl))
	})
	mux.HandleFunc("POST /v1/estimate", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Workload string `json:"workload"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &in); err != nil || in.Workload == "" {
			clitest.WriteEnvelope(w, 400, clitest.ErrorEnvelope("input:invalid", "workload is required", false, ""))
			return
		}
		clitest.WriteEnvelope(w, 200, fmt.Sprintf(`{"data":{"workload":%q,"selectedTarget":"edge","monthlyUsd":0,"selectionReason":"cheapest_capable","considered":[{"target":"edge","kind":"compute","capable":true,"capabilities":["static"],"monthlyUsd":0,"reason":"cheapest_capable"},{"target":"process","kind":"compute","capable":true,"capabilities":["static","dynamic"],"monthlyUsd":7.5,"reason":"capable_not_cheapest"},{"target":"worker","kind":"compute","capable":false,"capabilities":[],"monthlyUsd":null,"reason":"missing_capability"}],"addons":[],"assumptions":[],"evidence":[],"catalogVersion":"2025-01"},"actions":[{"kind":"tool","actor":"agent","tool":"search_domains","http":{"method":"GET","path":"/v1/domains/search"},"arguments":{"q":"acme"}}],"formatVersion":"1"}`, in.Workload))
	})
	mux.HandleFunc("POST /v1/quotes", func(w http.ResponseWriter, r *http.Request) {
		clitest.WriteEnvelope(w, 501, clitest.ErrorEnvelope("plan:not_implemented", "create_quote is not implemented yet", false, ""))
	})
	mux.HandleFunc("GET /v1/tasks/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			clitest.WriteEnvelope(w, 401, clitest.ErrorEnvelope("auth:missing_credentials", "an API key is required", false, ""))
			return
		}
		clitest.WriteEnvelope(w, 404, clitest.ErrorEnvelope("not_found:resource", "no task "+r.PathValue("id"), false, ""))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		clitest.WriteEnvelope(w, 404, clitest.ErrorEnvelope("not_found:route", "no route "+r.URL.Path, false, ""))
	})
	return mux
}
