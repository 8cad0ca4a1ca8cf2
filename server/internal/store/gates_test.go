package store_test

import (
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

func TestGates(t *testing.T) { runCases(t, gatesCases) }

// gatesCases are TestGates's cases, each run on every engine.
var gatesCases = []storeCase{
	{"decided once", func(t *testing.T, w world) {
		gates := w.st.Gates()
		must(t, gates.Insert(ctx, store.Gate{ID: "gate_1", OrgID: w.org, TaskID: "tsk_1", Kind: "domain_registration", Payload: "{}", CreatedAt: t0}))
		wantErr(t, "another organisation decides", gates.Decide(ctx, "org_other", "gate_1", "approved", "human_x", t0), store.ErrConflict)
		wins := race(t, 6, func(i int) error {
			return gates.Decide(ctx, w.org, "gate_1", []string{"approved", "denied"}[i%2], "human_1", t0.Add(time.Minute))
		}, store.ErrConflict)
		if wins != 1 {
			t.Fatalf("decided %d times", wins)
		}
		g, err := gates.Get(ctx, w.org, "gate_1")
		if err != nil || g.State == "pending" || g.DecidedBy != "human_1" || g.DecidedAt == nil || !g.DecidedAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("gate %+v, %v", g, err)
		}
		wantErr(t, "unknown gate", gates.Decide(ctx, w.org, "gate_none", "approved", "h", t0), store.ErrConflict)
		if err := gates.Decide(ctx, w.org, "gate_1", "maybe", "h", t0); err == nil {
			t.Fatal("a decided gate took a state it cannot have")
		}
	}},
	{"pending and locked", func(t *testing.T, w world) {
		gates := w.st.Gates()
		for i, id := range []string{"gate_b", "gate_a", "gate_c"} {
			must(t, gates.Insert(ctx, store.Gate{ID: id, OrgID: w.org, TaskID: "tsk_1", Kind: "k", Payload: "{}", CreatedAt: t0.Add(time.Duration(i/2) * time.Second)}))
		}
		must(t, w.other(t, "org_b").st.Gates().Insert(ctx, store.Gate{ID: "gate_other", OrgID: "org_b", TaskID: "t", Kind: "k", Payload: "{}", CreatedAt: t0}))
		must(t, gates.Decide(ctx, w.org, "gate_c", "denied", "h", t0))
		pending, err := gates.Pending(ctx, w.org)
		if err != nil || len(pending) != 2 || pending[0].ID != "gate_a" || pending[1].ID != "gate_b" || pending[0].DecidedAt != nil {
			t.Fatalf("pending %+v, %v", pending, err)
		}
		must(t, w.st.InTx(ctx, func(tx *store.Tx) error {
			g, err := tx.Gates().Lock(ctx, w.org, "gate_c")
			if err != nil || g.State != "denied" || g.DecidedBy != "h" {
				t.Errorf("lock %+v, %v", g, err)
			}
			return err
		}))
		_, err = gates.Lock(ctx, "org_b", "gate_c")
		wantErr(t, "another organisation's gate", err, store.ErrNotFound)
		_, err = gates.Get(ctx, w.org, "gate_other")
		wantErr(t, "another organisation's gate", err, store.ErrNotFound)
	}},
}
