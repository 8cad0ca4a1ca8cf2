package yaml

import (
	"math"
	"reflect"
	"sync"
	"testing"
)

// The resolve tables, the tag maps and the two regular expressions are
// built on first use (README.pier.md): from concurrent first uses, plain
// scalars still resolve as upstream resolves them, tags still shorten and
// lengthen, and base 60 floats are still quoted on the way out.
func TestTablesOnFirstUse(t *testing.T) {
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			checkResolve(t)
		}()
	}
	wg.Wait()
	if got := shortTag("tag:yaml.org,2002:int"); got != "!!int" {
		t.Errorf("shortTag: %q", got)
	}
	if got := longTag("!!merge"); got != "tag:yaml.org,2002:merge" {
		t.Errorf("longTag: %q", got)
	}
	if got := longTag("!!custom"); got != "tag:yaml.org,2002:custom" {
		t.Errorf("longTag of an unknown tag: %q", got)
	}
	out, err := Marshal(map[string]string{"a": "1:20", "b": "1.5e3", "c": "yes"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "a: \"1:20\"\nb: \"1.5e3\"\nc: \"yes\"\n"; string(out) != want {
		t.Errorf("Marshal:\n%s\nwant\n%s", out, want)
	}
}

func checkResolve(t *testing.T) {
	var doc map[string]any
	src := "t: true\nf: False\nn: ~\ne: \"\"\ni: 0x10\nb: 0b101\nu: 18446744073709551615\n" +
		"fl: 1.5e3\ndot: .5\ninf: -.inf\nnan: .NaN\ns: hello\nq: '12'\nund: 1_000\n"
	if err := Unmarshal([]byte(src), &doc); err != nil {
		t.Error(err)
		return
	}
	want := map[string]any{"t": true, "f": false, "n": nil, "e": "", "i": 16, "b": 5,
		"u": uint64(math.MaxUint64), "fl": 1500.0, "dot": 0.5, "inf": math.Inf(-1),
		"s": "hello", "q": "12", "und": 1000}
	nan, _ := doc["nan"].(float64)
	delete(doc, "nan")
	if !reflect.DeepEqual(doc, want) || !math.IsNaN(nan) {
		t.Errorf("Unmarshal:\n got %#v\nwant %#v (and nan NaN, got %v)", doc, want, nan)
	}
}
