package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/pierhq/pier/server/internal/money"
)

// Meters holds what running services accrue: each service's meter and its
// price segments, the charges made per service and period, a monthly
// budget's closed periods, and the budget notices sent.
type Meters struct{ conn }

// Meters reaches the metering tables.
func (n nouns) Meters() Meters { return Meters{n.c} }

// Meter follows one service from its launch's success to its teardown.
type Meter struct {
	ServiceID, OrgID, ProjectID string
	// CreditMicro is what the launch prepaid and usage has not yet drawn.
	CreditMicro money.MicroUSD
	StartedAt   time.Time
	StoppedAt   *time.Time
}

// MeterSegment is a stretch of a meter at one monthly price.
type MeterSegment struct {
	ServiceID    string
	Seq          int
	MonthlyMicro money.MicroUSD
	Lines        string // JSON: the catalog lines that make the price
	StartedAt    time.Time
	EndedAt      *time.Time
}

// MeterCharge is one service's charge for one period.
type MeterCharge struct {
	ServiceID, Period, OrgID, ProjectID string
	Hours                               int
	// UsageMicro is what the hours cost; CreditMicro of it came from the
	// launch's prepayment, AmountMicro from the budget, and UnpaidMicro
	// is what the budget could not cover.
	UsageMicro, CreditMicro, AmountMicro, UnpaidMicro money.MicroUSD
	ReceiptID                                         string
	ChargedAt                                         time.Time
}

// BudgetNotice is a threshold of a project's budget crossed in a period.
type BudgetNotice struct {
	ProjectID, Period, OrgID string
	Percent                  int
	SpentMicro, LimitMicro   money.MicroUSD
	CreatedAt                time.Time
	MailedAt                 *time.Time
}

func microTime(v int64) time.Time { return time.UnixMicro(v).UTC() }

func nullMicroTime(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := microTime(v.Int64)
	return &t
}

const meterCols = `service_id, org_id, project_id, credit_micro, started_at, stopped_at`

func scanMeter(row interface{ Scan(...any) error }) (Meter, error) {
	var m Meter
	var started int64
	var stopped sql.NullInt64
	err := row.Scan(&m.ServiceID, &m.OrgID, &m.ProjectID, &m.CreditMicro, &started, &stopped)
	if errors.Is(err, sql.ErrNoRows) {
		return m, ErrNotFound
	}
	m.StartedAt, m.StoppedAt = microTime(started), nullMicroTime(stopped)
	return m, err
}

const segmentCols = `service_id, seq, monthly_micro, lines, started_at, ended_at`

func scanSegment(row interface{ Scan(...any) error }) (MeterSegment, error) {
	var s MeterSegment
	var started int64
	var ended sql.NullInt64
	err := row.Scan(&s.ServiceID, &s.Seq, &s.MonthlyMicro, &s.Lines, &started, &ended)
	s.StartedAt, s.EndedAt = microTime(started), nullMicroTime(ended)
	return s, err
}

const chargeCols = `service_id, period, org_id, project_id, hours, usage_micro, credit_micro, amount_micro, unpaid_micro, receipt_id, charged_at`

func scanCharge(row interface{ Scan(...any) error }) (MeterCharge, error) {
	var c MeterCharge
	var at int64
	err := row.Scan(&c.ServiceID, &c.Period, &c.OrgID, &c.ProjectID, &c.Hours, &c.UsageMicro, &c.CreditMicro, &c.AmountMicro, &c.UnpaidMicro, &c.ReceiptID, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return c, ErrNotFound
	}
	c.ChargedAt = microTime(at)
	return c, err
}

const noticeCols = `project_id, period, org_id, percent, spent_micro, limit_micro, created_at, mailed_at`

func scanNotice(row interface{ Scan(...any) error }) (BudgetNotice, error) {
	var n BudgetNotice
	var created int64
	var mailed sql.NullInt64
	err := row.Scan(&n.ProjectID, &n.Period, &n.OrgID, &n.Percent, &n.SpentMicro, &n.LimitMicro, &created, &mailed)
	n.CreatedAt, n.MailedAt = microTime(created), nullMicroTime(mailed)
	return n, err
}

// Start opens a service's meter with its first segment; a meter already
// open is left as it is (ErrConflict).
func (db Meters) Start(ctx context.Context, m Meter, first MeterSegment) error {
	res, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO meters (`+meterCols+`) VALUES (?, ?, ?, ?, ?, NULL) ON CONFLICT (service_id) DO NOTHING`),
		m.ServiceID, m.OrgID, m.ProjectID, m.CreditMicro, m.StartedAt.UnixMicro())
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrConflict
	}
	_, err = db.ex.ExecContext(ctx, db.q(`INSERT INTO meter_segments (`+segmentCols+`) VALUES (?, 1, ?, ?, ?, NULL)`),
		m.ServiceID, first.MonthlyMicro, first.Lines, first.StartedAt.UnixMicro())
	return err
}

// Get reads a service's meter.
func (db Meters) Get(ctx context.Context, serviceID string) (Meter, error) {
	return scanMeter(db.ex.QueryRowContext(ctx, db.q(`SELECT `+meterCols+` FROM meters WHERE service_id = ?`), serviceID))
}

// InProject lists a project's meters, oldest first.
func (db Meters) InProject(ctx context.Context, projectID string) ([]Meter, error) {
	return collect(ctx, db.ex, scanMeter, db.q(`SELECT `+meterCols+` FROM meters WHERE project_id = ? ORDER BY started_at, service_id`), projectID)
}

// Segments lists a meter's segments in order.
func (db Meters) Segments(ctx context.Context, serviceID string) ([]MeterSegment, error) {
	return collect(ctx, db.ex, scanSegment, db.q(`SELECT `+segmentCols+` FROM meter_segments WHERE service_id = ? ORDER BY seq`), serviceID)
}

// Resize ends a meter's open segment at at and opens the next at a new
// price.
func (db Meters) Resize(ctx context.Context, serviceID string, at time.Time, monthly money.MicroUSD, lines string) error {
	var seq int
	if err := db.ex.QueryRowContext(ctx, db.q(`SELECT COALESCE(MAX(seq), 0) FROM meter_segments WHERE service_id = ?`), serviceID).Scan(&seq); err != nil {
		return err
	}
	if _, err := db.ex.ExecContext(ctx, db.q(`UPDATE meter_segments SET ended_at = ? WHERE service_id = ? AND ended_at IS NULL`), at.UnixMicro(), serviceID); err != nil {
		return err
	}
	_, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO meter_segments (`+segmentCols+`) VALUES (?, ?, ?, ?, ?, NULL)`),
		serviceID, seq+1, monthly, lines, at.UnixMicro())
	return err
}

// Stop ends a meter and its open segment at at; a stopped meter stays as
// it is.
func (db Meters) Stop(ctx context.Context, serviceID string, at time.Time) error {
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE meters SET stopped_at = ? WHERE service_id = ? AND stopped_at IS NULL`), at.UnixMicro(), serviceID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return nil
	}
	_, err = db.ex.ExecContext(ctx, db.q(`UPDATE meter_segments SET ended_at = ? WHERE service_id = ? AND ended_at IS NULL`), at.UnixMicro(), serviceID)
	return err
}

// Charge records a service's charge for a period and draws its credit;
// ErrConflict when the period is charged already.
func (db Meters) Charge(ctx context.Context, c MeterCharge) error {
	res, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO meter_charges (`+chargeCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (service_id, period) DO NOTHING`),
		c.ServiceID, c.Period, c.OrgID, c.ProjectID, c.Hours, c.UsageMicro, c.CreditMicro, c.AmountMicro, c.UnpaidMicro, c.ReceiptID, c.ChargedAt.UnixMicro())
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrConflict
	}
	if c.CreditMicro == 0 {
		return nil
	}
	_, err = db.ex.ExecContext(ctx, db.q(`UPDATE meters SET credit_micro = credit_micro - ? WHERE service_id = ?`), c.CreditMicro, c.ServiceID)
	return err
}

// Charged reports whether a service's period is charged.
func (db Meters) Charged(ctx context.Context, serviceID, period string) (bool, error) {
	var n int
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT COUNT(*) FROM meter_charges WHERE service_id = ? AND period = ?`), serviceID, period).Scan(&n)
	return n > 0, err
}

// Charges lists a project's charges, by period then service.
func (db Meters) Charges(ctx context.Context, projectID string) ([]MeterCharge, error) {
	return collect(ctx, db.ex, scanCharge, db.q(`SELECT `+chargeCols+` FROM meter_charges WHERE project_id = ? ORDER BY period, service_id`), projectID)
}

// Unmetered lists the live services that have no meter yet.
func (db Meters) Unmetered(ctx context.Context, projectID string) ([]Service, error) {
	return collect(ctx, db.ex, scanService, db.q(`SELECT `+serviceColsS+` FROM services s LEFT JOIN meters m ON m.service_id = s.id
		WHERE s.project_id = ? AND s.state = 'live' AND m.service_id IS NULL ORDER BY s.created_at, s.id`), projectID)
}

// LaunchTask finds the launch task that created a service.
func (db Meters) LaunchTask(ctx context.Context, orgID, serviceID string) (Task, error) {
	return scanTask(db.ex.QueryRowContext(ctx, db.q(`SELECT `+taskCols+` FROM tasks WHERE org_id = ? AND kind = 'launch' AND payload LIKE ? ORDER BY created_at LIMIT 1`),
		orgID, `%"serviceId":"`+serviceID+`"%`))
}

// ProjectRef names a project and its organisation.
type ProjectRef struct{ OrgID, ID string }

// AllProjects lists every project of every organisation, for the meter's
// pass.
func (db Meters) AllProjects(ctx context.Context) ([]ProjectRef, error) {
	return collect(ctx, db.ex, func(row interface{ Scan(...any) error }) (ProjectRef, error) {
		var r ProjectRef
		return r, row.Scan(&r.OrgID, &r.ID)
	}, db.q(`SELECT org_id, id FROM projects ORDER BY id`))
}

// LastClosedPeriod is a monthly budget's latest closed period, "" for none.
func (db Meters) LastClosedPeriod(ctx context.Context, projectID string) (string, error) {
	var p sql.NullString
	err := db.ex.QueryRowContext(ctx, db.q(`SELECT MAX(period) FROM budget_periods WHERE project_id = ?`), projectID).Scan(&p)
	return p.String, err
}

// ClosePeriod records what a period spent; ErrConflict when it is closed
// already.
func (db Meters) ClosePeriod(ctx context.Context, projectID, period string, limit, spent money.MicroUSD, at time.Time) error {
	res, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO budget_periods (project_id, period, limit_micro, spent_micro, closed_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (project_id, period) DO NOTHING`),
		projectID, period, limit, spent, at.UnixMicro())
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrConflict
	}
	return nil
}

// AddNotice records a threshold crossed; false when it was recorded
// before.
func (db Meters) AddNotice(ctx context.Context, n BudgetNotice) (bool, error) {
	res, err := db.ex.ExecContext(ctx, db.q(`INSERT INTO budget_notices (`+noticeCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, NULL) ON CONFLICT (project_id, period, percent) DO NOTHING`),
		n.ProjectID, n.Period, n.OrgID, n.Percent, n.SpentMicro, n.LimitMicro, n.CreatedAt.UnixMicro())
	if err != nil {
		return false, err
	}
	k, _ := res.RowsAffected()
	return k == 1, nil
}

// Notices lists a project's notices of a period, lowest threshold first.
func (db Meters) Notices(ctx context.Context, projectID, period string) ([]BudgetNotice, error) {
	return collect(ctx, db.ex, scanNotice, db.q(`SELECT `+noticeCols+` FROM budget_notices WHERE project_id = ? AND period = ? ORDER BY percent`), projectID, period)
}

// OrgNotices lists an organisation's newest notices.
func (db Meters) OrgNotices(ctx context.Context, orgID string, limit int) ([]BudgetNotice, error) {
	return collect(ctx, db.ex, scanNotice, db.q(`SELECT `+noticeCols+` FROM budget_notices WHERE org_id = ? ORDER BY created_at DESC, percent DESC LIMIT ?`), orgID, limit)
}

// Unmailed lists the notices whose mail is not yet sent.
func (db Meters) Unmailed(ctx context.Context) ([]BudgetNotice, error) {
	return collect(ctx, db.ex, scanNotice, db.q(`SELECT `+noticeCols+` FROM budget_notices WHERE mailed_at IS NULL ORDER BY created_at, percent LIMIT 100`))
}

// MarkMailed records that a notice's mail was handed on; false when
// another replica did it first.
func (db Meters) MarkMailed(ctx context.Context, projectID, period string, percent int, at time.Time) (bool, error) {
	res, err := db.ex.ExecContext(ctx, db.q(`UPDATE budget_notices SET mailed_at = ? WHERE project_id = ? AND period = ? AND percent = ? AND mailed_at IS NULL`),
		at.UnixMicro(), projectID, period, percent)
	if err != nil {
		return false, err
	}
	k, _ := res.RowsAffected()
	return k == 1, nil
}

// UnmarkMailed gives a notice whose mail failed back to the next pass.
func (db Meters) UnmarkMailed(ctx context.Context, projectID, period string, percent int) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE budget_notices SET mailed_at = NULL WHERE project_id = ? AND period = ? AND percent = ?`), projectID, period, percent)
	return err
}

// HumanEmails lists the addresses of an organisation's humans.
func (db Meters) HumanEmails(ctx context.Context, orgID string) ([]string, error) {
	return collect(ctx, db.ex, func(row interface{ Scan(...any) error }) (string, error) {
		var e string
		return e, row.Scan(&e)
	}, db.q(`SELECT email FROM humans WHERE org_id = ? AND email <> '' ORDER BY created_at, id`), orgID)
}

// SetPolicy replaces a locked project's policy.
func (db Projects) SetPolicy(ctx context.Context, projectID, policy string) error {
	_, err := db.ex.ExecContext(ctx, db.q(`UPDATE projects SET policy = ? WHERE id = ?`), policy, projectID)
	return err
}
