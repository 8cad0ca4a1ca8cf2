package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pierhq/pier/server/internal/actions"
	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/money"
	"github.com/pierhq/pier/server/internal/pricing"
	"github.com/pierhq/pier/server/internal/store"
)

// Budgets over time. A running service (and its add-ons) accrues its
// catalog price by the hour; each calendar month (UTC) is one period, and
// a service is charged once per period: when the period has ended, or at
// once when the service stopped within it. The (service, period) key in
// meter_charges is what makes a charge happen once, whoever runs the pass.

// Metering is the service's meter.
func (s *Service) Metering() *Meter { return s.meter }

// BudgetThresholds are the shares of a period's budget at which the human
// hears, once each per period.
var BudgetThresholds = []int{50, 80, 100}

// lifetimePeriod keys a lifetime budget's notices.
const lifetimePeriod = "lifetime"

// periodOf names the calendar month (UTC) t falls in, such as "2026-11".
func periodOf(t time.Time) string { return t.UTC().Format("2006-01") }

// monthStart is the start of the calendar month t falls in.
func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// periodStart parses a period name.
func periodStart(p string) (time.Time, error) { return time.Parse("2006-01", p) }

// budgetMonthly reports whether the policy spends its limit per month (the
// default) rather than once.
func budgetMonthly(pol ProjectPolicy) bool { return pol.BudgetPeriod != BudgetLifetime }

// meteredPrice is what a service on target with addons costs a month, line
// by line: the catalog's prices at the estimate's default usage, as a
// quote prices it.
func meteredPrice(target string, addons []string) (money.MicroUSD, []pricing.Line) {
	usage := pricing.Usage{Requests: defaultMonthlyRequests, EgressMicroGB: defaultEgressMicroGB}
	var lines []pricing.Line
	if t, ok := pricing.Lookup(target); ok {
		lines = append(lines, pricing.Monthly(t, usage)...)
	}
	for _, a := range addons {
		if t, ok := pricing.Lookup(a); ok {
			lines = append(lines, pricing.Monthly(t, usage)...)
		}
	}
	return money.MicroUSD(pricing.Total(lines)), lines
}

// usageIn is what a meter's segments used in the period [from, to), counted
// up to until: whole hours begun, each costing the month's price divided by
// the month's hours, so a whole month costs exactly its price.
func usageIn(segs []store.MeterSegment, from, to, until time.Time) (hours int, micro money.MicroUSD) {
	periodHours := int64(to.Sub(from) / time.Hour)
	if until.Before(to) {
		to = until
	}
	for _, seg := range segs {
		start, end := seg.StartedAt, to
		if start.Before(from) {
			start = from
		}
		if seg.EndedAt != nil && seg.EndedAt.Before(end) {
			end = *seg.EndedAt
		}
		if !end.After(start) {
			continue
		}
		h := int64((end.Sub(start) + time.Hour - 1) / time.Hour)
		hours += int(h)
		micro += money.MicroUSD((int64(seg.MonthlyMicro)*h + periodHours - 1) / periodHours)
	}
	return hours, micro
}

// MeterPass settles every project once: meters started for services that
// went live, stopped for those torn down, resized for those whose price
// changed; each ended period charged; a monthly budget's period closed;
// notices recorded. Then the notices' mails go out. Every replica may run
// it at any time: each project settles in one transaction under its lock.
func (s *Meter) MeterPass(ctx context.Context) error {
	refs, err := s.store.Meters().AllProjects(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range refs {
		if err := s.SettleProject(ctx, r.OrgID, r.ID); err != nil {
			errs = append(errs, fmt.Errorf("project %s: %w", r.ID, err))
		}
	}
	errs = append(errs, s.mailNotices(ctx), s.renewals.renewDomains(ctx))
	return errors.Join(errs...)
}

// SettleProject brings one project's meters and budget period up to now.
func (s *Meter) SettleProject(ctx context.Context, orgID, projectID string) error {
	now := s.Now().UTC()
	var changed []string // hosts of services paused or resumed
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		changed = changed[:0]
		proj, err := tx.Projects().Lock(ctx, orgID, projectID)
		if err != nil {
			return err
		}
		pol, err := decodePolicy(proj.Policy)
		if err != nil {
			return err
		}
		if err := s.followServices(ctx, tx, proj, now); err != nil {
			return err
		}
		if err := s.chargeMeters(ctx, tx, &proj, now); err != nil {
			return err
		}
		// Notices first for the period the spending counts in (a month the
		// pass is about to close, when its charge came late), then for the
		// current one.
		period := lifetimePeriod
		if budgetMonthly(pol) {
			open, err := openPeriod(ctx, tx, proj)
			if err != nil {
				return err
			}
			period = periodOf(open)
		}
		if err := s.recordNotices(ctx, tx, proj, period, now); err != nil {
			return err
		}
		if budgetMonthly(pol) {
			if err := s.closePeriods(ctx, tx, &proj, now); err != nil {
				return err
			}
			if err := s.recordNotices(ctx, tx, proj, periodOf(now), now); err != nil {
				return err
			}
		}
		if err := s.pauseOrResume(ctx, tx, proj, pol, now, &changed); err != nil {
			return err
		}
		if s.pause.Inside == StepMeterCharge {
			// Charged and noticed, not committed: the worst moment to die.
			s.log.Warn("paused inside step", "project", proj.ID, "step", StepMeterCharge)
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	if err == nil && len(changed) > 0 {
		s.platform.InvalidateHosts(changed...)
	}
	return err
}

// StepMeterCharge names the point, inside a project's settling
// transaction and before it commits, where a crash test holds the pass.
const StepMeterCharge = "meter_charge"

// followServices starts, stops and resizes the project's meters after its
// services.
func (s *Meter) followServices(ctx context.Context, tx *store.Tx, proj store.Project, now time.Time) error {
	fresh, err := tx.Meters().Unmetered(ctx, proj.ID)
	if err != nil {
		return err
	}
	for _, sv := range fresh {
		if !runsProcesses(sv.Target) {
			continue // static sites cost nothing at the default usage
		}
		started, credit := sv.CreatedAt, money.MicroUSD(0)
		if t, err := tx.Meters().LaunchTask(ctx, proj.OrgID, sv.ID); err == nil {
			var pl launchPayload
			if json.Unmarshal([]byte(t.Payload), &pl) == nil {
				// What the launch's quote charged for the service (not its
				// domain) is prepaid usage.
				credit = max(0, pl.ChargedMicro-pl.DomainMicro-pl.RefundedMicro)
			}
			if TaskState(t.State) == TaskSucceeded {
				started = t.UpdatedAt
			}
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		monthly, lines, err := s.servicePrice(ctx, tx, sv)
		if err != nil {
			return err
		}
		lj, _ := json.Marshal(lines)
		err = tx.Meters().Start(ctx, store.Meter{ServiceID: sv.ID, OrgID: proj.OrgID, ProjectID: proj.ID, CreditMicro: credit, StartedAt: started},
			store.MeterSegment{MonthlyMicro: monthly, Lines: string(lj), StartedAt: started})
		if errors.Is(err, store.ErrConflict) {
			continue
		} else if err != nil {
			return err
		}
		if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: proj.OrgID, Actor: "system", Action: "meter_started", ObjectType: "service", ObjectID: sv.ID,
			Details: map[string]any{"projectId": proj.ID, "monthlyMicroUsd": monthly, "prepaidMicroUsd": credit, "startedAt": started.Format(time.RFC3339)}}, now); err != nil {
			return err
		}
	}
	meters, err := tx.Meters().InProject(ctx, proj.ID)
	if err != nil {
		return err
	}
	for _, m := range meters {
		if m.StoppedAt != nil {
			continue
		}
		sv, err := tx.Services().Get(ctx, proj.OrgID, m.ServiceID)
		if err != nil {
			return err
		}
		switch ServiceState(sv.State) {
		case ServiceTornDown, ServiceFailed:
			if err := tx.Meters().Stop(ctx, m.ServiceID, sv.UpdatedAt); err != nil {
				return err
			}
			if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: proj.OrgID, Actor: "system", Action: "meter_stopped", ObjectType: "service", ObjectID: sv.ID,
				Details: map[string]any{"projectId": proj.ID, "stoppedAt": sv.UpdatedAt.Format(time.RFC3339)}}, now); err != nil {
				return err
			}
		case ServiceLive:
			monthly, lines, err := s.servicePrice(ctx, tx, sv)
			if err != nil {
				return err
			}
			segs, err := tx.Meters().Segments(ctx, m.ServiceID)
			if err != nil {
				return err
			}
			if len(segs) > 0 && segs[len(segs)-1].MonthlyMicro != monthly {
				if err := s.resize(ctx, tx, proj, sv.ID, monthly, lines, now); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// resize ends a meter's price at now and starts the new one.
func (s *Meter) resize(ctx context.Context, tx *store.Tx, proj store.Project, serviceID string, monthly money.MicroUSD, lines []pricing.Line, now time.Time) error {
	lj, _ := json.Marshal(lines)
	if err := tx.Meters().Resize(ctx, serviceID, now, monthly, string(lj)); err != nil {
		return err
	}
	_, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: proj.OrgID, Actor: "system", Action: "meter_resized", ObjectType: "service", ObjectID: serviceID,
		Details: map[string]any{"projectId": proj.ID, "monthlyMicroUsd": monthly}}, now)
	return err
}

// servicePrice prices a service as its serving version runs it.
func (s *Meter) servicePrice(ctx context.Context, tx *store.Tx, sv store.Service) (money.MicroUSD, []pricing.Line, error) {
	var spec versionSpec
	if sv.Version > 0 {
		v, err := tx.ServiceVersions().Get(ctx, sv.ID, sv.Version)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return 0, nil, err
		}
		if err == nil {
			_ = json.Unmarshal([]byte(v.Spec), &spec)
		}
	}
	monthly, lines := meteredPrice(sv.Target, spec.Addons)
	return monthly, lines, nil
}

// chargeMeters charges every period a meter owes: the ended ones, and the
// one it stopped in.
func (s *Meter) chargeMeters(ctx context.Context, tx *store.Tx, proj *store.Project, now time.Time) error {
	meters, err := tx.Meters().InProject(ctx, proj.ID)
	if err != nil {
		return err
	}
	current := monthStart(now)
	for _, m := range meters {
		last := current.AddDate(0, -1, 0) // ended periods only
		if m.StoppedAt != nil {
			last = monthStart(*m.StoppedAt)
		}
		segs, err := tx.Meters().Segments(ctx, m.ServiceID)
		if err != nil {
			return err
		}
		credit := m.CreditMicro
		for p := monthStart(m.StartedAt); !p.After(last); p = p.AddDate(0, 1, 0) {
			period := periodOf(p)
			if done, err := tx.Meters().Charged(ctx, m.ServiceID, period); err != nil {
				return err
			} else if done {
				continue
			}
			until := p.AddDate(0, 1, 0)
			if m.StoppedAt != nil && m.StoppedAt.Before(until) {
				until = *m.StoppedAt
			}
			hours, usage := usageIn(segs, p, p.AddDate(0, 1, 0), until)
			c := store.MeterCharge{ServiceID: m.ServiceID, Period: period, OrgID: proj.OrgID, ProjectID: proj.ID, Hours: hours,
				UsageMicro: usage, ReceiptID: auth.ID("rcp"), ChargedAt: now}
			c.CreditMicro = min(credit, usage)
			due := usage - c.CreditMicro
			// Usage already happened: what the budget cannot cover is
			// recorded as unpaid rather than refused.
			c.AmountMicro = min(due, max(0, remaining(*proj)))
			c.UnpaidMicro = due - c.AmountMicro
			if err := tx.Meters().Charge(ctx, c); errors.Is(err, store.ErrConflict) {
				continue
			} else if err != nil {
				return err
			}
			credit -= c.CreditMicro
			if c.AmountMicro > 0 {
				if err := tx.Projects().MoveMoney(ctx, proj.ID, 0, c.AmountMicro); err != nil {
					return err
				}
				proj.SpentMicro += c.AmountMicro
			}
			costs := []Cost{{Item: "usage:" + period, Amount: usage}}
			if c.CreditMicro > 0 {
				costs = append(costs, Cost{Item: "prepaid_by_launch", Amount: -c.CreditMicro})
			}
			if c.UnpaidMicro > 0 {
				costs = append(costs, Cost{Item: "over_budget_unpaid", Amount: -c.UnpaidMicro})
			}
			receipt := Receipt{ID: c.ReceiptID, Action: "meter_charge", Costs: costs, Total: c.AmountMicro, At: now}
			if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: proj.OrgID, Actor: "system", Action: "meter_charge", ObjectType: "service", ObjectID: m.ServiceID,
				Details: map[string]any{"projectId": proj.ID, "period": period, "hours": hours, "usageMicroUsd": usage, "prepaidMicroUsd": c.CreditMicro,
					"amountMicroUsd": c.AmountMicro, "unpaidMicroUsd": c.UnpaidMicro, "receipt": receipt}}, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// openPeriod is a monthly budget's period that has not been closed: the
// month after the last closed one, or the project's first month.
func openPeriod(ctx context.Context, tx *store.Tx, proj store.Project) (time.Time, error) {
	last, err := tx.Meters().LastClosedPeriod(ctx, proj.ID)
	if err != nil || last == "" {
		return monthStart(proj.CreatedAt), err
	}
	t, err := periodStart(last)
	return t.AddDate(0, 1, 0), err
}

// closePeriods closes a monthly budget's ended periods: what each spent is
// recorded, and spending starts again from zero. Holds carry over.
func (s *Meter) closePeriods(ctx context.Context, tx *store.Tx, proj *store.Project, now time.Time) error {
	open, err := openPeriod(ctx, tx, *proj)
	if err != nil {
		return err
	}
	for ; open.Before(monthStart(now)); open = open.AddDate(0, 1, 0) {
		period := periodOf(open)
		if err := tx.Meters().ClosePeriod(ctx, proj.ID, period, proj.LimitMicro, proj.SpentMicro, now); errors.Is(err, store.ErrConflict) {
			continue
		} else if err != nil {
			return err
		}
		spent := proj.SpentMicro
		if spent != 0 {
			if err := tx.Projects().MoveMoney(ctx, proj.ID, 0, -spent); err != nil {
				return err
			}
			proj.SpentMicro = 0
		}
		if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: proj.OrgID, Actor: "system", Action: "budget_period_closed", ObjectType: "project", ObjectID: proj.ID,
			Details: map[string]any{"period": period, "spentMicroUsd": spent, "budgetLimitMicroUsd": proj.LimitMicro}}, now); err != nil {
			return err
		}
	}
	return nil
}

// recordNotices records each threshold the period's spending has reached,
// once per period, with a ledger entry; mailNotices mails them.
func (s *Meter) recordNotices(ctx context.Context, tx *store.Tx, proj store.Project, period string, now time.Time) error {
	if proj.LimitMicro <= 0 {
		return nil
	}
	for _, pct := range BudgetThresholds {
		if proj.SpentMicro*100 < money.MicroUSD(pct)*proj.LimitMicro {
			break
		}
		added, err := tx.Meters().AddNotice(ctx, store.BudgetNotice{ProjectID: proj.ID, Period: period, OrgID: proj.OrgID, Percent: pct,
			SpentMicro: proj.SpentMicro, LimitMicro: proj.LimitMicro, CreatedAt: now})
		if err != nil {
			return err
		}
		if !added {
			continue
		}
		if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: proj.OrgID, Actor: "system", Action: "budget_notice", ObjectType: "project", ObjectID: proj.ID,
			Details: map[string]any{"period": period, "percent": pct, "spentMicroUsd": proj.SpentMicro, "budgetLimitMicroUsd": proj.LimitMicro}}, now); err != nil {
			return err
		}
	}
	return nil
}

// mailNotices mails each notice not yet mailed to the organisation's
// humans. A notice is claimed before its mail goes, so two replicas never
// both send it; a mail that fails is released for the next pass.
func (s *Meter) mailNotices(ctx context.Context) error {
	notices, err := s.store.Meters().Unmailed(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range notices {
		ok, err := s.store.Meters().MarkMailed(ctx, n.ProjectID, n.Period, n.Percent, s.Now())
		if err != nil || !ok {
			errs = append(errs, err)
			continue
		}
		if err := s.mailNotice(ctx, n); err != nil {
			s.log.Warn("mailing a budget notice", "project", n.ProjectID, "percent", n.Percent, "err", err)
			errs = append(errs, s.store.Meters().UnmarkMailed(ctx, n.ProjectID, n.Period, n.Percent))
		}
	}
	return errors.Join(errs...)
}

func (s *Meter) mailNotice(ctx context.Context, n store.BudgetNotice) error {
	emails, err := s.store.Meters().HumanEmails(ctx, n.OrgID)
	if err != nil || len(emails) == 0 {
		return err
	}
	proj, err := s.store.Projects().Get(ctx, n.OrgID, n.ProjectID)
	if err != nil {
		return err
	}
	from := "budgets@" + hostOnly(s.baseURL())
	subject := fmt.Sprintf("Project %s has spent %d%% of its budget", proj.Name, n.Percent)
	period := "this month (" + n.Period + ")"
	if n.Period == lifetimePeriod {
		period = "over its lifetime"
	}
	body := fmt.Sprintf("Project %s (%s) has spent %.2f USD of its %.2f USD budget %s.\n\n", proj.Name, proj.ID, usd(n.SpentMicro), usd(n.LimitMicro), period)
	if n.Percent >= 100 {
		body += "Nothing new will be spent until the budget is raised" + map[bool]string{true: " or the next month begins", false: ""}[n.Period != lifetimePeriod] + ".\n\n"
	}
	body += "Review the project and its budget: " + s.baseURL() + "/dashboard\n"
	var errs []error
	for _, to := range emails {
		msg, err := s.systemMessage(ctx, from, to, subject, body)
		if err == nil {
			err = s.deliverAnywhere(ctx, from, to, msg)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// budgetExhausted is the refusal of new spending once the period's budget
// is all spent.
func budgetExhausted(proj store.Project, pol ProjectPolicy, baseURL string) *apierr.Error {
	when := "for this month; it starts again next month"
	if !budgetMonthly(pol) {
		when = "for its lifetime"
	}
	return apierr.Newf("budget:exhausted", "project %s has spent its whole budget (%.2f USD) %s; nothing new is spent until a human raises it", proj.ID, usd(proj.LimitMicro), when).
		WithActions(
			actions.Tool("request_budget_raise", "agent", map[string]any{"id": proj.ID, "amountUsd": usd(max(proj.LimitMicro/2, 1_000_000)), "reason": "the budget is exhausted"}),
			actions.URL(baseURL+"/dashboard", "approve", "human"),
		)
}

// exhausted reports whether a locked project has spent its period's budget.
func exhausted(proj store.Project) bool {
	return proj.LimitMicro > 0 && proj.SpentMicro >= proj.LimitMicro
}

// PeriodView is a budget's current period: a calendar month, or the
// project's life. Accrued is what running services used and is not yet
// charged; Forecast is spent and held plus what they will have used by
// the period's end (for a lifetime budget, the current month's end).
type PeriodView struct {
	Kind BudgetPeriod
	// Period is "2026-11" for a month, or "lifetime".
	Period     string
	Start      time.Time
	End        *time.Time // nil for a lifetime budget
	Spent      money.MicroUSD
	Held       money.MicroUSD
	Accrued    money.MicroUSD
	Forecast   money.MicroUSD
	Thresholds []ThresholdNotice
}

// ThresholdNotice is a budget threshold (a percent of the limit) the
// period's spending crossed, and when it was noticed.
type ThresholdNotice struct {
	At      time.Time
	Percent int
}

// periodView is the budget's current period for a project's view.
func (s *Meter) periodView(ctx context.Context, p store.Project, pol ProjectPolicy, held money.MicroUSD) (PeriodView, error) {
	now := s.Now().UTC()
	start, end := monthStart(now), monthStart(now).AddDate(0, 1, 0)
	v := PeriodView{Kind: BudgetMonthly, Period: periodOf(now), Start: start, End: &end, Spent: p.SpentMicro, Held: held}
	if !budgetMonthly(pol) {
		v.Kind, v.Period, v.Start, v.End = BudgetLifetime, lifetimePeriod, p.CreatedAt, nil
	}
	meters, err := s.store.Meters().InProject(ctx, p.ID)
	if err != nil {
		return v, err
	}
	var accrued, forecast money.MicroUSD
	for _, m := range meters {
		a, f, err := s.unchargedUsage(ctx, m, start, now)
		if err != nil {
			return v, err
		}
		accrued, forecast = accrued+a, forecast+f
	}
	v.Accrued, v.Forecast = accrued, p.SpentMicro+held+forecast
	notices, err := s.store.Meters().Notices(ctx, p.ID, v.Period)
	if err != nil {
		return v, err
	}
	v.Thresholds = []ThresholdNotice{}
	for _, n := range notices {
		v.Thresholds = append(v.Thresholds, ThresholdNotice{At: n.CreatedAt, Percent: n.Percent})
	}
	return v, nil
}

// unchargedUsage is what a meter used and is not yet charged: every
// uncharged period up to now (accrued), and for the forecast, the rest of
// this month while it runs.
func (s *Meter) unchargedUsage(ctx context.Context, m store.Meter, start, now time.Time) (accrued, forecast money.MicroUSD, err error) {
	segs, err := s.store.Meters().Segments(ctx, m.ServiceID)
	if err != nil {
		return 0, 0, err
	}
	credit := m.CreditMicro
	for q := monthStart(m.StartedAt); !q.After(start); q = q.AddDate(0, 1, 0) {
		if done, err := s.store.Meters().Charged(ctx, m.ServiceID, periodOf(q)); err != nil {
			return 0, 0, err
		} else if done {
			continue
		}
		stop := now
		if m.StoppedAt != nil {
			stop = *m.StoppedAt
		}
		_, used := usageIn(segs, q, q.AddDate(0, 1, 0), stop)
		_, whole := usageIn(segs, q, q.AddDate(0, 1, 0), q.AddDate(0, 1, 0))
		if m.StoppedAt != nil {
			whole = used
		}
		accrued += max(0, used-credit)
		forecast += max(0, whole-credit)
		credit = max(0, credit-whole)
	}
	return accrued, forecast, nil
}

// pauseOrResume applies the policy's pause_services: while the period's
// budget is exhausted the project's process and worker services are
// paused (the supervisor stops their processes, the edge stops serving
// them, and their meters run at no price); once the budget has room again
// (a raise, or a new month) they are live again and the supervisor starts
// them.
func (s *Meter) pauseOrResume(ctx context.Context, tx *store.Tx, proj store.Project, pol ProjectPolicy, now time.Time, changed *[]string) error {
	pause := exhausted(proj) && pol.OnExhausted == PauseServices
	svcs, err := tx.Services().InProject(ctx, proj.OrgID, proj.ID)
	if err != nil {
		return err
	}
	for _, sv := range svcs {
		if !runsProcesses(sv.Target) {
			continue
		}
		switch {
		case pause && (ServiceState(sv.State) == ServiceLive || ServiceState(sv.State) == ServiceCrashed):
			if err := tx.Services().SetState(ctx, sv.ID, "paused", now); err != nil {
				return err
			}
			if _, err := tx.Meters().Get(ctx, sv.ID); err == nil {
				if err := s.resize(ctx, tx, proj, sv.ID, 0, nil, now); err != nil {
					return err
				}
			}
			if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: proj.OrgID, Actor: "system", Action: "service_paused", ObjectType: "service", ObjectID: sv.ID,
				Details: map[string]any{"projectId": proj.ID, "reason": "budget:exhausted"}}, now); err != nil {
				return err
			}
			*changed = append(*changed, serviceHostNames(sv)...)
		case !pause && ServiceState(sv.State) == ServicePaused:
			if err := tx.Services().SetState(ctx, sv.ID, "live", now); err != nil {
				return err
			}
			if _, err := tx.Meters().Get(ctx, sv.ID); err == nil {
				monthly, lines, err := s.servicePrice(ctx, tx, sv)
				if err != nil {
					return err
				}
				if err := s.resize(ctx, tx, proj, sv.ID, monthly, lines, now); err != nil {
					return err
				}
			}
			if _, err := tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: proj.OrgID, Actor: "system", Action: "service_resumed", ObjectType: "service", ObjectID: sv.ID,
				Details: map[string]any{"projectId": proj.ID}}, now); err != nil {
				return err
			}
			*changed = append(*changed, serviceHostNames(sv)...)
		}
	}
	return nil
}

// serviceHostNames are the hosts a service answers for.
func serviceHostNames(sv store.Service) []string {
	hosts := []string{sv.PreviewHost}
	if sv.Domain != "" {
		hosts = append(hosts, sv.Domain, "www."+sv.Domain)
	}
	return hosts
}

// SetBudgetPolicy is a human's choice of a project's budget period and of
// what happens when it is exhausted. It takes effect at the next pass: a
// project made monthly starts its period count from the month it was
// created, so months already past close at once.
func (s *Meter) SetBudgetPolicy(ctx context.Context, h Human, projectID string, period BudgetPeriod, onExhausted OnExhausted) error {
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		proj, err := tx.Projects().Lock(ctx, h.OrgID, projectID)
		if errors.Is(err, store.ErrNotFound) {
			return projectNotFound(projectID)
		}
		if err != nil {
			return err
		}
		pol, err := decodePolicy(proj.Policy)
		if err != nil {
			return err
		}
		pol.BudgetPeriod, pol.OnExhausted = period, onExhausted
		pj, err := json.Marshal(pol)
		if err != nil {
			return err
		}
		if err := tx.Projects().SetPolicy(ctx, proj.ID, string(pj)); err != nil {
			return err
		}
		_, err = tx.Ledger().Append(ctx, store.LedgerRecord{OrgID: h.OrgID, Actor: "human:" + h.UserID, Action: "set_budget_policy", ObjectType: "project", ObjectID: proj.ID,
			Details: map[string]any{"budgetPeriod": string(period), "onBudgetExhausted": string(onExhausted)}}, s.Now())
		return err
	})
	if err != nil {
		return err
	}
	return s.SettleProject(ctx, h.OrgID, projectID)
}

// refuseGrowthWhenExhausted refuses, on an exhausted budget, a new version
// that would cost more by the month than the one it replaces (an add-on
// more), or that would bring a paused service back: both are new spending.
func (s *Meter) refuseGrowthWhenExhausted(ctx context.Context, svc store.Service, prev, next versionSpec) error {
	before, _ := meteredPrice(svc.Target, prev.Addons)
	after, _ := meteredPrice(svc.Target, next.Addons)
	if ServiceState(svc.State) != ServicePaused && after <= before {
		return nil
	}
	proj, err := s.store.Projects().Get(ctx, svc.OrgID, svc.ProjectID)
	if err != nil {
		return apierr.Internal(err)
	}
	if !exhausted(proj) {
		return nil
	}
	pol, err := decodePolicy(proj.Policy)
	if err != nil {
		return apierr.Internal(err)
	}
	return budgetExhausted(proj, pol, s.baseURL())
}

// domainExpiry is when a registration's first term runs out: its purchase
// and the years bought (currentExpiry counts the renewals).
func domainExpiry(p store.Purchase) time.Time {
	return p.CreatedAt.UTC().AddDate(max(p.Years, 1), 0, 0)
}
