package web

import (
	"fmt"
	"html/template"
	"slices"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/money"
)

var funcs = template.FuncMap{
	// usd renders a USD number from the API models.
	"usd": func(v float64) string { return money.FromUSD(v).String() },
	// micro renders micro-USD.
	"micro": func(v any) string {
		switch m := v.(type) {
		case int64:
			return money.MicroUSD(m).String()
		case money.MicroUSD:
			return m.String()
		case *money.MicroUSD:
			if m == nil {
				return "no published price"
			}
			return m.String()
		}
		return fmt.Sprint(v)
	},
	"when": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			return v.UTC().Format("2006-01-02 15:04 UTC")
		case *time.Time:
			if v == nil {
				return ""
			}
			return v.UTC().Format("2006-01-02 15:04 UTC")
		case string:
			if ts, err := time.Parse(time.RFC3339Nano, v); err == nil {
				return ts.UTC().Format("2006-01-02 15:04:05 UTC")
			}
			return v
		}
		return fmt.Sprint(t)
	},
	"join": strings.Join,
	"has":  func(list []string, s string) bool { return slices.Contains(list, s) },
	"short": func(h string) string {
		if len(h) > 12 {
			return h[:12] + "…"
		}
		return h
	},
	"minutes": func(d time.Duration) int { return int(d / time.Minute) },
	"kind": func(k string) string {
		switch k {
		case "budget_raise":
			return "Budget raise"
		case "quote_approval":
			return "Purchase approval"
		}
		return k
	},
	"millions": func(n int64) string {
		if n >= 1_000_000 && n%1_000_000 == 0 {
			return fmt.Sprintf("%dM", n/1_000_000)
		}
		return fmt.Sprint(n)
	},
}
