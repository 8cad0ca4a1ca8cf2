package server_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/contracttest"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

// logged waits until the process's log, from its start, matches re.
func (p *process) logged(t *testing.T, re *regexp.Regexp, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		ok := re.Match(p.log.Bytes())
		p.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t.Fatalf("no log line matching %s; log:\n%s", re, p.log.String())
}

// The meter's pass is killed with SIGKILL after it charged a service's two
// ended months and before it committed; after a restart the months are
// charged once each, and further passes charge nothing more.
func TestMeterChargeSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server as a separate process")
	}
	bin, err := pierBinary()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dataDir := t.TempDir()
	h := crashKey(t, bin, dataDir)

	// A worker metered since the start of the month before last at 5 USD a
	// month. Its state keeps the supervisor from starting it: there is no
	// bundle to run.
	st, err := store.Open(ctx, dataDir, "")
	if err != nil {
		t.Fatal(err)
	}
	org, err := st.Accounts().FirstOrganization(ctx)
	if err != nil {
		t.Fatal(err)
	}
	projects, err := st.Projects().List(ctx, org.ID)
	if err != nil || len(projects) == 0 {
		t.Fatal(projects, err)
	}
	proj := projects[0].ID
	now := time.Now().UTC()
	start := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, -2, 0)
	if err := st.Services().Insert(ctx, store.Service{ID: "svc_metered", OrgID: org.ID, ProjectID: proj, Name: "jobs", Target: "worker",
		PreviewHost: "jobs.localhost", State: "tearing_down", TaskID: "tsk_none", CreatedAt: start, UpdatedAt: start}); err != nil {
		t.Fatal(err)
	}
	if err := st.Meters().Start(ctx, store.Meter{ServiceID: "svc_metered", OrgID: org.ID, ProjectID: proj, StartedAt: start},
		store.MeterSegment{MonthlyMicro: 5_000_000, Lines: "[]", StartedAt: start}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	p := startProcess(t, bin, dataDir, "PIER_TEST_PAUSE_INSIDE_STEP="+service.StepMeterCharge, "PIER_METER_INTERVAL=100ms")
	p.logged(t, regexp.MustCompile(`paused inside step.*step=`+service.StepMeterCharge), 30*time.Second)
	p.kill(t)

	p2 := startProcess(t, bin, dataDir, "PIER_METER_INTERVAL=100ms")
	c := &contracttest.Client{T: t, BaseURL: p2.url}
	deadline := time.Now().Add(20 * time.Second)
	var spent any
	for time.Now().Before(deadline) {
		spent = c.Do("GET", "/v1/projects/"+proj, nil, h).JSON()["data"].(map[string]any)["spentUsd"]
		if spent == 10.0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // ten more passes
	data := c.Do("GET", "/v1/projects/"+proj, nil, h).JSON()["data"].(map[string]any)
	if data["spentUsd"] != 10.0 {
		t.Fatalf("spent %v after the restart (%v before settling), want two months of 5 USD", data["spentUsd"], spent)
	}
	page := c.Do("GET", "/v1/ledger?limit=1000", nil, h).JSON()["data"].(map[string]any)
	charges := 0
	for _, e := range page["entries"].([]any) {
		if e.(map[string]any)["action"] == "meter_charge" {
			charges++
		}
	}
	if charges != 2 {
		t.Fatalf("%d meter charges in the ledger, want 2", charges)
	}
	p2.kill(t)

	st, err = store.Open(ctx, dataDir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cs, err := st.Meters().Charges(ctx, proj)
	if err != nil || len(cs) != 2 {
		t.Fatalf("charges %+v, %v", cs, err)
	}
}
