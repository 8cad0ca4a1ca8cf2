package actions

import (
	"bytes"
	"testing"

	"github.com/pierhq/pier/server/internal/operation"
)

// A tool action written without reflection is json.Marshal's: for every
// operation, with arguments of each kind an action carries (and strings
// the encoder escapes), with and without the optional members.
func TestWrapToolIsWrap(t *testing.T) {
	argSets := []map[string]any{nil, {}, {"id": "prj_x"}, {"id": "a<b>&c", "domain": "x.dev", "years": 2, "months": int64(3),
		"amountUsd": 12.5, "tiny": 1e-7, "big": 1e21, "ok": true, "none": nil, "items": []any{map[string]any{"kind": "service", "n": 1.0}},
		"quote\"d": "new\nline \u2028 é", "map": map[string]string{"b": "2", "a": "1"}}}
	n := 0
	for _, op := range operation.All {
		for i, args := range argSets {
			ta := toolAction(op.ID, "agent", args)
			if i%2 == 1 {
				after, wait, id := []string{"approve", "x&y"}, 5, "poll<1>"
				ta.After, ta.RetryAfterSeconds, ta.Id = &after, &wait, &id
			}
			got, _ := wrapTool(ta).MarshalJSON()
			want, _ := wrap(ta).MarshalJSON()
			if !bytes.Equal(got, want) {
				t.Fatalf("%s %v:\nwrapTool %s\nwrap     %s", op.ID, args, got, want)
			}
			n++
		}
	}
	if n < 100 {
		t.Fatalf("only %d actions compared", n)
	}
}
