package store_test

import (
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

func TestWorkflows(t *testing.T) { runCases(t, workflowsCases) }

// workflowsCases are TestWorkflows's cases, each run on every engine.
var workflowsCases = []storeCase{
	{"applied once", func(t *testing.T, w world) {
		workflows := w.st.Workflows()
		wf := store.Workflow{ID: "wf_1", OrgID: w.org, ProjectID: w.proj, Caller: "key:key_1", Digest: "d", Plan: "{}", SignedPlan: "jws", KeyID: "kid", Projection: "[]", CreatedAt: t0}
		must(t, workflows.Insert(ctx, wf))
		if err := workflows.Insert(ctx, wf); err == nil {
			t.Fatal("a workflow id was taken twice")
		}
		got, err := workflows.Get(ctx, w.org, "wf_1")
		if err != nil || got != wf {
			t.Fatalf("get %+v, %v", got, err)
		}
		_, err = workflows.ByTask(ctx, "tsk_1")
		wantErr(t, "not applied yet", err, store.ErrNotFound)
		var winner int
		wins := race(t, 6, func(i int) error {
			ok, err := workflows.MarkApplied(ctx, "wf_1", "tsk_"+string(rune('a'+i)), t0.Add(time.Minute))
			if ok {
				winner = i
				return nil
			}
			if err == nil {
				err = store.ErrConflict
			}
			return err
		}, store.ErrConflict)
		if wins != 1 {
			t.Fatalf("applied %d times", wins)
		}
		task := "tsk_" + string(rune('a'+winner))
		got, err = workflows.ByTask(ctx, task)
		if err != nil || got.ID != "wf_1" || got.TaskID != task || got.AppliedAt == nil || !got.AppliedAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("by task %+v, %v", got, err)
		}
		must(t, w.st.InTx(ctx, func(tx *store.Tx) error {
			locked, err := tx.Workflows().Lock(ctx, w.org, "wf_1")
			if err != nil || locked.TaskID != task {
				t.Errorf("lock %+v, %v", locked, err)
			}
			return err
		}))
		_, err = workflows.Get(ctx, "org_other", "wf_1")
		wantErr(t, "another organisation's workflow", err, store.ErrNotFound)
	}},
	{"count", func(t *testing.T, w world) {
		for _, id := range []string{"wf_1", "wf_2"} {
			must(t, w.st.Workflows().Insert(ctx, store.Workflow{ID: id, OrgID: w.org, ProjectID: w.proj, CreatedAt: t0}))
		}
		w.other(t, "org_b")
		if n, err := w.st.Workflows().Count(ctx, w.org); err != nil || n != 2 {
			t.Fatalf("count %d, %v", n, err)
		}
		if n, err := w.st.Workflows().Count(ctx, "org_b"); err != nil || n != 0 {
			t.Fatalf("count %d, %v", n, err)
		}
	}},
}
