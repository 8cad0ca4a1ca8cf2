package service

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/pierhq/pier/models"
	"github.com/pierhq/pier/server/internal/store"
)

// An edge launch without a domain charges nothing, serves its preview host
// over HTTPS, and is invisible to another organisation.
func TestEdgeLaunch(t *testing.T) {
	h := newHarness(t)
	a, b := h.tenant(10, DefaultPolicy()), h.tenant(10, DefaultPolicy())
	task := h.edge(a, "site", LaunchRequest{})
	if task.State != "succeeded" || task.ServiceID == "" || !task.HTTPS.Preview || task.HTTPS.Domain {
		t.Fatalf("task %+v", task)
	}
	id := task.ServiceID
	svc, err := h.svc.Launches.GetService(h.ctx, a.org, id)
	h.must(err)
	if svc.State != ServiceLive || svc.PreviewURL != "https://site--"+hostLabel(a.project)+".preview.test:8443/" {
		t.Fatalf("service %+v", svc)
	}
	if len(svc.Versions) != 1 || !slices.Contains(h.platform.certs, "site--"+hostLabel(a.project)+".preview.test") {
		t.Fatalf("versions %+v certs %v", svc.Versions, h.platform.certs)
	}
	l, err := h.svc.Launches.ListServices(h.ctx, a.org, store.Filter{})
	h.must(err)
	if len(l.Items) != 1 {
		t.Fatalf("%d services", len(l.Items))
	}
	// Organisation B sees nothing of A's service, task or project.
	if l, _ := h.svc.Launches.ListServices(h.ctx, b.org, store.Filter{}); len(l.Items) != 0 {
		t.Fatal("org B lists A's service")
	}
	_, err = h.svc.Launches.GetService(h.ctx, b.org, id)
	wantCode(t, err, "not_found:resource")
	_, err = h.svc.Tasks.Get(h.ctx, b.org, task.ID)
	wantCode(t, err, "not_found:resource")
	_, _, err = h.svc.Launches.Teardown(h.ctx, b.agent, id)
	wantCode(t, err, "not_found:resource")
	_, err = h.svc.Launches.ServiceVersion(h.ctx, b.agent, id)
	wantCode(t, err, "not_found:resource")
	if v, err := h.svc.Launches.ServiceVersion(h.ctx, a.agent, id); err != nil || !contains(v, "live@") {
		t.Fatalf("service version %q %v", v, err)
	}
	_, err = h.svc.Launches.Launch(h.ctx, b.agent, a.project, LaunchRequest{Name: "x", Target: "edge", BundleID: svc.BundleID})
	wantCode(t, err, "not_found:resource")
	h.books(a.org, a.project)
}

func hostLabel(projectID string) string {
	out := []byte(projectID)
	for i, c := range out {
		if c == '_' {
			out[i] = '-'
		}
	}
	return string(out)
}

// Teardown retires the service, frees its name, and a second teardown
// answers the first's task, replayed.
func TestTeardownReplays(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(10, DefaultPolicy())
	id := h.edge(tn, "site", LaunchRequest{}).ServiceID
	v, replayed, err := h.svc.Launches.Teardown(h.ctx, tn.agent, id)
	h.must(err)
	if replayed || v.Kind != TaskKindTeardown || !v.State.Active() {
		t.Fatalf("teardown %+v", v)
	}
	again, replayed, err := h.svc.Launches.Teardown(h.ctx, tn.agent, id)
	h.must(err)
	if !replayed || again.ID != v.ID || !again.State.Active() {
		t.Fatalf("replay %+v replayed=%v", again, replayed)
	}
	h.drain()
	if got := h.task(tn.org, v.ID); got.State != "succeeded" {
		t.Fatalf("teardown task %s", got.State)
	}
	again, replayed, err = h.svc.Launches.Teardown(h.ctx, tn.agent, id)
	if err != nil || !replayed || again.State != TaskSucceeded {
		t.Fatalf("replay after the end: %v %+v %v", replayed, again, err)
	}
	svc, _ := h.svc.Launches.GetService(h.ctx, tn.org, id)
	if svc.State != "torn_down" {
		t.Fatalf("state %s", svc.State)
	}
	// The name is free again.
	if got := h.edge(tn, "site", LaunchRequest{}); got.State != "succeeded" || got.ServiceID == id {
		t.Fatalf("relaunch under the same name: %+v", got)
	}
}

// A launch is refused, typed, before anything is charged or recorded.
func TestLaunchRefusals(t *testing.T) {
	h := newHarness(t)
	tn := h.tenant(100, DefaultPolicy())
	other := h.tenant(100, DefaultPolicy(), "read", "quote", "launch", "buy_domain")
	bnd := h.site(tn, map[string]string{"index.html": "hi"})
	foreign := h.site(other, map[string]string{"index.html": "theirs"})
	taken := freeDomain(t, "theirs", "dev")
	h.buy(other, "theirs", taken)
	free := freeDomain(t, "refuse", "dev")
	run := "python3 app.py"
	cases := []struct {
		name string
		req  LaunchRequest
		code models.BlockedBy
		next string
	}{
		{"bad name", LaunchRequest{Name: "Bad_Name", Target: "edge", BundleID: bnd}, "input:invalid", ""},
		{"unknown target", LaunchRequest{Name: "a", Target: "mainframe", BundleID: bnd}, "plan:unknown_target", ""},
		{"no bundle", LaunchRequest{Name: "a", Target: "edge"}, "input:invalid", "upload_assets"},
		{"unknown bundle", LaunchRequest{Name: "a", Target: "edge", BundleID: "bnd_nope"}, "not_found:resource", ""},
		{"another org's bundle", LaunchRequest{Name: "a", Target: "edge", BundleID: foreign}, "not_found:resource", ""},
		{"edge with a command", LaunchRequest{Name: "a", Target: "edge", BundleID: bnd, Run: &run}, "input:invalid", ""},
		{"process unquoted", LaunchRequest{Name: "a", Target: "process", BundleID: bnd, Run: &run}, "budget:insufficient", "create_quote"},
		{"process without a command", LaunchRequest{Name: "a", Target: "process", BundleID: bnd}, "plan:no_command", "upload_assets"},
		{"domain unquoted", LaunchRequest{Name: "a", Target: "edge", BundleID: bnd, Domain: free}, "budget:insufficient", "create_quote"},
		{"domain taken", LaunchRequest{Name: "a", Target: "edge", BundleID: bnd, Domain: taken}, "plan:domain_unavailable", ""},
		{"reserved env", LaunchRequest{Name: "a", Target: "process", BundleID: bnd, Run: &run, Env: map[string]string{"PORT": "1"}}, "input:invalid", ""},
		{"bad env", LaunchRequest{Name: "a", Target: "process", BundleID: bnd, Run: &run, Env: map[string]string{"1X": "1"}}, "input:invalid", ""},
		{"env and secret", LaunchRequest{Name: "a", Target: "process", BundleID: bnd, Run: &run,
			Env: map[string]string{"K": "1"}, Secrets: map[string]string{"K": "2"}}, "input:invalid", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, c.req)
			e := wantCode(t, err, c.code)
			if c.next != "" && !hasAction(e.Actions, c.next) {
				t.Fatalf("actions %v, want %s", names(e.Actions), c.next)
			}
		})
	}
	// A taken domain (someone holds it now) also gives back the hold of the quote sent with it.
	q := h.quote(tn, serviceItem("dynamic_service", "process", "a"))
	_, err := h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, LaunchRequest{Name: "a", Target: "edge", BundleID: bnd, Domain: taken, QuoteID: q.ID})
	wantCode(t, err, "plan:domain_unavailable")
	if h.remaining(tn.org, tn.project) != 100_000_000 {
		t.Fatal("the refused launch's quote still holds budget")
	}
	if l, _ := h.svc.Launches.ListServices(h.ctx, tn.org, store.Filter{}); len(l.Items) != 0 {
		t.Fatalf("a refused launch recorded %d services", len(l.Items))
	}
}

// Without a runtime or a sandbox, process launches are refused, typed.
func TestLaunchNeedsARuntime(t *testing.T) {
	run := "python3 app.py"
	h := newHarness(t, withoutRuntime)
	tn := h.tenant(100, DefaultPolicy())
	bnd := h.site(tn, map[string]string{"app.py": "print(1)"})
	_, err := h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, LaunchRequest{Name: "a", Target: "process", BundleID: bnd, Run: &run})
	wantCode(t, err, "plan:not_implemented")

	h2 := newHarness(t)
	h2.runtime.sandboxErr = errors.New("runc missing")
	tn2 := h2.tenant(100, DefaultPolicy())
	bnd2 := h2.site(tn2, map[string]string{"app.py": "print(1)"})
	_, err = h2.svc.Launches.Launch(h2.ctx, tn2.agent, tn2.project, LaunchRequest{Name: "a", Target: "worker", BundleID: bnd2, Run: &run})
	e := wantCode(t, err, "plan:sandbox_unavailable")
	if !hasAction(e.Actions, "manual:configure_sandbox") {
		t.Fatalf("actions %v", names(e.Actions))
	}
}

// The organisation's live-service quota holds, whatever its budget.
func TestServiceQuota(t *testing.T) {
	h := newHarness(t, withQuotas(Quotas{Services: 1}))
	tn := h.tenant(10, DefaultPolicy())
	h.edge(tn, "one", LaunchRequest{})
	bnd := h.site(tn, map[string]string{"index.html": "two"})
	_, err := h.svc.Launches.Launch(h.ctx, tn.agent, tn.project, LaunchRequest{Name: "two", Target: "edge", BundleID: bnd})
	wantCode(t, err, "quota:services")
}

// Launch payloads and quote items share their domain, years and target
// (placement): what tasks and quotes stored before still decodes, and a
// quote item encodes as it always did.
func TestStoredPayloadsWithPlacementDecode(t *testing.T) {
	const launch = `{"serviceId":"svc_1","projectId":"prj_1","bundleId":"bnd_1","previewHost":"p.example","domain":"acme.dev","years":2,` +
		`"gated":true,"chargedMicroUsd":5000000,"actor":"key_1","target":"process","version":3,"previous":2}`
	var pl launchPayload
	if err := json.Unmarshal([]byte(launch), &pl); err != nil {
		t.Fatal(err)
	}
	if pl.Domain != "acme.dev" || pl.Years != 2 || pl.Target != "process" || pl.ServiceID != "svc_1" || !pl.Gated || pl.Version != 3 || pl.ChargedMicro != 5_000_000 {
		t.Fatalf("launch payload %+v", pl)
	}
	again, _ := json.Marshal(pl)
	var back map[string]any
	json.Unmarshal(again, &back)
	if back["domain"] != "acme.dev" || back["years"] != 2.0 || back["target"] != "process" || len(back) != 12 {
		t.Fatalf("launch payload encodes as %s", again)
	}
	const item = `{"kind":"domain","domain":"acme.dev","years":2,"amountMicroUsd":24000000,"firstYearMicroUsd":12000000,"annualRenewalMicroUsd":12000000}`
	var it pricedItem
	if err := json.Unmarshal([]byte(item), &it); err != nil {
		t.Fatal(err)
	}
	if it.Kind != ItemDomain || it.Domain != "acme.dev" || it.Years != 2 || it.AmountMicro != 24_000_000 {
		t.Fatalf("quote item %+v", it)
	}
	if j, _ := json.Marshal(it); string(j) != item {
		t.Fatalf("quote item encodes as %s, was %s", j, item)
	}
	svc := `{"kind":"service","target":"process","workload":"dynamic_service","months":2,"name":"app","amountMicroUsd":10000000}`
	it = pricedItem{}
	if err := json.Unmarshal([]byte(svc), &it); err != nil || it.Target != "process" || it.Domain != "" {
		t.Fatalf("service item %+v %v", it, err)
	}
	if j, _ := json.Marshal(it); string(j) != svc {
		t.Fatalf("service item encodes as %s, was %s", j, svc)
	}
}
