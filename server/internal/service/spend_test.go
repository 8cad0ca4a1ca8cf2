package service

import (
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

func TestAggregateSpend(t *testing.T) {
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	at := func(day int) *time.Time { v := time.Date(2026, 11, day, 9, 0, 0, 0, time.UTC); return &v }
	last := time.Date(2026, 10, 31, 23, 0, 0, 0, time.UTC)
	quotes := []store.Quote{
		{ID: "q1", ProjectID: "p1", KeyID: "k1", State: "consumed", AmountMicro: 3_000_000, SettledAt: at(2)},
		{ID: "q2", ProjectID: "p2", KeyID: "k2", State: "consumed", AmountMicro: 1_000_000, SettledAt: at(2)},
		{ID: "q3", ProjectID: "p1", KeyID: "k1", State: "consumed", AmountMicro: 500_000, SettledAt: at(5)},
		{ID: "q4", ProjectID: "p1", KeyID: "k1", State: "held", AmountMicro: 9_000_000, SettledAt: at(5)},
		{ID: "q5", ProjectID: "p1", KeyID: "k1", State: "consumed", AmountMicro: 9_000_000, SettledAt: &last},
		{ID: "q6", ProjectID: "p2", State: "consumed", AmountMicro: 250_000, SettledAt: at(6)},
	}
	charges := []store.MeterCharge{
		{ProjectID: "p2", AmountMicro: 4_000_000, ChargedAt: *at(1)},
		{ProjectID: "p2", AmountMicro: 7_000_000, ChargedAt: last},
	}
	renewals := []store.DomainRenewal{
		{ProjectID: "p1", State: "renewed", AmountMicro: 15_000_000, CreatedAt: last},
		{ProjectID: "p2", State: "renewed", AmountMicro: 1_000_000, CreatedAt: *at(3)},
		{ProjectID: "p2", State: "lapsed", AmountMicro: 2_000_000, CreatedAt: *at(3)},
	}
	projects := map[string]string{"p1": "shop", "p2": "blog", "p3": "idle"}
	keys := []store.APIKey{{ID: "k1", Name: "deployer"}, {ID: "k2", Name: "ci"}}
	sp := aggregateSpend(now, quotes, charges, renewals, projects, keys)

	if sp.Period != "2026-11" || len(sp.Days) != 30 || sp.Days[0] != "2026-11-01" {
		t.Fatalf("period %q with %d days from %v", sp.Period, len(sp.Days), sp.Days[:1])
	}
	if want := money.MicroUSD(9_750_000); sp.Total != want {
		t.Errorf("total %v, want %v", sp.Total, want)
	}
	wantProjects := []struct {
		name  string
		total money.MicroUSD
	}{{"blog", 6_250_000}, {"shop", 3_500_000}, {"idle", 0}}
	if len(sp.Projects) != len(wantProjects) {
		t.Fatalf("projects %+v", sp.Projects)
	}
	for i, w := range wantProjects {
		if got := sp.Projects[i]; got.Name != w.name || got.Total != w.total {
			t.Errorf("project %d: %s %v, want %s %v", i, got.Name, got.Total, w.name, w.total)
		}
	}
	if blog := sp.Projects[0]; blog.ByDay[0] != 4_000_000 || blog.ByDay[1] != 1_000_000 || blog.ByDay[2] != 1_000_000 || blog.ByDay[5] != 250_000 {
		t.Errorf("blog by day %v", blog.ByDay[:6])
	}
	wantKeys := map[string]money.MicroUSD{"deployer": 3_500_000, "ci": 1_000_000, noKey: 250_000}
	if len(sp.Keys) != len(wantKeys) {
		t.Fatalf("keys %+v", sp.Keys)
	}
	for _, k := range sp.Keys {
		if wantKeys[k.Name] != k.Total {
			t.Errorf("key %s spent %v, want %v", k.Name, k.Total, wantKeys[k.Name])
		}
	}
	if sp.Keys[0].Name != "deployer" {
		t.Errorf("keys not by spend: %s first", sp.Keys[0].Name)
	}
}

func TestTaskKeysNameTheQuotesKey(t *testing.T) {
	quotes := []store.Quote{{ID: "q1", KeyID: "k1"}, {ID: "q2", KeyID: "gone"}}
	tasks := []store.Task{
		{ID: "t1", Payload: `{"quoteId":"q1"}`},
		{ID: "t2", Payload: `{"quoteId":"q2"}`},
		{ID: "t3", Payload: `not json`},
		{ID: "t4"},
	}
	got := taskKeys(tasks, quotes, map[string]string{"k1": "deployer"})
	if got["t1"] != "deployer" || got["t2"] != "gone" || len(got) != 2 {
		t.Errorf("task keys %v", got)
	}
}
