package service

import (
	"context"
	"errors"
	"testing"

	"github.com/pierhq/pier/server/internal/store"
)

// A launch whose HTTPS never comes is retried, then given up: it ends
// failed and refunded, except a domain the registrar already sold.
func TestLaunchGivenUp(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(100, DefaultPolicy(), buyer...)
	dom := freeDomain(t, "flaky", "dev")
	q := h.quote(tn, domainItem(dom), serviceItem("static_site", "edge", "site"))
	bnd := h.site(tn, map[string]string{"index.html": "x"})
	h.platform.httpsErr = errors.New("connection refused")
	v, err := h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, LaunchRequest{Name: "site", Target: "edge", BundleID: bnd, Domain: dom, QuoteID: q.ID})
	h.must(err)
	id := h.platform.take()[0]
	for range 2 {
		if err := h.svc.Launches.RunTask(h.ctx, id); err == nil {
			t.Fatal("a launch succeeded without HTTPS")
		}
	}
	h.svc.Launches.FailTask(h.ctx, id, errors.New("connection refused"))
	h.svc.Launches.FailTask(h.ctx, id, errors.New("again")) // a second give-up refunds nothing twice
	got, _ := h.svc.Tasks.Get(h.ctx, tn.org, v.ID)
	r := got.Result
	if got.State != TaskFailed || r["blockedBy"] != "provider:failed" || r["notReversed"] == nil {
		t.Fatalf("given up %+v", r)
	}
	if left := h.remaining(tn.org, tn.project); left != 88_000_000 {
		t.Fatalf("remaining %d: the domain's 12 USD stays spent, the rest comes back", left)
	}
	if st, _ := h.svc.Domains.State(h.ctx, tn.agent, dom); st != "owned" {
		t.Fatalf("domain %s", st)
	}
	// A failed service is retired by its teardown; it stays failed.
	td, replayed, err := h.svc.Launches.Teardown(h.ctx, tn.agent, v.ServiceID)
	h.must(err)
	h.drain()
	if replayed || h.task(tn.org, td.ID).State != "succeeded" {
		t.Fatalf("teardown of a failed service %+v", td)
	}
	// Tasks that are not launches fail as they are.
	h.svc.Launches.FailTask(h.ctx, td.ID, errors.New("late"))
	h.svc.Launches.FailTask(h.ctx, "tsk_nope", errors.New("x"))
	if err := h.svc.Launches.RunTask(h.ctx, "tsk_nope"); err == nil {
		t.Fatal("ran a task that does not exist")
	}
	h.books(tn.org, tn.project)
}

// Content lost from the blob store is found before a launch serves 503s.
func TestLaunchRefusesLostContent(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(10, DefaultPolicy())
	bnd := h.site(tn, map[string]string{"index.html": "gone soon"})
	if _, err := h.st.DB().ExecContext(h.ctx, `DELETE FROM blobs WHERE sha256 = ?`, shaOf("gone soon")); err != nil {
		t.Fatal(err)
	}
	_, err := h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, LaunchRequest{Name: "site", Target: "edge", BundleID: bnd})
	if e := wantCode(t, err, "conflict:blobs_missing"); !hasAction(e.Actions, "upload_blob") {
		t.Fatalf("actions %v", names(e.Actions))
	}
	h.must(second2(h.svc.Bundles.UploadBlob(h.ctx, tn.agent, shaOf("gone soon"), []byte("gone soon"))))
	if task := h.edge(tn, "site", LaunchRequest{BundleID: bnd}); task.State != "succeeded" {
		t.Fatalf("after re-upload: %s", task.State)
	}
}

// A launch waiting for a human can be torn down: it ends canceled,
// refunded, and its gate closes.
func TestTeardownWhileWaiting(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(100, DefaultPolicy())
	dom := freeDomain(t, "waiting", "dev")
	q := h.quote(tn, domainItem(dom))
	task := h.edge(tn, "site", LaunchRequest{Domain: dom, QuoteID: q.ID})
	if task.State != "input_required" {
		t.Fatalf("launch %s", task.State)
	}
	td, _, err := h.svc.Launches.Teardown(h.ctx, tn.agent, task.ServiceID)
	h.must(err)
	h.drain()
	if got := h.task(tn.org, task.ID); got.State != "canceled" {
		t.Fatalf("launch %s", got.State)
	}
	if got := h.task(tn.org, td.ID); got.State != "succeeded" {
		t.Fatalf("teardown %s", got.State)
	}
	if gates, _ := h.svc.Approvals.Pending(h.ctx, tn.org); len(gates) != 0 || h.remaining(tn.org, tn.project) != 100_000_000 {
		t.Fatalf("gates %d, remaining %d", len(gates), h.remaining(tn.org, tn.project))
	}
	// A launch at work cannot be torn down until it finishes.
	bnd := h.site(tn, map[string]string{"index.html": "busy"})
	v, err := h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, LaunchRequest{Name: "busy", Target: "edge", BundleID: bnd})
	h.must(err)
	wantCode(t, second3(h.svc.Launches.Teardown(h.ctx, tn.agent, v.ServiceID)), "conflict:state")
	wantCode(t, second2(h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, LaunchRequest{Name: "busy", Target: "edge", BundleID: bnd})), "conflict:state")
	h.drain()
}

// On start the supervisor adopts live services that run nowhere; it stops
// what runs for services that no longer run it.
func TestSuperviseAdoptsAndReconciles(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(100, DefaultPolicy())
	id := h.process(tn, "api", "process", "dynamic_service", LaunchRequest{}).ServiceID
	h.runtime.Stop(h.ctx, id, 1) // the server restarted: nothing runs
	h.runtime.running[RunningVersion{"svc_gone", 1}] = RunSpec{ServiceID: "svc_gone", Version: 1}
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() { h.svc.Runs.Supervise(ctx, true); close(done) }()
	for range 200 {
		if _, ok := h.runtime.spec(id, 1); ok {
			break
		}
		sleepABit()
	}
	cancel()
	<-done
	if _, ok := h.runtime.spec(id, 1); !ok {
		t.Fatal("the live service was not started again")
	}
	h.svc.Runs.reconcile(h.ctx)
	if _, ok := h.runtime.spec("svc_gone", 1); ok {
		t.Fatal("a version of no service still runs")
	}
	// A version that cannot start again marks the service crashed.
	h.runtime.Stop(h.ctx, id, 1)
	h.runtime.startErr = &StartError{Reason: "gone"}
	h.st.DB().ExecContext(h.ctx, `UPDATE services SET runner = '' WHERE id = ?`, id)
	h.svc.Runs.adopt(h.ctx, h.clock.Now().Add(1<<40))
	for range 200 {
		if svc, _ := h.st.Services().Get(h.ctx, tn.org, id); svc.State == "crashed" {
			return
		}
		sleepABit()
	}
	t.Fatal("a service that cannot start again is not crashed")
}

// Export packs the sites, zones, registrants and ledger, with a manifest.
func TestExport(t *testing.T) {
	h := newHarness(t)
	a := h.tenant(100, DefaultPolicy(), buyer...)
	dom := freeDomain(t, "leave", "dev")
	h.buy(a, "site", dom)
	_, _, err := h.svc.Mail.SetRegistrant(h.ctx, a.agent, dom, contact("me@"+dom))
	h.must(err)
	gates, _ := h.svc.Approvals.Pending(h.ctx, a.org)
	h.must(h.svc.Approvals.Decide(h.ctx, a.human, gates[0].ID, true))
	exp, err := h.svc.Projects.Export(h.ctx, a.agent, a.project)
	h.must(err)
	for _, p := range []string{LeaveManifestPath, "sites/site/index.html", "zones/" + dom + ".zone", "registrants/" + dom + ".json", "ledger.jsonl"} {
		if !hasFile(exp, p) {
			t.Fatalf("no %s in %+v", p, exp.Files)
		}
	}
	if exp.TransferURL == "" || exp.ManifestSHA256 != exp.Files[0].SHA256 {
		t.Fatalf("export %q %s", exp.TransferURL, exp.ManifestSHA256)
	}
	b := h.tenant(10, DefaultPolicy())
	wantCode(t, second2(h.svc.Projects.Export(h.ctx, b.agent, a.project)), "not_found:resource")
	if pl, _ := h.svc.Projects.List(h.ctx, b.org, store.Filter{}); len(pl.Items) != 1 || pl.Items[0].ID == a.project {
		t.Fatal("org B lists A's project")
	}
	if _, err := h.st.Services().ByName(h.ctx, b.org, a.project, "site"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("org B finds A's service by name")
	}
}
