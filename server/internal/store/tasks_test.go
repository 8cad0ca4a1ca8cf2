package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

func taskIDs(ts []store.Task) []string {
	var ids []string
	for _, t := range ts {
		ids = append(ids, t.ID)
	}
	return ids
}

func TestTasks(t *testing.T) { runCases(t, tasksCases) }

// tasksCases are TestTasks's cases, each run on every engine.
var tasksCases = []storeCase{
	{"a lease has one runner", func(t *testing.T, w world) {
		tasks := w.st.Tasks()
		task := w.task(t, "tsk_1", "queued")
		if ok, err := tasks.AcquireLease(ctx, task.ID, "a", t0, time.Minute); !ok || err != nil {
			t.Fatalf("first lease: %v %v", ok, err)
		}
		if ok, err := tasks.AcquireLease(ctx, task.ID, "a", t0.Add(time.Second), time.Minute); !ok || err != nil {
			t.Fatalf("the holder renews: %v %v", ok, err)
		}
		if ok, err := tasks.AcquireLease(ctx, task.ID, "b", t0.Add(time.Second), time.Minute); ok || err != nil {
			t.Fatalf("second runner leased a held task: %v %v", ok, err)
		}
		if got, err := tasks.ExpiredLeases(ctx, t0.Add(30*time.Second)); err != nil || len(got) != 0 {
			t.Fatalf("live lease listed expired: %v, %v", taskIDs(got), err)
		}
		if got, err := tasks.ExpiredLeases(ctx, t0.Add(2*time.Minute)); err != nil || !slices.Equal(taskIDs(got), []string{"tsk_1"}) {
			t.Fatalf("expired %v, %v", taskIDs(got), err)
		}
		if ok, err := tasks.AcquireLease(ctx, task.ID, "b", t0.Add(2*time.Minute), time.Minute); !ok || err != nil {
			t.Fatalf("expired lease not taken over: %v %v", ok, err)
		}
		must(t, tasks.ReleaseLease(ctx, task.ID, "a")) // not a's any more: no-op
		if ok, _ := tasks.AcquireLease(ctx, task.ID, "c", t0.Add(2*time.Minute), time.Minute); ok {
			t.Fatal("a released another owner's lease")
		}
		must(t, tasks.ReleaseLease(ctx, task.ID, "b"))
		if ok, _ := tasks.AcquireLease(ctx, task.ID, "c", t0.Add(2*time.Minute), time.Minute); !ok {
			t.Fatal("released lease not free")
		}
		must(t, tasks.ClearLeases(ctx))
		if ok, _ := tasks.AcquireLease(ctx, task.ID, "d", t0.Add(2*time.Minute), time.Minute); !ok {
			t.Fatal("cleared lease not free")
		}
		if ok, err := tasks.AcquireLease(ctx, "tsk_none", "a", t0, time.Minute); ok || err != nil {
			t.Fatalf("unknown task leased: %v %v", ok, err)
		}
	}},
	{"concurrent runners: one lease", func(t *testing.T, w world) {
		w.task(t, "tsk_1", "queued")
		var owners [8]bool
		race(t, len(owners), func(i int) error {
			ok, err := w.st.Tasks().AcquireLease(ctx, "tsk_1", string(rune('a'+i)), t0, time.Minute)
			owners[i] = ok
			return err
		})
		n := 0
		for _, ok := range owners {
			if ok {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d runners hold the lease", n)
		}
	}},
	{"insert, update, read", func(t *testing.T, w world) {
		tasks := w.st.Tasks()
		task := store.Task{ID: "tsk_1", OrgID: w.org, Kind: "register", State: "queued", Steps: "[]", CreatedAt: t0, UpdatedAt: t0}
		must(t, tasks.Insert(ctx, task))
		if err := tasks.Insert(ctx, task); err == nil {
			t.Fatal("a task id was taken twice")
		}
		got, err := tasks.Get(ctx, w.org, "tsk_1")
		if err != nil || got != task {
			t.Fatalf("get %+v, %v", got, err)
		}
		task.State, task.GateID, task.Payload, task.Result, task.UpdatedAt = "running", "gate_1", `{"a":1}`, `{"ok":true}`, t0.Add(time.Minute)
		must(t, tasks.Update(ctx, task))
		must(t, w.st.InTx(ctx, func(tx *store.Tx) error {
			got, err := tx.Tasks().Lock(ctx, w.org, "tsk_1")
			if err != nil || got != task {
				t.Errorf("lock %+v, %v", got, err)
			}
			return err
		}))
		if got, err := tasks.GetAnyOrg(ctx, "tsk_1"); err != nil || got != task {
			t.Fatalf("any org %+v, %v", got, err)
		}
		_, err = tasks.Get(ctx, "org_other", "tsk_1")
		wantErr(t, "another organisation's task", err, store.ErrNotFound)
		_, err = tasks.GetAnyOrg(ctx, "tsk_none")
		wantErr(t, "unknown task", err, store.ErrNotFound)
	}},
	{"unfinished, on a gate", func(t *testing.T, w world) {
		tasks := w.st.Tasks()
		for i, c := range []struct{ id, state, kind, gate string }{
			{"tsk_q", "queued", "launch", "gate_1"},
			{"tsk_r", "running", "launch", "gate_1"},
			{"tsk_s", "succeeded", "launch", "gate_1"},
			{"tsk_g", "input_required", "register", "gate_1"},
		} {
			must(t, tasks.Insert(ctx, store.Task{ID: c.id, OrgID: w.org, Kind: c.kind, State: c.state, GateID: c.gate, Steps: "[]", CreatedAt: t0.Add(time.Duration(i)), UpdatedAt: t0}))
		}
		if got, err := tasks.Unfinished(ctx); err != nil || !slices.Equal(taskIDs(got), []string{"tsk_q", "tsk_r"}) {
			t.Fatalf("unfinished %v, %v", taskIDs(got), err)
		}
		if got, err := tasks.OnGate(ctx, "gate_1"); err != nil || !slices.Equal(taskIDs(got), []string{"tsk_q", "tsk_r", "tsk_s"}) {
			t.Fatalf("on gate %v, %v", taskIDs(got), err)
		}
	}},
	{"list filters and pages", func(t *testing.T, w world) {
		tasks := w.st.Tasks()
		for i, c := range []struct{ id, state, project string }{
			{"tsk_1", "queued", w.proj}, {"tsk_2", "succeeded", w.proj}, {"tsk_3", "queued", ""}, {"tsk_4", "queued", w.proj},
		} {
			must(t, tasks.Insert(ctx, store.Task{ID: c.id, OrgID: w.org, ProjectID: c.project, Kind: "launch", State: c.state, Steps: "[]", CreatedAt: t0.Add(time.Duration(i) * time.Second), UpdatedAt: t0}))
		}
		w.other(t, "org_b").task(t, "tsk_b", "queued")
		if got, err := tasks.List(ctx, w.org, 3); err != nil || !slices.Equal(taskIDs(got), []string{"tsk_4", "tsk_3", "tsk_2"}) {
			t.Fatalf("list %v, %v", taskIDs(got), err)
		}
		for _, c := range []struct {
			f    store.Filter
			want []string
		}{
			{store.Filter{}, []string{"tsk_4", "tsk_3", "tsk_2", "tsk_1"}},
			{store.Filter{State: "queued", ProjectID: w.proj}, []string{"tsk_4", "tsk_1"}},
			{store.Filter{Limit: 1, After: store.Cursor{At: t0.Add(2 * time.Second).UnixMicro(), ID: "tsk_3"}}, []string{"tsk_2"}},
		} {
			got, err := tasks.ListFiltered(ctx, w.org, c.f)
			if err != nil || !slices.Equal(taskIDs(got), c.want) {
				t.Errorf("list %+v: %v, %v; want %v", c.f, taskIDs(got), err, c.want)
			}
		}
	}},
}
