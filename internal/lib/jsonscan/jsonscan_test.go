package jsonscan

import (
	"encoding/json"
	"testing"
)

var seeds = []string{
	`{}`, `[]`, `{"a":1}`, `{"a":[1,2,{"b":null}],"c":"d\u00e9\n"}`, `-0.5E+7`, `01`, `1.`, `-`, `1e`,
	`"a\x"`, `"\u12g4"`, "\"a\tb\"", `tru`, `nul`, `[1,]`, `{"a" 1}`, `{"a":}`, "\"\xff\xfe\"", `"open`,
	` {"a" : [ true , false ] } `, `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
}

// FuzzValue holds Value to encoding/json's verdict on the texts it does
// not refuse for depth: a value it accepts is one json.Valid accepts, and
// the other way round.
func FuzzValue(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		i := Space(b, 0)
		end := Value(b, i)
		got := end >= 0 && Space(b, end) == len(b)
		if got && !json.Valid(b) {
			t.Fatalf("Value accepts %q, which json.Valid refuses", b)
		}
		if !got && json.Valid(b) && depth(b) <= MaxDepth {
			t.Fatalf("Value refuses %q, which json.Valid accepts", b)
		}
	})
}

// depth is how deeply b's brackets nest, strings aside.
func depth(b []byte) int {
	d, most, in := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in && (c == '{' || c == '['):
			d++
			most = max(most, d)
		case !in && (c == '}' || c == ']'):
			d--
		}
	}
	return most
}

func TestPlain(t *testing.T) {
	for _, c := range []struct {
		v    string
		want string
		ok   bool
	}{{`"abc"`, "abc", true}, {`""`, "", true}, {`"a\nb"`, "", false}, {`"é"`, "", false}, {`1`, "", false}, {`null`, "", false}} {
		got, ok := Plain([]byte(c.v))
		if ok != c.ok || string(got) != c.want {
			t.Errorf("Plain(%s) = %q, %v; want %q, %v", c.v, got, ok, c.want, c.ok)
		}
	}
}
