package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/pierhq/pier/openapi"
	"github.com/pierhq/pier/server/internal/safetext"
)

// An entry fastEntry takes is one the contract's validator accepts, with
// safe text, read as the whole way reads it; the entries a client sends
// are taken; and every entry it declines goes the whole way, which
// words the refusal (TestManifestStreamedRefusesAsWholeBody).
func TestFastEntryIsTheValidators(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.YAML)
	if err != nil {
		t.Fatal(err)
	}
	schema := doc.Components.Schemas["ManifestFile"].Value
	sha := strings.Repeat("0a", 32)
	entry := func(members string) string { return "{" + members + "}" }
	taken := []string{
		entry(`"path":"index.html","size":12,"sha256":"` + sha + `"`),
		entry(`"sha256":"` + sha + `","size":0,"path":"a/b c.html","contentType":"text/html"`),
		" { \"path\" : \"é.txt\" ,\n\t\"size\" : 26214400 , \"sha256\" : \"" + sha + "\" } ",
		entry(`"path":"` + strings.Repeat("p", 512) + `","size":1,"sha256":"` + sha + `","contentType":"` + strings.Repeat("t", 200) + `"`),
	}
	declined := []string{
		entry(`"path":"a","size":26214401,"sha256":"` + sha + `"`),
		entry(`"path":"a","size":-1,"sha256":"` + sha + `"`),
		entry(`"path":"a","size":1.0,"sha256":"` + sha + `"`),
		entry(`"path":"a","size":1e3,"sha256":"` + sha + `"`),
		entry(`"path":"a","size":1000000000000,"sha256":"` + sha + `"`),
		entry(`"path":"a","size":"1","sha256":"` + sha + `"`),
		entry(`"path":"","size":1,"sha256":"` + sha + `"`),
		entry(`"path":"` + strings.Repeat("p", 513) + `","size":1,"sha256":"` + sha + `"`),
		entry(`"path":"` + strings.Repeat("é", 300) + `","size":1,"sha256":"` + sha + `"`), // sound, but longer than 512 bytes
		entry(`"path":"a","size":1,"sha256":"` + strings.ToUpper(sha) + `"`),
		entry(`"path":"a","size":1,"sha256":"` + sha[1:] + `"`),
		entry(`"path":"a","size":1,"sha256":"` + sha + `","contentType":"` + strings.Repeat("t", 201) + `"`),
		entry(`"path":"a","size":1,"sha256":"` + sha + `","mode":1`),
		entry(`"path":"a","path":"b","size":1,"sha256":"` + sha + `"`),
		entry(`"path":"a\u0062","size":1,"sha256":"` + sha + `"`),
		entry(`"path":"a\"b","size":1,"sha256":"` + sha + `"`),
		entry(`"path":"a` + "\u202e" + `b","size":1,"sha256":"` + sha + `"`),
		entry(`"path":"a","sha256":"` + sha + `"`),
		entry(`"size":1,"sha256":"` + sha + `"`),
		entry(`"path":"a","size":1`),
		entry(`"path":null,"size":1,"sha256":"` + sha + `"`),
		entry(`"path":["a"],"size":1,"sha256":"` + sha + `"`),
		entry(`"path":"a","size":1,"sha256":"` + sha + `","contentType":null`),
		`[]`, `"a"`, `1`, `null`, `{}`,
	}
	for i, raw := range append(taken, declined...) {
		e, ok := fastEntry([]byte(raw))
		if want := i < len(taken); ok != want {
			t.Errorf("%s: taken %v, want %v", raw, ok, want)
		}
		if !ok {
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			t.Fatal(err)
		}
		if err := schema.VisitJSON(v, openapi3.VisitAsRequest(), openapi3.MultiErrors()); err != nil {
			t.Errorf("%s: taken, but the validator says %v", raw, err)
		}
		if p := safetext.ValueProblem(v); p != "" {
			t.Errorf("%s: taken, but %s", raw, p)
		}
		if e != manifestEntryOf(v) {
			t.Errorf("%s: read as %+v, the whole way as %+v", raw, e, manifestEntryOf(v))
		}
	}
}
