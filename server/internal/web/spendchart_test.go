package web

import (
	"testing"

	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/service"
)

func TestSpendBarsScaleToTheLargestDay(t *testing.T) {
	s := service.SpendSeries{Name: "shop", ByDay: []money.MicroUSD{0, 2_000_000, 1_000_000, 0}}
	days := []string{"2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04"}
	bars := spendBars(s, days)
	if len(bars) != 4 {
		t.Fatalf("%d bars", len(bars))
	}
	if bars[0].H != 0 || bars[1].H != chartHeight-4 || bars[2].H != (chartHeight-4)/2 {
		t.Errorf("heights %v %v %v", bars[0].H, bars[1].H, bars[2].H)
	}
	for i, b := range bars {
		if b.Y+b.H != chartHeight || b.X < 0 || b.X+b.W > chartWidth || b.Day != days[i] {
			t.Errorf("bar %d out of the chart: %+v", i, b)
		}
	}
	if got := peakDay(s, days); got != "most on 2026-11-02: "+money.MicroUSD(2_000_000).String() {
		t.Errorf("peak %q", got)
	}
	if got := peakDay(service.SpendSeries{ByDay: make([]money.MicroUSD, 3)}, days); got != "no spend yet this period" {
		t.Errorf("empty peak %q", got)
	}
	if spendBars(service.SpendSeries{}, nil) != nil {
		t.Error("bars for no days")
	}
}

func TestActorNameNamesKeys(t *testing.T) {
	names := map[string]string{"k1": "deployer"}
	for actor, want := range map[string]string{"key:k1": "key “deployer”", "key:k2": "key:k2", "human:h1": "human:h1", "system": "system"} {
		if got := actorName(names, actor); got != want {
			t.Errorf("actorName(%q) = %q, want %q", actor, got, want)
		}
	}
}
