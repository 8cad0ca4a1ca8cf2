package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// quoteBodies are create_quote bodies: the first ones valid in the plain
// form the fast check proves, the rest refused by the contract or in a
// form the check leaves to the validator.
var quoteBodies = []struct {
	body string
	fast bool // the fast check proves it valid
}{
	{`{"projectId":"prj_1","items":[{"kind":"service","workload":"dynamic_service","months":1}]}`, true},
	{` { "items" : [ {"kind":"domain","domain":"acme.dev","years":10} ] , "projectId" : "prj-A_9" } `, true},
	{`{"projectId":"p","items":[{"kind":"email","domain":"a.io","months":36},{"kind":"service","target":"managed_postgres","name":"api-1"}]}`, true},
	{`{"projectId":"prj_1","items":[{"kind":"service","target":"edge","workload":"static_site","months":12,"name":"a","years":1}]}`, true},
	{"{\"projectId\":\"prj_1\",\n\t\"items\":[{\"kind\":\"service\"}]}\r\n", true},
	{`{"projectId":"` + strings.Repeat("a", 64) + `","items":[{"kind":"service"}]}`, true},
	{`{"projectId":"prj_1","items":[` + strings.TrimSuffix(strings.Repeat(`{"kind":"service"},`, 20), ",") + `]}`, true},
	{`{"projectId":"prj_1","items":[{"kind":"domain","domain":"` + strings.Repeat("a", 63) + `.` + strings.Repeat("b", 24) + `"}]}`, true},

	// Refused by the contract.
	{``, false},
	{`{}`, false},
	{`null`, false},
	{`[]`, false},
	{`{"projectId":"prj_1"}`, false},
	{`{"items":[{"kind":"service"}]}`, false},
	{`{"projectId":"","items":[{"kind":"service"}]}`, false},
	{`{"projectId":"` + strings.Repeat("a", 65) + `","items":[{"kind":"service"}]}`, false},
	{`{"projectId":"prj 1","items":[{"kind":"service"}]}`, false},
	{`{"projectId":"prj/1","items":[{"kind":"service"}]}`, false},
	{`{"projectId":1,"items":[{"kind":"service"}]}`, false},
	{`{"projectId":"prj_1","items":[]}`, false},
	{`{"projectId":"prj_1","items":{}}`, false},
	{`{"projectId":"prj_1","items":[` + strings.TrimSuffix(strings.Repeat(`{"kind":"service"},`, 21), ",") + `]}`, false},
	{`{"projectId":"prj_1","items":[{}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"server"}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service","months":0}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service","months":37}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service","months":100}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service","months":-1}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service","months":1.5}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service","months":"1"}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service","months":null}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"domain","years":11}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"domain","domain":"ACME.dev"}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"domain","domain":"-a.dev"}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"domain","domain":"acme"}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"domain","domain":"a."}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"domain","domain":"` + strings.Repeat("a", 64) + `.dev"}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"domain","domain":"a.` + strings.Repeat("b", 25) + `"}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service","target":"lambda"}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service","workload":"batch"}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service","name":"Api"}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service","name":"1api"}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service","name":"` + strings.Repeat("a", 41) + `"}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service","colour":"red"}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service"}],"extra":true}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service"}]`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service"}]}}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service"}]} x`, false},
	{`{"projectId":"prj_1",,"items":[{"kind":"service"}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service"},]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service",}]}`, false},
	{`{"ProjectId":"prj_1","items":[{"kind":"service"}]}`, false},

	// Valid, but not in the plain form: left to the validator.
	{`{"projectId":"prj\u005f1","items":[{"kind":"service"}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service","months":1.0}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service","months":1e0}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service","months":01}]}`, false},
	{`{"projectId":"prj_0","projectId":"prj_1","items":[{"kind":"service"}]}`, false},
	{`{"projectId":"prj_1","items":[{"kind":"service","kind":"service"}]}`, false},
}

// TestQuoteBodyFastAcceptsOnlyValid: the fast check proves exactly the
// plain bodies above, and everything it proves the contract's validator
// accepts; what it does not prove goes to the validator, so refusals keep
// its field problems. Headers and the query count too.
func TestQuoteBodyFastAcceptsOnlyValid(t *testing.T) {
	h, rt := createQuoteRoute(t)
	for _, c := range quoteBodies {
		if got := fastAndValid(t, h, rt, c.body, nil, ""); got != c.fast {
			t.Errorf("fast check %v, want %v: %s", got, c.fast, c.body)
		}
	}
	plain := quoteBodies[0].body
	headers := []struct {
		header http.Header
		query  string
		fast   bool
	}{
		{http.Header{"Idempotency-Key": {"k-1_!~"}}, "", true},
		{http.Header{"Idempotency-Key": {strings.Repeat("k", 255)}}, "", true},
		{http.Header{"Idempotency-Key": {strings.Repeat("k", 256)}}, "", false},
		{http.Header{"Idempotency-Key": {"a b"}}, "", false},
		{http.Header{"Idempotency-Key": {""}}, "", false},
		{http.Header{"Idempotency-Key": {"é"}}, "", false},
		{http.Header{"Idempotency-Key": {"a", "b"}}, "", false},
		{http.Header{"Content-Type": {"application/json; charset=utf-8"}}, "", false},
		{http.Header{"Content-Type": {"text/plain"}}, "", false},
		{nil, "x=1", false},
	}
	for _, c := range headers {
		if got := fastAndValid(t, h, rt, plain, c.header, c.query); got != c.fast {
			t.Errorf("fast check %v, want %v: %v %q", got, c.fast, c.header, c.query)
		}
	}
}

// FuzzQuoteBodyFast: whatever body the fast check proves valid, the
// contract's validator accepts.
func FuzzQuoteBodyFast(f *testing.F) {
	for _, c := range quoteBodies {
		f.Add(c.body)
	}
	h, rt := createQuoteRoute(f)
	f.Fuzz(func(t *testing.T, body string) {
		fastAndValid(t, h, rt, body, nil, "")
	})
}

func createQuoteRoute(t testing.TB) (*Handler, *route) {
	h, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	rt := h.ops["create_quote"]
	if rt.acceptsFast == nil {
		t.Fatal("create_quote has no fast check")
	}
	return h, rt
}

// fastAndValid runs the fast check on a create_quote request and, when
// it proves the request valid, fails t unless the validator agrees.
func fastAndValid(t testing.TB, h *Handler, rt *route, body string, header http.Header, query string) bool {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/v1/quotes?"+query, bytes.NewReader([]byte(body)))
	if query == "" {
		r.URL.RawQuery = ""
	}
	r.Header.Set("Content-Type", "application/json")
	for k, vs := range header {
		r.Header[k] = vs
	}
	if !rt.acceptsFast(r, []byte(body)) {
		return false
	}
	if err := h.validate(r, rt); err != nil {
		t.Fatalf("the fast check accepts what the contract refuses (%v): %s %v", err, body, header)
	}
	return true
}
