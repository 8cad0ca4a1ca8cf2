package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

// errNoRoom is a caller's own refusal, after reading a locked project.
var errNoRoom = errors.New("no room in the budget")

func TestProjects(t *testing.T) { runCases(t, projectsCases) }

// projectsCases are TestProjects's cases, each run on every engine.
var projectsCases = []storeCase{
	{"a child project is listed until it is deleted, and its row stays", func(t *testing.T, w world) {
		projects := w.st.Projects()
		child := store.Project{ID: "prj_child", OrgID: w.org, Name: "conformance-1", LimitMicro: 40, Policy: "{}", CreatedAt: t0.Add(time.Second), ParentID: w.proj}
		must(t, projects.Create(ctx, child))
		got, err := projects.Get(ctx, w.org, child.ID)
		if err != nil || got.ParentID != w.proj || got.DeletedAt != nil {
			t.Fatalf("child %+v, %v", got, err)
		}
		kids, err := projects.Children(ctx, w.org, w.proj)
		if err != nil || len(kids) != 1 || kids[0].ID != child.ID {
			t.Fatalf("children %+v, %v", kids, err)
		}
		o := w.other(t, "org_b")
		if kids, _ := o.st.Projects().Children(ctx, o.org, w.proj); len(kids) != 0 {
			t.Fatalf("another organisation sees the child: %+v", kids)
		}
		must(t, projects.MarkDeleted(ctx, child.ID, `{"state":"deleted"}`, t0.Add(time.Minute)))
		wantErr(t, "deleted twice", projects.MarkDeleted(ctx, child.ID, `{}`, t0.Add(2*time.Minute)), store.ErrConflict)
		list, err := projects.List(ctx, w.org)
		if err != nil || len(list) != 1 || list[0].ID != w.proj {
			t.Fatalf("list after deletion %+v, %v", list, err)
		}
		page, err := projects.Page(ctx, w.org, store.Filter{Limit: 10})
		if err != nil || len(page) != 1 {
			t.Fatalf("page after deletion %+v, %v", page, err)
		}
		if kids, _ := projects.Children(ctx, w.org, w.proj); len(kids) != 0 {
			t.Fatalf("a deleted child is still a child: %+v", kids)
		}
		got, err = projects.Get(ctx, w.org, child.ID)
		if err != nil || got.DeletedAt == nil || !got.DeletedAt.Equal(t0.Add(time.Minute)) || got.Deletion != `{"state":"deleted"}` {
			t.Fatalf("deleted child %+v, %v", got, err)
		}
	}},
	{"the pending gates of a project's tasks", func(t *testing.T, w world) {
		w.task(t, "tsk_in", "input_required")
		other := store.Task{ID: "tsk_elsewhere", OrgID: w.org, ProjectID: "", Kind: "email_setup", State: "input_required", Steps: "[]", CreatedAt: t0, UpdatedAt: t0}
		must(t, w.st.Tasks().Insert(ctx, other))
		gates := w.st.Gates()
		must(t, gates.Insert(ctx, store.Gate{ID: "gat_in", OrgID: w.org, TaskID: "tsk_in", Kind: "budget_raise", Payload: "{}", CreatedAt: t0}))
		must(t, gates.Insert(ctx, store.Gate{ID: "gat_done", OrgID: w.org, TaskID: "tsk_in", Kind: "budget_raise", Payload: "{}", CreatedAt: t0}))
		must(t, gates.Decide(ctx, w.org, "gat_done", "denied", "h", t0))
		must(t, gates.Insert(ctx, store.Gate{ID: "gat_elsewhere", OrgID: w.org, TaskID: "tsk_elsewhere", Kind: "email_setup", Payload: "{}", CreatedAt: t0}))
		got, err := gates.PendingInProject(ctx, w.org, w.proj)
		if err != nil || len(got) != 1 || got[0].ID != "gat_in" {
			t.Fatalf("pending in project %+v, %v", got, err)
		}
		if got, _ := gates.PendingInProject(ctx, "org_other", w.proj); len(got) != 0 {
			t.Fatalf("another organisation sees the gates: %+v", got)
		}
	}},
	{"never overspend", func(t *testing.T, w world) {
		projects := w.st.Projects()
		must(t, projects.MoveMoney(ctx, w.proj, 60, 0))
		wantErr(t, "held past the limit", projects.MoveMoney(ctx, w.proj, 50, 0), store.ErrBudget)
		must(t, projects.MoveMoney(ctx, w.proj, -60, 60))
		wantErr(t, "limit below spent", projects.SetBudgetLimit(ctx, w.proj, 59), store.ErrBudget)
		wantErr(t, "negative hold", projects.MoveMoney(ctx, w.proj, -1, 0), store.ErrBudget)
		must(t, projects.SetBudgetLimit(ctx, w.proj, 60))
		// A transaction that fails leaves the money where it was.
		boom := errors.New("boom")
		err := w.st.InTx(ctx, func(tx *store.Tx) error {
			must(t, tx.Projects().SetBudgetLimit(ctx, w.proj, 100))
			must(t, tx.Projects().MoveMoney(ctx, w.proj, 0, 40))
			return boom
		})
		wantErr(t, "rolled back", err, boom)
		p, err := projects.Get(ctx, w.org, w.proj)
		if err != nil || p.SpentMicro != 60 || p.HeldMicro != 0 || p.LimitMicro != 60 {
			t.Fatalf("project %+v, %v", p, err)
		}
		_, err = projects.Get(ctx, "org_other", w.proj)
		wantErr(t, "another organisation read the project", err, store.ErrNotFound)
	}},
	{"concurrent spends never overspend", func(t *testing.T, w world) {
		// Each spender reads the locked project and spends 30 of the
		// 100 only if there is room: three of them can.
		wins := race(t, 10, func(int) error {
			return w.st.InTx(ctx, func(tx *store.Tx) error {
				p, err := tx.Projects().Lock(ctx, w.org, w.proj)
				if err != nil {
					return err
				}
				if p.LimitMicro-p.SpentMicro-p.HeldMicro < 30 {
					return errNoRoom
				}
				return tx.Projects().MoveMoney(ctx, w.proj, 0, 30)
			})
		}, errNoRoom)
		p, _ := w.st.Projects().Get(ctx, w.org, w.proj)
		if wins != 3 || p.SpentMicro != 90 {
			t.Fatalf("%d spends of 30 went through; spent %d of %d", wins, p.SpentMicro, p.LimitMicro)
		}
	}},
	{"concurrent holds without a lock: the database refuses the overspend", func(t *testing.T, w world) {
		wins := race(t, 10, func(int) error { return w.st.Projects().MoveMoney(ctx, w.proj, 25, 0) }, store.ErrBudget)
		p, _ := w.st.Projects().Get(ctx, w.org, w.proj)
		if wins != 4 || p.HeldMicro != 100 {
			t.Fatalf("%d holds of 25 went through; held %d", wins, p.HeldMicro)
		}
	}},
	{"list, oldest first", func(t *testing.T, w world) {
		projects := w.st.Projects()
		must(t, projects.Create(ctx, store.Project{ID: "prj_2", OrgID: w.org, Name: "two", LimitMicro: 5, Policy: `{"x":1}`, CreatedAt: t0.Add(time.Second)}))
		if err := projects.Create(ctx, store.Project{ID: "prj_2", OrgID: w.org, Name: "again", CreatedAt: t0}); err == nil {
			t.Fatal("a project id was taken twice")
		}
		if err := projects.Create(ctx, store.Project{ID: "prj_neg", OrgID: w.org, LimitMicro: -1, CreatedAt: t0}); err == nil {
			t.Fatal("a negative limit was stored")
		}
		w.other(t, "org_b")
		got, err := projects.List(ctx, w.org)
		if err != nil || len(got) != 2 || got[0].ID != w.proj || got[1].ID != "prj_2" || got[1].Policy != `{"x":1}` || got[1].LimitMicro != 5 {
			t.Fatalf("list %+v, %v", got, err)
		}
		p, err := projects.Lock(ctx, w.org, "prj_2")
		if err != nil || p != got[1] {
			t.Fatalf("lock %+v, %v", p, err)
		}
		_, err = projects.Lock(ctx, "org_b", "prj_2")
		wantErr(t, "another organisation locked it", err, store.ErrNotFound)
	}},
	{"holds' earliest expiry", func(t *testing.T, w world) {
		projects := w.st.Projects()
		p, _ := projects.Get(ctx, w.org, w.proj)
		if !p.HoldsExpireAt.After(t0.AddDate(1000, 0, 0)) {
			t.Fatalf("a new project has no hold to expire: %v", p.HoldsExpireAt)
		}
		hold := func(id string, amount money.MicroUSD, expires time.Time) {
			must(t, projects.Hold(ctx, w.proj, amount, expires))
			must(t, w.st.Quotes().Insert(ctx, store.Quote{ID: id, OrgID: w.org, ProjectID: w.proj, Decision: "ALLOW", State: "held",
				AmountMicro: amount, Items: "[]", Reasons: "[]", CreatedAt: t0, ExpiresAt: expires}))
		}
		hold("quo_late", 10, t0.Add(time.Hour))
		hold("quo_early", 20, t0.Add(time.Minute))
		hold("quo_mid", 30, t0.Add(30*time.Minute))
		if p, _ = projects.Get(ctx, w.org, w.proj); !p.HoldsExpireAt.Equal(t0.Add(time.Minute)) || p.HeldMicro != 60 {
			t.Fatalf("after three holds: expire %v held %d", p.HoldsExpireAt, p.HeldMicro)
		}
		wantErr(t, "held past the limit", projects.Hold(ctx, w.proj, 41, t0), store.ErrBudget)
		must(t, w.st.Quotes().Settle(ctx, "quo_early", "expired", t0.Add(time.Minute)))
		if at, err := projects.RecountHoldsExpire(ctx, w.proj); err != nil || !at.Equal(t0.Add(30*time.Minute)) {
			t.Fatalf("recounted %v %v", at, err)
		}
		for _, id := range []string{"quo_mid", "quo_late"} {
			must(t, w.st.Quotes().Settle(ctx, id, "released", t0))
		}
		if at, _ := projects.RecountHoldsExpire(ctx, w.proj); !at.After(t0.AddDate(1000, 0, 0)) {
			t.Fatalf("no held quote left, and the earliest expiry is %v", at)
		}
	}},
}
