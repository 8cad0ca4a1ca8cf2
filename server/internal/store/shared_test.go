package store_test

import (
	"testing"

	"github.com/pierhq/pier/server/internal/store"
)

func TestShared(t *testing.T) { runCases(t, sharedCases) }

// sharedCases are TestShared's cases, each run on every engine.
var sharedCases = []storeCase{
	{"put, get, replace, delete", func(t *testing.T, w world) {
		shared := w.st.Shared()
		_, err := shared.Get(ctx, "acme/x")
		wantErr(t, "absent", err, store.ErrNotFound)
		must(t, shared.Put(ctx, "acme/x", "one"))
		must(t, shared.Put(ctx, "acme/x", "two"))
		if v, err := shared.Get(ctx, "acme/x"); err != nil || v != "two" {
			t.Fatalf("get %q, %v", v, err)
		}
		must(t, shared.Delete(ctx, "acme/x"))
		must(t, shared.Delete(ctx, "acme/x"))
		_, err = shared.Get(ctx, "acme/x")
		wantErr(t, "deleted", err, store.ErrNotFound)
	}},
	{"concurrent puts: one value wins whole", func(t *testing.T, w world) {
		race(t, 8, func(i int) error { return w.st.Shared().Put(ctx, "k", string(rune('a'+i))) })
		if v, err := w.st.Shared().Get(ctx, "k"); err != nil || len(v) != 1 {
			t.Fatalf("get %q, %v", v, err)
		}
	}},
}
