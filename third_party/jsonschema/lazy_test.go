package jsonschema

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

// The metaschemas are compiled on the first NewCompiler, not at package
// init (see README.pier.md): after it, every draft has its metaschema and
// its vocabularies, and compiling a schema still checks it against them.
func TestMetaschemasOnFirstCompiler(t *testing.T) {
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			NewCompiler()
		}()
	}
	wg.Wait()
	for _, d := range []*Draft{Draft4, Draft6, Draft7, Draft2019, Draft2020} {
		if d.sch == nil {
			t.Fatalf("draft %d has no metaschema", d.version)
		}
		for name, sch := range d.allVocabs {
			if sch == nil {
				t.Fatalf("draft %d has no %s vocabulary", d.version, name)
			}
		}
	}
	for _, d := range []*Draft{Draft4, Draft7, Draft2020} {
		c := NewCompiler()
		c.DefaultDraft(d)
		doc, err := UnmarshalJSON(strings.NewReader(`{"type": 5}`))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource("mem://bad.json", doc); err != nil {
			t.Fatal(err)
		}
		_, err = c.Compile("mem://bad.json")
		var se *SchemaValidationError
		if !errors.As(err, &se) {
			t.Fatalf("draft %d: a schema with \"type\": 5 compiled (%v)", d.version, err)
		}
	}
}

// The drafts' subschema paths are set by the first NewCompiler too (see
// README.pier.md): upstream's counts, and a $ref into $defs (found through
// them) still resolves.
func TestSubschemasOnFirstCompiler(t *testing.T) {
	NewCompiler()
	for d, n := range map[*Draft]int{Draft4: 12, Draft6: 14, Draft7: 17, Draft2019: 22, Draft2020: 23} {
		if len(d.subschemas) != n {
			t.Errorf("draft %d has %d subschema paths, want %d", d.version, len(d.subschemas), n)
		}
	}
	c := NewCompiler()
	doc, err := UnmarshalJSON(strings.NewReader(`{"$defs": {"n": {"$anchor": "num", "type": "number"}},
		"properties": {"a": {"$ref": "#num"}, "b": {"items": {"$ref": "#/$defs/n"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("mem://defs.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem://defs.json")
	if err != nil {
		t.Fatal(err)
	}
	for inst, ok := range map[string]bool{`{"a": 1, "b": [2]}`: true, `{"a": "x"}`: false, `{"b": [1, "y"]}`: false} {
		v, _ := UnmarshalJSON(strings.NewReader(inst))
		if err := sch.Validate(v); (err == nil) != ok {
			t.Errorf("%s: valid %v, want %v (%v)", inst, err == nil, ok, err)
		}
	}
}
