package service

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/store"
)

// Seeing money: the dashboard's spend this period, day by day, per project
// and per key, and every service with what it cost. Quotes spent (consumed)
// count on the day they settled, for their project and their key; meter
// charges and domain renewals count on the day they were made, for their
// project only (a running service is nobody's key once it runs).

// Spending is an organisation's spend in the current period.
type Spending struct {
	Period   string   // the calendar month (UTC), such as "2026-11"
	Days     []string // every day of the period, "2026-11-01" …
	Projects []SpendSeries
	Keys     []SpendSeries
	Services []ServiceCost
	Total    money.MicroUSD
	// KeyNames names keys by id; TaskKeys names the key whose quote a
	// task spent, by task id.
	KeyNames map[string]string
	TaskKeys map[string]string
}

// SpendSeries is one project's or key's spend, one amount a day.
type SpendSeries struct {
	ID, Name string
	ByDay    []money.MicroUSD
	Total    money.MicroUSD
}

// ServiceCost is a service as the dashboard lists it: what it used this
// period, charged or still accruing.
type ServiceCost struct {
	ID, Name, ProjectName, URL, State string
	Version                           int
	CostMicro                         money.MicroUSD
}

// noKey names spend no key made, such as a human's.
const noKey = "no key"

// aggregateSpend sums quotes spent and meter charges into the period that
// now falls in, day by day. Every project gets a series; a key only if it
// spent.
func aggregateSpend(now time.Time, quotes []store.Quote, charges []store.MeterCharge, renewals []store.DomainRenewal, projects map[string]string, keys []store.APIKey) Spending {
	from := monthStart(now)
	to := from.AddDate(0, 1, 0)
	days := int(to.Sub(from) / (24 * time.Hour))
	sp := Spending{Period: periodOf(from), KeyNames: map[string]string{}}
	for d := range days {
		sp.Days = append(sp.Days, from.AddDate(0, 0, d).Format("2006-01-02"))
	}
	for _, k := range keys {
		sp.KeyNames[k.ID] = k.Name
	}
	proj := map[string]*SpendSeries{}
	for id, name := range projects {
		proj[id] = &SpendSeries{ID: id, Name: name, ByDay: make([]money.MicroUSD, days)}
	}
	key := map[string]*SpendSeries{}
	add := func(m map[string]*SpendSeries, id, name string, day int, v money.MicroUSD) {
		s := m[id]
		if s == nil {
			s = &SpendSeries{ID: id, Name: name, ByDay: make([]money.MicroUSD, days)}
			m[id] = s
		}
		s.ByDay[day] += v
		s.Total += v
	}
	in := func(t time.Time) (int, bool) {
		if t.Before(from) || !t.Before(to) {
			return 0, false
		}
		return t.UTC().Day() - 1, true
	}
	for _, q := range quotes {
		if QuoteState(q.State) != QuoteConsumed || q.SettledAt == nil {
			continue
		}
		day, ok := in(*q.SettledAt)
		if !ok {
			continue
		}
		add(proj, q.ProjectID, q.ProjectID, day, q.AmountMicro)
		name := noKey
		if q.KeyID != "" {
			name = cmpOr(sp.KeyNames[q.KeyID], q.KeyID)
		}
		add(key, q.KeyID, name, day, q.AmountMicro)
		sp.Total += q.AmountMicro
	}
	for _, c := range charges {
		if day, ok := in(c.ChargedAt); ok {
			add(proj, c.ProjectID, c.ProjectID, day, c.AmountMicro)
			sp.Total += c.AmountMicro
		}
	}
	for _, r := range renewals {
		if day, ok := in(r.CreatedAt); ok && RenewalState(r.State) == RenewalRenewed {
			add(proj, r.ProjectID, r.ProjectID, day, r.AmountMicro)
			sp.Total += r.AmountMicro
		}
	}
	sp.Projects, sp.Keys = sortedSeries(proj), sortedSeries(key)
	return sp
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// sortedSeries orders series by spend, most first, then by name.
func sortedSeries(m map[string]*SpendSeries) []SpendSeries {
	out := make([]SpendSeries, 0, len(m))
	for _, s := range m {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Total != out[j].Total {
			return out[i].Total > out[j].Total
		}
		return strings.ToLower(out[i].Name) < strings.ToLower(out[j].Name)
	})
	return out
}

// taskKeys names, by task id, the key whose quote each task spent.
func taskKeys(tasks []store.Task, quotes []store.Quote, names map[string]string) map[string]string {
	byQuote := map[string]string{}
	for _, q := range quotes {
		if q.KeyID != "" {
			byQuote[q.ID] = cmpOr(names[q.KeyID], q.KeyID)
		}
	}
	out := map[string]string{}
	for _, t := range tasks {
		var p struct {
			QuoteID string `json:"quoteId"`
		}
		if json.Unmarshal([]byte(t.Payload), &p) == nil && byQuote[p.QuoteID] != "" {
			out[t.ID] = byQuote[p.QuoteID]
		}
	}
	return out
}

// spendingFor reads what the dashboard's spend needs from the store.
func (s *Approvals) spendingFor(ctx context.Context, orgID string, d *Dashboard) (*Spending, error) {
	now := s.Now().UTC()
	from := monthStart(now)
	quotes, err := s.store.Quotes().SpentSince(ctx, orgID, from)
	if err != nil {
		return nil, err
	}
	charges, err := s.store.Meters().ChargedSince(ctx, orgID, from)
	if err != nil {
		return nil, err
	}
	renewals, err := s.store.DomainRenewals().RenewedSince(ctx, orgID, from)
	if err != nil {
		return nil, err
	}
	names := d.projectNames()
	sp := aggregateSpend(now, quotes, charges, renewals, names, d.Keys)
	if sp.TaskKeys, err = s.tasksQuotes(ctx, orgID, d.Tasks, sp.KeyNames); err != nil {
		return nil, err
	}
	if sp.Services, err = s.serviceCosts(ctx, orgID, names, now); err != nil {
		return nil, err
	}
	return &sp, nil
}

// tasksQuotes names the keys whose quotes the tasks spent.
func (s *Approvals) tasksQuotes(ctx context.Context, orgID string, tasks []store.Task, names map[string]string) (map[string]string, error) {
	var quotes []store.Quote
	for _, t := range tasks {
		var p struct {
			QuoteID string `json:"quoteId"`
		}
		if json.Unmarshal([]byte(t.Payload), &p) != nil || p.QuoteID == "" {
			continue
		}
		q, err := s.store.Quotes().Get(ctx, orgID, p.QuoteID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		quotes = append(quotes, q)
	}
	return taskKeys(tasks, quotes, names), nil
}

// serviceCosts lists the organisation's services with what each used in
// the period so far: its meter's hours at its price, charged or not.
func (s *Approvals) serviceCosts(ctx context.Context, orgID string, names map[string]string, now time.Time) ([]ServiceCost, error) {
	svcs, err := s.store.Services().List(ctx, orgID, store.Filter{Limit: 500})
	if err != nil {
		return nil, err
	}
	from := monthStart(now)
	out := make([]ServiceCost, 0, len(svcs))
	for _, v := range svcs {
		segs, err := s.store.Meters().Segments(ctx, v.ID)
		if err != nil {
			return nil, err
		}
		_, used := usageIn(segs, from, from.AddDate(0, 1, 0), now)
		c := ServiceCost{ID: v.ID, Name: v.Name, ProjectName: cmpOr(names[v.ProjectID], v.ProjectID), State: v.State, Version: v.Version, CostMicro: used}
		if v.PreviewHost != "" {
			c.URL = s.hostURL("https", v.PreviewHost)
		}
		if v.Domain != "" {
			c.URL = s.hostURL("https", v.Domain)
		}
		out = append(out, c)
	}
	return out, nil
}
