package store_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/nameindex"
	"github.com/pierhq/pier/server/internal/store"
)

func serviceIDs(vs []store.Service) []string {
	var ids []string
	for _, v := range vs {
		ids = append(ids, v.ID)
	}
	return ids
}

func TestServices(t *testing.T) { runCases(t, servicesCases) }

// servicesCases are TestServices's cases, each run on every engine.
var servicesCases = []storeCase{
	{"a host has one owner", func(t *testing.T, w world) {
		b := w.other(t, "org_b")
		sa, sb := w.service(t, "svc_a"), b.service(t, "svc_b")
		services := w.st.Services()
		must(t, services.ClaimHost(ctx, "Shop.Example", sa.ID, w.org, t0))
		must(t, services.ClaimHost(ctx, "shop.example", sa.ID, w.org, t0)) // again, same service
		wantErr(t, "another organisation took the host", services.ClaimHost(ctx, "shop.example", sb.ID, b.org, t0), store.ErrConflict)
		// Retiring from the store, outside any transaction, still sets
		// the state and frees the hosts together.
		must(t, services.Retire(ctx, sa.ID, "torn_down", t0))
		if hosts, err := services.Hosts(ctx, sa.ID); err != nil || len(hosts) != 0 {
			t.Fatalf("retired service keeps %v, %v", hosts, err)
		}
		if got, _ := services.Get(ctx, w.org, sa.ID); got.State != "torn_down" {
			t.Fatalf("retired service is %s", got.State)
		}
		must(t, services.ClaimHost(ctx, "shop.example", sb.ID, b.org, t0))
		if id, org, err := services.HostOwner(ctx, "SHOP.example"); err != nil || id != sb.ID || org != b.org {
			t.Fatalf("owner %s %s, %v", id, org, err)
		}
		_, _, err := services.HostOwner(ctx, "free.example")
		wantErr(t, "nobody's host", err, store.ErrNotFound)
	}},
	{"concurrent claims of a host: one service wins, in transactions too", func(t *testing.T, w world) {
		var ids []string
		for i := range 6 {
			ids = append(ids, w.service(t, "svc_"+string(rune('a'+i))).ID)
		}
		wins := race(t, len(ids), func(i int) error {
			return w.st.InTx(ctx, func(tx *store.Tx) error {
				if err := tx.Services().ClaimHost(ctx, "shop.example", ids[i], w.org, t0); err != nil {
					return err
				}
				// The transaction goes on after a refusal, on both engines.
				return tx.Services().SetState(ctx, ids[i], "live", t0)
			})
		}, store.ErrConflict)
		if wins != 1 {
			t.Fatalf("%d services hold one host", wins)
		}
		must(t, w.st.InTx(ctx, func(tx *store.Tx) error {
			wantErr(t, "refused", tx.Services().ClaimHost(ctx, "shop.example", "svc_none", w.org, t0), store.ErrConflict)
			return tx.Services().ClaimHost(ctx, "next.example", ids[0], w.org, t0)
		}))
	}},
	{"hosts released, domain detached", func(t *testing.T, w world) {
		services := w.st.Services()
		v := w.service(t, "svc_a")
		must(t, services.SetTask(ctx, v.ID, "tsk_2", "launching", t0))
		for _, h := range []string{v.PreviewHost, "shop.dev", "www.shop.dev"} {
			must(t, services.ClaimHost(ctx, h, v.ID, w.org, t0))
		}
		if _, err := w.st.DB().Exec(`UPDATE services SET domain = 'shop.dev'`); err != nil {
			t.Fatal(err)
		}
		must(t, services.DetachDomain(ctx, v.ID, "shop.dev", t0.Add(time.Minute)))
		if hosts, err := services.Hosts(ctx, v.ID); err != nil || !slices.Equal(hosts, []string{v.PreviewHost}) {
			t.Fatalf("hosts after detaching %v, %v", hosts, err)
		}
		got, _ := services.Get(ctx, w.org, v.ID)
		if got.Domain != "" || got.TaskID != "tsk_2" || got.State != "launching" || !got.UpdatedAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("service %+v", got)
		}
		must(t, services.ReleaseHost(ctx, v.ID, strings.ToUpper(v.PreviewHost)))
		if hosts, _ := services.Hosts(ctx, v.ID); len(hosts) != 0 {
			t.Fatalf("hosts %v", hosts)
		}
	}},
	{"a live name is the project's once", func(t *testing.T, w world) {
		services := w.st.Services()
		v := w.service(t, "svc_a")
		dup := v
		dup.ID, dup.PreviewHost = "svc_dup", "dup.preview.test"
		wantErr(t, "a second live service of that name", services.Insert(ctx, dup), store.ErrConflict)
		dup.ID, dup.Name = v.ID, "other"
		wantErr(t, "an id taken", services.Insert(ctx, dup), store.ErrConflict)
		must(t, services.SetState(ctx, v.ID, "failed", t0))
		dup.ID, dup.Name = "svc_dup", v.Name
		must(t, services.Insert(ctx, dup)) // a failed service gives its name up
		if got, err := services.ByName(ctx, w.org, w.proj, v.Name); err != nil || got.ID != "svc_dup" {
			t.Fatalf("by name %+v, %v", got, err)
		}
		_, err := services.ByName(ctx, w.org, w.proj, "nobody")
		wantErr(t, "unknown name", err, store.ErrNotFound)
	}},
	{"a refused insert leaves the transaction usable", func(t *testing.T, w world) {
		v := w.service(t, "svc_a")
		must(t, w.st.ServiceVersions().Insert(ctx, store.ServiceVersion{ServiceID: v.ID, OrgID: w.org, Number: 1, Spec: "{}", State: "live", CreatedAt: t0}))
		w.address(t, "adr_1", "hi@shop.dev", false, 10)
		must(t, w.st.InTx(ctx, func(tx *store.Tx) error {
			dup := v
			dup.ID, dup.PreviewHost = "svc_dup", "dup"
			wantErr(t, "a live name taken", tx.Services().Insert(ctx, dup), store.ErrConflict)
			wantErr(t, "a number taken", tx.ServiceVersions().Insert(ctx, store.ServiceVersion{ServiceID: v.ID, OrgID: w.org, Number: 1, Spec: "{}", State: "live", CreatedAt: t0}), store.ErrConflict)
			wantErr(t, "an address taken", tx.Mail().CreateAddress(ctx, store.EmailAddress{ID: "adr_2", OrgID: w.org, Domain: "shop.dev", Address: "hi@shop.dev", InboxID: "inb_2", CreatedAt: t0}, 10), store.ErrConflict)
			return tx.Services().SetState(ctx, v.ID, "crashed", t0)
		}))
		if got, _ := w.st.Services().Get(ctx, w.org, v.ID); got.State != "crashed" {
			t.Fatalf("the write after the refusals: %s", got.State)
		}
		if inboxes, _ := w.st.Mail().Inboxes(ctx, w.org, store.Filter{}); len(inboxes) != 1 {
			t.Fatalf("the refused address left its inbox: %+v", inboxes)
		}
	}},
	{"concurrent launches of one name: one service", func(t *testing.T, w world) {
		wins := race(t, 6, func(i int) error {
			id := "svc_" + string(rune('a'+i))
			return w.st.InTx(ctx, func(tx *store.Tx) error {
				return tx.Services().Insert(ctx, store.Service{ID: id, OrgID: w.org, ProjectID: w.proj, Name: "shop", Target: "edge",
					PreviewHost: id + ".preview.test", State: "launching", TaskID: "t", CreatedAt: t0, UpdatedAt: t0})
			})
		}, store.ErrConflict)
		if wins != 1 {
			t.Fatalf("%d live services named shop", wins)
		}
	}},
	{"reads", func(t *testing.T, w world) {
		services := w.st.Services()
		b := w.other(t, "org_b")
		v := store.Service{ID: "svc_a", OrgID: w.org, ProjectID: w.proj, Name: "a", Target: "process", PreviewHost: "a.preview.test",
			Domain: "shop.dev", BundleID: "bnd_1", State: "live", TaskID: "tsk_1", CreatedAt: t0, UpdatedAt: t0, RunnerSeen: time.UnixMicro(0).UTC()}
		must(t, services.Insert(ctx, v))
		must(t, services.ClaimHost(ctx, v.PreviewHost, v.ID, w.org, t0))
		if got, err := services.Get(ctx, w.org, v.ID); err != nil || got != v {
			t.Fatalf("get %+v, %v", got, err)
		}
		if got, err := services.GetAnyOrg(ctx, v.ID); err != nil || got != v {
			t.Fatalf("any org %+v, %v", got, err)
		}
		must(t, w.st.InTx(ctx, func(tx *store.Tx) error {
			got, err := tx.Services().Lock(ctx, w.org, v.ID)
			if err != nil || got != v {
				t.Errorf("lock %+v, %v", got, err)
			}
			return err
		}))
		_, err := services.Get(ctx, b.org, v.ID)
		wantErr(t, "another organisation's service", err, store.ErrNotFound)
		if got, err := services.ByHost(ctx, "A.preview.test"); err != nil || got != v {
			t.Fatalf("by host %+v, %v", got, err)
		}
		if got, err := services.LiveForDomain(ctx, w.org, "shop.dev"); err != nil || got.ID != v.ID {
			t.Fatalf("live for domain %+v, %v", got, err)
		}
		_, err = services.LiveForDomain(ctx, b.org, "shop.dev")
		wantErr(t, "another organisation's domain", err, store.ErrNotFound)
		must(t, services.SetState(ctx, v.ID, "crashed", t0))
		if _, err := services.ByHost(ctx, v.PreviewHost); err != nil {
			t.Fatalf("a crashed service still answers: %v", err)
		}
		must(t, services.SetState(ctx, v.ID, "tearing_down", t0))
		_, err = services.ByHost(ctx, v.PreviewHost)
		wantErr(t, "a service tearing down answers", err, store.ErrNotFound)
		w.service(t, "svc_b")
		if got, err := services.InProject(ctx, w.org, w.proj); err != nil || !slices.Equal(serviceIDs(got), []string{"svc_a", "svc_b"}) {
			t.Fatalf("in project %v, %v", serviceIDs(got), err)
		}
	}},
	{"list filters and pages", func(t *testing.T, w world) {
		services := w.st.Services()
		must(t, w.st.Projects().Create(ctx, store.Project{ID: "prj_2", OrgID: w.org, Name: "two", Policy: "{}", CreatedAt: t0}))
		for i, c := range []struct{ id, project, state string }{
			{"svc_1", w.proj, "live"}, {"svc_2", w.proj, "failed"}, {"svc_3", "prj_2", "live"},
		} {
			must(t, services.Insert(ctx, store.Service{ID: c.id, OrgID: w.org, ProjectID: c.project, Name: c.id, Target: "edge", PreviewHost: c.id,
				State: c.state, TaskID: "t", CreatedAt: t0.Add(time.Duration(i) * time.Second), UpdatedAt: t0}))
		}
		for _, c := range []struct {
			f    store.Filter
			want []string
		}{
			{store.Filter{}, []string{"svc_3", "svc_2", "svc_1"}},
			{store.Filter{ProjectID: w.proj}, []string{"svc_2", "svc_1"}},
			{store.Filter{State: "live"}, []string{"svc_3", "svc_1"}},
			{store.Filter{Limit: 1, After: store.Cursor{At: t0.Add(2 * time.Second).UnixMicro(), ID: "svc_3"}}, []string{"svc_2"}},
		} {
			got, err := services.List(ctx, w.org, c.f)
			if err != nil || !slices.Equal(serviceIDs(got), c.want) {
				t.Errorf("list %+v: %v, %v; want %v", c.f, serviceIDs(got), err, c.want)
			}
		}
	}},
	{"a retire that rolls back keeps state and hosts", func(t *testing.T, w world) {
		v := w.service(t, "svc_a")
		must(t, w.st.Services().ClaimHost(ctx, "a.example", v.ID, w.org, t0))
		boom := errors.New("boom")
		err := w.st.InTx(ctx, func(tx *store.Tx) error {
			if err := tx.Services().Retire(ctx, v.ID, "torn_down", t0); err != nil {
				return err
			}
			return boom
		})
		wantErr(t, "rolled back", err, boom)
		if got, err := w.st.Services().Get(ctx, w.org, v.ID); err != nil || got.State != "live" {
			t.Fatalf("rolled-back retire left %+v, %v", got, err)
		}
		if hosts, _ := w.st.Services().Hosts(ctx, v.ID); len(hosts) != 1 {
			t.Fatalf("rolled-back retire released hosts: %v", hosts)
		}
	}},
	{"databases", func(t *testing.T, w world) {
		services := w.st.Services()
		_, err := services.Database(ctx, "svc_a")
		wantErr(t, "none yet", err, store.ErrNotFound)
		d := store.ServiceDatabase{ServiceID: "svc_a", OrgID: w.org, Name: "db_a", Password: "pw", State: "creating", CreatedAt: t0}
		must(t, services.InsertDatabase(ctx, d))
		again := d
		again.Name, again.Password = "db_other", "pw2"
		must(t, services.InsertDatabase(ctx, again)) // a retry keeps the first
		if got, err := services.Database(ctx, "svc_a"); err != nil || got != d {
			t.Fatalf("database %+v, %v", got, err)
		}
		must(t, services.SetDatabaseState(ctx, "svc_a", "dumped", "sha_1"))
		must(t, services.SetDatabaseState(ctx, "svc_a", "dropped", ""))
		if got, _ := services.Database(ctx, "svc_a"); got.State != "dropped" || got.DumpSHA != "sha_1" {
			t.Fatalf("database %+v", got)
		}
	}},
	{"hosts claimed since a time, for the name index", func(t *testing.T, w world) {
		sa := w.service(t, "svc_a")
		services := w.st.Services()
		must(t, services.ClaimHost(ctx, "Old.Example", sa.ID, w.org, t0))
		must(t, services.ClaimHost(ctx, "new.example", sa.ID, w.org, t0.Add(time.Hour)))
		all, err := services.HostsSince(ctx, 0)
		if err != nil || !slices.Contains(named(all), "old.example") || !slices.Contains(named(all), "new.example") {
			t.Fatalf("all hosts %v, %v", all, err)
		}
		recent, err := services.HostsSince(ctx, t0.Add(time.Minute).UnixMicro())
		if err != nil || !slices.Equal(named(recent), []string{"new.example"}) || recent[0].Added != t0.Add(time.Hour).UnixMicro() {
			t.Fatalf("hosts since %v, %v", recent, err)
		}
	}},
}

func named(ns []nameindex.Name) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name)
	}
	return out
}

func TestServiceVersions(t *testing.T) { runCases(t, serviceVersionsCases) }

// serviceVersionsCases are TestServiceVersions's cases, each run on every engine.
var serviceVersionsCases = []storeCase{
	{"numbered once", func(t *testing.T, w world) {
		versions := w.st.ServiceVersions()
		v := w.service(t, "svc_a")
		if n, err := versions.Next(ctx, v.ID); err != nil || n != 1 {
			t.Fatalf("next %d, %v", n, err)
		}
		one := store.ServiceVersion{ServiceID: v.ID, OrgID: w.org, Number: 1, BundleID: "bnd_1", Spec: "{}", State: "starting", TaskID: "tsk_1", CreatedAt: t0}
		must(t, versions.Insert(ctx, one))
		wantErr(t, "a number taken", versions.Insert(ctx, one), store.ErrConflict)
		two := store.ServiceVersion{ServiceID: v.ID, OrgID: w.org, Number: 2, Spec: `{"cmd":"x"}`, State: "starting", CreatedAt: t0.Add(time.Second)}
		must(t, versions.Insert(ctx, two))
		if n, _ := versions.Next(ctx, v.ID); n != 3 {
			t.Fatalf("next %d", n)
		}
		if got, err := versions.Get(ctx, v.ID, 1); err != nil || got != one {
			t.Fatalf("get %+v, %v", got, err)
		}
		_, err := versions.Get(ctx, v.ID, 9)
		wantErr(t, "unknown number", err, store.ErrNotFound)
		must(t, versions.SetState(ctx, v.ID, 2, "failed", "exit 1"))
		got, err := versions.List(ctx, v.ID, 10)
		if err != nil || len(got) != 2 || got[0].Number != 2 || got[0].Detail != "exit 1" || got[0].State != "failed" || got[1] != one {
			t.Fatalf("list %+v, %v", got, err)
		}
		if got, _ := versions.List(ctx, v.ID, 1); len(got) != 1 {
			t.Fatalf("limit: %d", len(got))
		}
	}},
	{"concurrent deploys: one takes a number", func(t *testing.T, w world) {
		v := w.service(t, "svc_a")
		wins := race(t, 6, func(i int) error {
			return w.st.InTx(ctx, func(tx *store.Tx) error {
				n, err := tx.ServiceVersions().Next(ctx, v.ID)
				if err != nil {
					return err
				}
				return tx.ServiceVersions().Insert(ctx, store.ServiceVersion{ServiceID: v.ID, OrgID: w.org, Number: n, Spec: "{}", State: "starting", CreatedAt: t0})
			})
		}, store.ErrConflict)
		got, _ := w.st.ServiceVersions().List(ctx, v.ID, 10)
		if wins != len(got) {
			t.Fatalf("%d deploys went through, %d versions", wins, len(got))
		}
		for i, sv := range got {
			if sv.Number != len(got)-i {
				t.Fatalf("versions %+v", got)
			}
		}
	}},
}

func TestServiceRuns(t *testing.T) { runCases(t, serviceRunsCases) }

// serviceRunsCases are TestServiceRuns's cases, each run on every engine.
var serviceRunsCases = []storeCase{
	{"serve, health, upstream", func(t *testing.T, w world) {
		runs, versions := w.st.ServiceRuns(), w.st.ServiceVersions()
		v := w.service(t, "svc_a")
		for n := 1; n <= 2; n++ {
			must(t, versions.Insert(ctx, store.ServiceVersion{ServiceID: v.ID, OrgID: w.org, Number: n, Spec: "{}", State: "starting", Detail: "booting", CreatedAt: t0}))
		}
		must(t, runs.Serve(ctx, v.ID, 1, "bnd_1", "127.0.0.1:9001", "replica_1", t0.Add(time.Second)))
		must(t, runs.Serve(ctx, v.ID, 2, "bnd_2", "127.0.0.1:9002", "replica_1", t0.Add(2*time.Second)))
		one, _ := versions.Get(ctx, v.ID, 1)
		two, _ := versions.Get(ctx, v.ID, 2)
		if one.State != "superseded" || two.State != "live" || two.Detail != "" {
			t.Fatalf("versions %+v %+v", one, two)
		}
		got, _ := w.st.Services().Get(ctx, w.org, v.ID)
		if got.Version != 2 || got.BundleID != "bnd_2" || got.Upstream != "127.0.0.1:9002" || got.Runner != "replica_1" || !got.RunnerSeen.Equal(t0.Add(2*time.Second)) || got.State != "live" {
			t.Fatalf("served %+v", got)
		}
		must(t, runs.SetUpstream(ctx, v.ID, "127.0.0.1:9003", "replica_2", t0.Add(3*time.Second)))
		must(t, runs.SetHealth(ctx, v.ID, `{"ok":false}`, "crashed", t0.Add(4*time.Second)))
		must(t, runs.SetHealth(ctx, v.ID, `{"ok":false,"n":2}`, "", t0.Add(5*time.Second)))
		got, _ = w.st.Services().Get(ctx, w.org, v.ID)
		if got.Upstream != "127.0.0.1:9003" || got.Runner != "replica_2" || got.State != "crashed" || got.Health != `{"ok":false,"n":2}` || !got.UpdatedAt.Equal(t0.Add(4*time.Second)) {
			t.Fatalf("after health %+v", got)
		}
		// Health never brings a torn-down service back.
		must(t, w.st.Services().SetState(ctx, v.ID, "torn_down", t0))
		must(t, runs.SetHealth(ctx, v.ID, `{}`, "live", t0))
		if got, _ := w.st.Services().Get(ctx, w.org, v.ID); got.State != "torn_down" {
			t.Fatalf("health revived a torn-down service: %s", got.State)
		}
	}},
	{"adopt and heartbeat", func(t *testing.T, w world) {
		runs := w.st.ServiceRuns()
		mk := func(id, target, runner string, seen time.Time, version int) {
			must(t, w.st.Services().Insert(ctx, store.Service{ID: id, OrgID: w.org, ProjectID: w.proj, Name: id, Target: target, PreviewHost: id,
				State: "live", TaskID: "t", CreatedAt: t0, UpdatedAt: t0}))
			if version > 0 {
				must(t, runs.Serve(ctx, id, version, "", "up", runner, seen))
			}
		}
		mk("svc_orphan", "process", "", t0, 1)
		mk("svc_mine", "worker", "r1", t0, 1)
		mk("svc_stale", "process", "r2", t0, 1)
		mk("svc_fresh", "process", "r3", t0.Add(time.Hour), 1)
		mk("svc_edge", "edge", "", t0, 1)
		mk("svc_new", "process", "", t0, 0)
		got, err := runs.Adopt(ctx, "r1", t0.Add(time.Minute), t0.Add(time.Hour))
		ids := serviceIDs(got)
		slices.Sort(ids)
		if err != nil || !slices.Equal(ids, []string{"svc_mine", "svc_orphan", "svc_stale"}) {
			t.Fatalf("adopted %v, %v", ids, err)
		}
		must(t, runs.Heartbeat(ctx, "r1", t0.Add(2*time.Hour)))
		for _, id := range ids {
			if s, _ := w.st.Services().Get(ctx, w.org, id); s.Runner != "r1" || !s.RunnerSeen.Equal(t0.Add(2*time.Hour)) {
				t.Fatalf("after the heartbeat %+v", s)
			}
		}
		if s, _ := w.st.Services().Get(ctx, w.org, "svc_fresh"); s.Runner != "r3" {
			t.Fatalf("a fresh runner's service was adopted: %+v", s)
		}
	}},
}

func TestServiceLogs(t *testing.T) { runCases(t, serviceLogsCases) }

// serviceLogsCases are TestServiceLogs's cases, each run on every engine.
var serviceLogsCases = []storeCase{
	{"append, read, tail, trim", func(t *testing.T, w world) {
		logs := w.st.ServiceLogs()
		must(t, logs.Append(ctx, nil))
		if n, err := logs.LastSeq(ctx, "svc_a"); err != nil || n != 0 {
			t.Fatalf("last of none %d, %v", n, err)
		}
		var lines []store.LogLine
		for i := int64(1); i <= 10; i++ {
			lines = append(lines, store.LogLine{ServiceID: "svc_a", Seq: i, At: t0.Add(time.Duration(i) * time.Second), Stream: "stdout", Version: 1 + int(i/6), Text: "line"})
		}
		must(t, logs.Append(ctx, lines[:6]))
		must(t, logs.Append(ctx, lines[4:])) // overlapping: written once
		must(t, logs.Append(ctx, []store.LogLine{{ServiceID: "svc_b", Seq: 1, At: t0, Stream: "stderr", Text: "b"}}))
		if n, err := logs.LastSeq(ctx, "svc_a"); err != nil || n != 10 {
			t.Fatalf("last %d, %v", n, err)
		}
		seqs := func(ls []store.LogLine) []int64 {
			var out []int64
			for _, l := range ls {
				out = append(out, l.Seq)
			}
			return out
		}
		for _, c := range []struct {
			q    store.LogQuery
			want []int64
		}{
			{store.LogQuery{}, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
			{store.LogQuery{After: 7}, []int64{8, 9, 10}},
			{store.LogQuery{Limit: 3}, []int64{1, 2, 3}},
			{store.LogQuery{Limit: 3, Tail: true}, []int64{8, 9, 10}},
			{store.LogQuery{Since: t0.Add(9 * time.Second)}, []int64{9, 10}},
			{store.LogQuery{Version: 1}, []int64{1, 2, 3, 4, 5}},
		} {
			got, err := logs.Read(ctx, "svc_a", c.q)
			if err != nil || !slices.Equal(seqs(got), c.want) {
				t.Errorf("read %+v: %v, %v; want %v", c.q, seqs(got), err, c.want)
			}
		}
		got, _ := logs.Read(ctx, "svc_a", store.LogQuery{Limit: 1})
		if len(got) != 1 || got[0] != lines[0] {
			t.Fatalf("line %+v, want %+v", got, lines[0])
		}
		must(t, logs.Trim(ctx, "svc_a", 20)) // fewer than kept: nothing goes
		must(t, logs.Trim(ctx, "svc_a", 4))
		if got, _ := logs.Read(ctx, "svc_a", store.LogQuery{}); !slices.Equal(seqs(got), []int64{7, 8, 9, 10}) {
			t.Fatalf("after trimming %v", seqs(got))
		}
		if got, _ := logs.Read(ctx, "svc_b", store.LogQuery{}); len(got) != 1 {
			t.Fatalf("another service's lines trimmed: %v", got)
		}
	}},
	{"a batch as large as the writer sends", func(t *testing.T, w world) {
		var lines []store.LogLine
		for i := range 500 {
			lines = append(lines, store.LogLine{ServiceID: "svc_a", Seq: int64(i + 1), At: t0, Stream: "stdout", Text: "x"})
		}
		must(t, w.st.ServiceLogs().Append(ctx, lines))
		if n, _ := w.st.ServiceLogs().LastSeq(ctx, "svc_a"); n != 500 {
			t.Fatalf("last %d", n)
		}
	}},
}
