package contracttest

import (
	"strings"
	"testing"
)

func TestCheckActions(t *testing.T) {
	for name, c := range map[string]struct {
		body string
		want string // a problem containing this, or "" for none
	}{
		"complete":                {`{"actions":[{"kind":"tool","actor":"agent","tool":"create_quote","http":{"method":"POST","path":"/v1/quotes"},"arguments":{"projectId":"prj_1","items":[{"kind":"domain","domain":"acme.dev"}]}}]}`, ""},
		"listed as missing":       {`{"data":{"actions":[{"kind":"tool","actor":"agent","tool":"create_quote","http":{"method":"POST","path":"/v1/quotes"},"arguments":{"projectId":"prj_1"},"missingArguments":["items"]}]}}`, ""},
		"a path argument missing": {`{"actions":[{"kind":"tool","actor":"agent","tool":"teardown_service","http":{"method":"POST","path":"/v1/services/{id}/teardown"},"missingArguments":["id"]}]}`, ""},
		"lacking a required one":  {`{"actions":[{"kind":"tool","actor":"agent","tool":"create_quote","http":{"method":"POST","path":"/v1/quotes"},"arguments":{"projectId":"prj_1"}}]}`, `"items" is neither carried`},
		"an unknown argument":     {`{"actions":[{"kind":"tool","actor":"agent","tool":"search_domains","http":{"method":"GET","path":"/v1/domains/search"},"arguments":{"q":"acme","colour":"red"}}]}`, `"colour" is not one`},
		"a mistyped argument":     {`{"actions":[{"kind":"tool","actor":"agent","tool":"search_domains","http":{"method":"GET","path":"/v1/domains/search"},"arguments":{"q":"acme","limit":"many"}}]}`, `"limit" does not match`},
		"the wrong method":        {`{"actions":[{"kind":"tool","actor":"agent","tool":"get_task","http":{"method":"POST","path":"/v1/tasks/tsk_1"},"arguments":{"id":"tsk_1"}}]}`, "http.method"},
		"an unknown tool":         {`{"actions":[{"kind":"tool","actor":"agent","tool":"make_coffee","http":{"method":"POST","path":"/v1/coffee"}}]}`, "no operation"},
		"nested in an undo":       {`{"data":{"undo":{"command":{"kind":"tool","actor":"agent","tool":"release_quote","http":{"method":"POST","path":"/v1/quotes/quo_1/release"}}}}}`, `"id" is neither carried`},
	} {
		problems := CheckActions([]byte(c.body))
		got := strings.Join(problems, "; ")
		if c.want == "" && len(problems) > 0 || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: problems %q, want %q", name, got, c.want)
		}
	}
}
