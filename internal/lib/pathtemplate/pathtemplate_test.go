package pathtemplate

import "testing"

func TestBestPrefersLiterals(t *testing.T) {
	templates := []string{"/v1/domains/{domain}", "/v1/domains/search", "/v1/quotes/{id}/release"}
	for path, want := range map[string]int{
		"/v1/domains/search":     1,
		"/v1/domains/acme.dev":   0,
		"/v1/quotes/q_1/release": 2,
		"/v1/quotes//release":    -1,
		"/v1/quotes/q_1":         -1,
	} {
		if got := Best(templates, path); got != want {
			t.Errorf("%s: %d, want %d", path, got, want)
		}
	}
}
