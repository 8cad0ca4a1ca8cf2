package web

import (
	"strings"

	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/service"
)

// The dashboard's spend chart is inline SVG drawn on the server: one small
// bar chart a project or key, one bar a day of the period, each bar titled
// with its day and amount, and a table with the same numbers beside it.

// Chart geometry, in the SVG's own units; the SVG scales to its box.
const (
	chartWidth  = 310.0
	chartHeight = 80.0
	chartLeft   = 5.0
)

// chartBar is one day's bar.
type chartBar struct {
	X, Y, W, H float64
	Day        string
	Micro      money.MicroUSD
}

// spendBars lays a series' days out as bars, scaled to its largest day; a
// day with no spend has no height.
func spendBars(s service.SpendSeries, days []string) []chartBar {
	var top money.MicroUSD
	for _, v := range s.ByDay {
		top = max(top, v)
	}
	n := float64(len(s.ByDay))
	if n == 0 {
		return nil
	}
	step := (chartWidth - 2*chartLeft) / n
	out := make([]chartBar, len(s.ByDay))
	for i, v := range s.ByDay {
		h := 0.0
		if top > 0 {
			h = float64(v) / float64(top) * (chartHeight - 4)
		}
		day := ""
		if i < len(days) {
			day = days[i]
		}
		out[i] = chartBar{X: chartLeft + float64(i)*step + step*0.1, W: step * 0.8, Y: chartHeight - h, H: h, Day: day, Micro: v}
	}
	return out
}

// peakDay is a series' largest day, for the chart's description.
func peakDay(s service.SpendSeries, days []string) string {
	best := -1
	for i, v := range s.ByDay {
		if v > 0 && (best < 0 || v > s.ByDay[best]) {
			best = i
		}
	}
	if best < 0 || best >= len(days) {
		return "no spend yet this period"
	}
	return "most on " + days[best] + ": " + s.ByDay[best].String()
}

// actorName names a ledger actor: a key by its name.
func actorName(names map[string]string, actor string) string {
	if id, ok := strings.CutPrefix(actor, "key:"); ok && names[id] != "" {
		return "key “" + names[id] + "”"
	}
	return actor
}

// dayAmount is a series' amount on day i, for the table.
func dayAmount(s service.SpendSeries, i int) money.MicroUSD {
	if i < 0 || i >= len(s.ByDay) {
		return 0
	}
	return s.ByDay[i]
}

// spendGroup is what the "spendcharts" template draws: a heading and the
// charts of one group of series.
type spendGroup struct {
	Group, Title string
	Series       []service.SpendSeries
	Days         []string
}

func init() {
	funcs["spendGroup"] = func(group, title string, series []service.SpendSeries, days []string) spendGroup {
		return spendGroup{group, title, series, days}
	}
	funcs["dec"] = func(n int) int { return n - 1 }
	funcs["spendBars"] = spendBars
	funcs["peakDay"] = peakDay
	funcs["actorName"] = actorName
	funcs["dayAmount"] = dayAmount
	funcs["chartWidth"] = func() float64 { return chartWidth }
	funcs["chartHeight"] = func() float64 { return chartHeight }
}
