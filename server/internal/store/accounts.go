package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/pierhq/pier/ledger"
)

// ErrBudget is returned when a change would make spent plus held exceed the
// budget limit: the database's CHECK refused it.
var ErrBudget = errors.New("store: budget limit exceeded")

// ErrConflict is returned when a compare-and-set finds the row changed.
var ErrConflict = errors.New("store: state changed")

// Project is a billing group with a budget (micro-USD) and a policy (JSON,
// owned by the service layer).
type Project struct {
	ID, OrgID, Name string
	LimitMicro      int64
	SpentMicro      int64
	HeldMicro       int64
	Policy          string
	CreatedAt       time.Time
}

// Quote is a priced request; when held, its amount is reserved.
type Quote struct {
	ID, OrgID, ProjectID, KeyID string
	Decision                    string
	State                       string // held, consumed, released, expired, not_held
	AmountMicro                 int64
	Items, Reasons              string // JSON
	CreatedAt, ExpiresAt        time.Time
	SettledAt                   *time.Time
}

// Task is durable work an agent polls.
type Task struct {
	ID, OrgID, ProjectID, Kind, State string
	Steps                             string // JSON
	GateID                            string
	Payload                           string // JSON inputs and provider references
	Result                            string // JSON, may be empty
	CreatedAt, UpdatedAt              time.Time
}

// Gate waits for one human decision.
type Gate struct {
	ID, OrgID, TaskID, Kind string
	Payload                 string // JSON
	State                   string // pending, approved, denied
	DecidedBy               string
	DecidedAt               *time.Time
	CreatedAt               time.Time
}

// Tx is a transaction. Every money movement and its ledger entry commit
// together or not at all.
type Tx struct {
	tx *sql.Tx
	s  *Store
}

// InTx runs fn in a transaction. On SQLite the write lock is taken at BEGIN,
// so transactions serialize; on PostgreSQL rows are locked FOR UPDATE as read.
func (s *Store) InTx(ctx context.Context, fn func(tx *Tx) error) error {
	t, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(&Tx{tx: t, s: s}); err != nil {
		t.Rollback()
		return err
	}
	return t.Commit()
}

func (tx *Tx) forUpdate() string {
	if tx.s.engine == Postgres {
		return " FOR UPDATE"
	}
	return ""
}

const projectCols = `id, org_id, name, budget_limit_micro, spent_micro, held_micro, policy, created_at`

func scanProject(row interface{ Scan(...any) error }) (Project, error) {
	var p Project
	var created int64
	err := row.Scan(&p.ID, &p.OrgID, &p.Name, &p.LimitMicro, &p.SpentMicro, &p.HeldMicro, &p.Policy, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return p, ErrNotFound
	}
	p.CreatedAt = time.UnixMicro(created).UTC()
	return p, err
}

// CreateProject inserts a project.
func (tx *Tx) CreateProject(ctx context.Context, p Project) error {
	_, err := tx.tx.ExecContext(ctx, tx.s.q(`INSERT INTO projects (`+projectCols+`) VALUES (?, ?, ?, ?, 0, 0, ?, ?)`),
		p.ID, p.OrgID, p.Name, p.LimitMicro, p.Policy, p.CreatedAt.UnixMicro())
	return err
}

// LockProject reads a project of the organisation and locks it for the
// rest of the transaction.
func (tx *Tx) LockProject(ctx context.Context, orgID, id string) (Project, error) {
	return scanProject(tx.tx.QueryRowContext(ctx, tx.s.q(`SELECT `+projectCols+` FROM projects WHERE id = ? AND org_id = ?`+tx.forUpdate()), id, orgID))
}

// GetProject reads a project of the organisation.
func (s *Store) GetProject(ctx context.Context, orgID, id string) (Project, error) {
	return scanProject(s.db.QueryRowContext(ctx, s.q(`SELECT `+projectCols+` FROM projects WHERE id = ? AND org_id = ?`), id, orgID))
}

// ListProjects lists an organisation's projects, oldest first.
func (s *Store) ListProjects(ctx context.Context, orgID string) ([]Project, error) {
	return collect(ctx, s.db, scanProject, s.q(`SELECT `+projectCols+` FROM projects WHERE org_id = ? ORDER BY created_at, id`), orgID)
}

// MoveMoney changes a locked project's held and spent amounts by the given
// deltas. The database refuses (ErrBudget) a result over the limit.
func (tx *Tx) MoveMoney(ctx context.Context, projectID string, heldDelta, spentDelta int64) error {
	_, err := tx.tx.ExecContext(ctx, tx.s.q(`UPDATE projects SET held_micro = held_micro + ?, spent_micro = spent_micro + ? WHERE id = ?`),
		heldDelta, spentDelta, projectID)
	if isCheckViolation(err) {
		return ErrBudget
	}
	return err
}

// SetBudgetLimit changes a locked project's limit; ErrBudget when below
// what is spent and held.
func (tx *Tx) SetBudgetLimit(ctx context.Context, projectID string, limit int64) error {
	_, err := tx.tx.ExecContext(ctx, tx.s.q(`UPDATE projects SET budget_limit_micro = ? WHERE id = ?`), limit, projectID)
	if isCheckViolation(err) {
		return ErrBudget
	}
	return err
}

const quoteCols = `id, org_id, project_id, key_id, decision, state, amount_micro, items, reasons, created_at, expires_at, settled_at`

func scanQuote(row interface{ Scan(...any) error }) (Quote, error) {
	var q Quote
	var created, expires int64
	var settled sql.NullInt64
	err := row.Scan(&q.ID, &q.OrgID, &q.ProjectID, &q.KeyID, &q.Decision, &q.State, &q.AmountMicro, &q.Items, &q.Reasons, &created, &expires, &settled)
	if errors.Is(err, sql.ErrNoRows) {
		return q, ErrNotFound
	}
	q.CreatedAt = time.UnixMicro(created).UTC()
	q.ExpiresAt = time.UnixMicro(expires).UTC()
	if settled.Valid {
		t := time.UnixMicro(settled.Int64).UTC()
		q.SettledAt = &t
	}
	return q, err
}

// InsertQuote records a quote.
func (tx *Tx) InsertQuote(ctx context.Context, q Quote) error {
	_, err := tx.tx.ExecContext(ctx, tx.s.q(`INSERT INTO quotes (`+quoteCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)`),
		q.ID, q.OrgID, q.ProjectID, q.KeyID, q.Decision, q.State, q.AmountMicro, q.Items, q.Reasons, q.CreatedAt.UnixMicro(), q.ExpiresAt.UnixMicro())
	return err
}

// LockQuote reads a quote of the organisation and locks it.
func (tx *Tx) LockQuote(ctx context.Context, orgID, id string) (Quote, error) {
	return scanQuote(tx.tx.QueryRowContext(ctx, tx.s.q(`SELECT `+quoteCols+` FROM quotes WHERE id = ? AND org_id = ?`+tx.forUpdate()), id, orgID))
}

// SettleQuote moves a held quote to a final state (consumed, released or
// expired); ErrConflict if it is no longer held.
func (tx *Tx) SettleQuote(ctx context.Context, id, state string, now time.Time) error {
	res, err := tx.tx.ExecContext(ctx, tx.s.q(`UPDATE quotes SET state = ?, settled_at = ? WHERE id = ? AND state = 'held'`), state, now.UnixMicro(), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrConflict
	}
	return nil
}

// ExpiredHolds lists a locked project's held quotes whose hold has run out.
func (tx *Tx) ExpiredHolds(ctx context.Context, projectID string, now time.Time) ([]Quote, error) {
	return collect(ctx, tx.tx, scanQuote, tx.s.q(`SELECT `+quoteCols+` FROM quotes WHERE project_id = ? AND state = 'held' AND expires_at <= ? ORDER BY expires_at, id`), projectID, now.UnixMicro())
}

// ActiveHolds lists a project's held quotes that have not expired.
func (s *Store) ActiveHolds(ctx context.Context, projectID string, now time.Time) ([]Quote, error) {
	return collect(ctx, s.db, scanQuote, s.q(`SELECT `+quoteCols+` FROM quotes WHERE project_id = ? AND state = 'held' AND expires_at > ? ORDER BY expires_at, id`), projectID, now.UnixMicro())
}

// QuoteTotals sums a project's quotes by state, for checking the books.
func (s *Store) QuoteTotals(ctx context.Context, projectID string) (map[string]int64, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT state, COALESCE(SUM(amount_micro), 0) FROM quotes WHERE project_id = ? GROUP BY state`), projectID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var st string
		var sum int64
		if err := rows.Scan(&st, &sum); err != nil {
			return nil, err
		}
		out[st] = sum
	}
	return out, rows.Err()
}

const taskCols = `id, org_id, COALESCE(project_id, ''), kind, state, steps, COALESCE(gate_id, ''), COALESCE(payload, ''), COALESCE(result, ''), created_at, updated_at`

func scanTask(row interface{ Scan(...any) error }) (Task, error) {
	var t Task
	var created, updated int64
	err := row.Scan(&t.ID, &t.OrgID, &t.ProjectID, &t.Kind, &t.State, &t.Steps, &t.GateID, &t.Payload, &t.Result, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return t, ErrNotFound
	}
	t.CreatedAt = time.UnixMicro(created).UTC()
	t.UpdatedAt = time.UnixMicro(updated).UTC()
	return t, err
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// InsertTask records a task.
func (tx *Tx) InsertTask(ctx context.Context, t Task) error {
	_, err := tx.tx.ExecContext(ctx, tx.s.q(`INSERT INTO tasks (id, org_id, project_id, kind, state, steps, gate_id, payload, result, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		t.ID, t.OrgID, nullable(t.ProjectID), t.Kind, t.State, t.Steps, nullable(t.GateID), nullable(t.Payload), nullable(t.Result), t.CreatedAt.UnixMicro(), t.UpdatedAt.UnixMicro())
	return err
}

// UpdateTask stores a task's state, steps and result.
func (tx *Tx) UpdateTask(ctx context.Context, t Task) error {
	_, err := tx.tx.ExecContext(ctx, tx.s.q(`UPDATE tasks SET state = ?, steps = ?, gate_id = ?, payload = ?, result = ?, updated_at = ? WHERE id = ?`),
		t.State, t.Steps, nullable(t.GateID), nullable(t.Payload), nullable(t.Result), t.UpdatedAt.UnixMicro(), t.ID)
	return err
}

// UpdateTask stores a task outside a transaction.
func (s *Store) UpdateTask(ctx context.Context, t Task) error {
	return s.InTx(ctx, func(tx *Tx) error { return tx.UpdateTask(ctx, t) })
}

// UnfinishedTasks lists tasks that a runner should be working on: queued or
// running, for re-enqueueing after a restart.
func (s *Store) UnfinishedTasks(ctx context.Context) ([]Task, error) {
	return collect(ctx, s.db, scanTask, `SELECT `+taskCols+` FROM tasks WHERE state IN ('queued', 'running') ORDER BY created_at`)
}

// GetTaskAnyOrg reads a task by id, for the runner.
func (s *Store) GetTaskAnyOrg(ctx context.Context, id string) (Task, error) {
	return scanTask(s.db.QueryRowContext(ctx, s.q(`SELECT `+taskCols+` FROM tasks WHERE id = ?`), id))
}

// LockTask reads a task and locks it.
func (tx *Tx) LockTask(ctx context.Context, orgID, id string) (Task, error) {
	return scanTask(tx.tx.QueryRowContext(ctx, tx.s.q(`SELECT `+taskCols+` FROM tasks WHERE id = ? AND org_id = ?`+tx.forUpdate()), id, orgID))
}

// GetTask reads a task of the organisation.
func (s *Store) GetTask(ctx context.Context, orgID, id string) (Task, error) {
	return scanTask(s.db.QueryRowContext(ctx, s.q(`SELECT `+taskCols+` FROM tasks WHERE id = ? AND org_id = ?`), id, orgID))
}

// ListTasks lists an organisation's newest tasks.
func (s *Store) ListTasks(ctx context.Context, orgID string, limit int) ([]Task, error) {
	return collect(ctx, s.db, scanTask, s.q(`SELECT `+taskCols+` FROM tasks WHERE org_id = ? ORDER BY created_at DESC, id LIMIT ?`), orgID, limit)
}

const gateCols = `id, org_id, task_id, kind, payload, state, COALESCE(decided_by, ''), decided_at, created_at`

func scanGate(row interface{ Scan(...any) error }) (Gate, error) {
	var g Gate
	var created int64
	var decided sql.NullInt64
	err := row.Scan(&g.ID, &g.OrgID, &g.TaskID, &g.Kind, &g.Payload, &g.State, &g.DecidedBy, &decided, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return g, ErrNotFound
	}
	g.CreatedAt = time.UnixMicro(created).UTC()
	if decided.Valid {
		t := time.UnixMicro(decided.Int64).UTC()
		g.DecidedAt = &t
	}
	return g, err
}

// InsertGate records a pending gate.
func (tx *Tx) InsertGate(ctx context.Context, g Gate) error {
	_, err := tx.tx.ExecContext(ctx, tx.s.q(`INSERT INTO gates (id, org_id, task_id, kind, payload, state, created_at) VALUES (?, ?, ?, ?, ?, 'pending', ?)`),
		g.ID, g.OrgID, g.TaskID, g.Kind, g.Payload, g.CreatedAt.UnixMicro())
	return err
}

// DecideGate is the compare-and-set: it moves a pending gate of the
// organisation to approved or denied; ErrConflict if already decided.
func (tx *Tx) DecideGate(ctx context.Context, orgID, id, state, decidedBy string, now time.Time) error {
	res, err := tx.tx.ExecContext(ctx, tx.s.q(`UPDATE gates SET state = ?, decided_by = ?, decided_at = ? WHERE id = ? AND org_id = ? AND state = 'pending'`),
		state, decidedBy, now.UnixMicro(), id, orgID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrConflict
	}
	return nil
}

// GetGate reads a gate of the organisation.
func (s *Store) GetGate(ctx context.Context, orgID, id string) (Gate, error) {
	return scanGate(s.db.QueryRowContext(ctx, s.q(`SELECT `+gateCols+` FROM gates WHERE id = ? AND org_id = ?`), id, orgID))
}

// PendingGates lists an organisation's undecided gates.
func (s *Store) PendingGates(ctx context.Context, orgID string) ([]Gate, error) {
	return collect(ctx, s.db, scanGate, s.q(`SELECT `+gateCols+` FROM gates WHERE org_id = ? AND state = 'pending' ORDER BY created_at, id`), orgID)
}

// LedgerRecord is what a mutation writes to the ledger; Append fills in
// the sequence, time and hashes.
type LedgerRecord struct {
	OrgID, Actor, Action, ObjectType, ObjectID string
	Details                                    map[string]any
}

// AppendLedger adds an entry to the organisation's chain inside the
// mutation's transaction. The organisation row is locked first so that
// concurrent appends take turns and the chain never forks.
func (tx *Tx) AppendLedger(ctx context.Context, r LedgerRecord, now time.Time) (ledger.Entry, error) {
	var id string
	if err := tx.tx.QueryRowContext(ctx, tx.s.q(`SELECT id FROM organizations WHERE id = ?`+tx.forUpdate()), r.OrgID).Scan(&id); err != nil {
		return ledger.Entry{}, err
	}
	e := ledger.Entry{Seq: 1, PrevHash: ledger.Genesis}
	var seq int64
	var hash string
	err := tx.tx.QueryRowContext(ctx, tx.s.q(`SELECT seq, hash FROM ledger WHERE org_id = ? ORDER BY seq DESC LIMIT 1`), r.OrgID).Scan(&seq, &hash)
	switch {
	case err == nil:
		e.Seq, e.PrevHash = seq+1, hash
	case !errors.Is(err, sql.ErrNoRows):
		return e, err
	}
	e.At = now.UTC().Format("2006-01-02T15:04:05.000000Z")
	e.OrgID, e.Actor, e.Action, e.ObjectType, e.ObjectID, e.Details = r.OrgID, r.Actor, r.Action, r.ObjectType, r.ObjectID, r.Details
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	var err2 error
	if e.Hash, err2 = e.ComputeHash(); err2 != nil {
		return e, err2
	}
	detailsJSON, err := marshalDetails(e.Details)
	if err != nil {
		return e, err
	}
	_, err = tx.tx.ExecContext(ctx, tx.s.q(`INSERT INTO ledger (org_id, seq, at, actor, action, object_type, object_id, details, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		e.OrgID, e.Seq, e.At, e.Actor, e.Action, e.ObjectType, e.ObjectID, detailsJSON, e.PrevHash, e.Hash)
	return e, err
}

// LedgerEntries reads an organisation's chain after a sequence number.
func (s *Store) LedgerEntries(ctx context.Context, orgID string, after int64, limit int) ([]ledger.Entry, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT seq, at, org_id, actor, action, object_type, object_id, details, prev_hash, hash
		FROM ledger WHERE org_id = ? AND seq > ? ORDER BY seq LIMIT ?`), orgID, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ledger.Entry
	for rows.Next() {
		var e ledger.Entry
		var details string
		if err := rows.Scan(&e.Seq, &e.At, &e.OrgID, &e.Actor, &e.Action, &e.ObjectType, &e.ObjectID, &details, &e.PrevHash, &e.Hash); err != nil {
			return nil, err
		}
		if e.Details, err = unmarshalDetails(details); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// HoldQuote turns an approved quote into a hold; ErrConflict if it is not
// waiting.
func (tx *Tx) HoldQuote(ctx context.Context, id string, expires time.Time) error {
	res, err := tx.tx.ExecContext(ctx, tx.s.q(`UPDATE quotes SET state = 'held', decision = 'ALLOW', expires_at = ? WHERE id = ? AND state = 'not_held' AND decision = 'REQUIRES_APPROVAL'`),
		expires.UnixMicro(), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrConflict
	}
	return nil
}

// LockGate reads a gate of the organisation and locks it.
func (tx *Tx) LockGate(ctx context.Context, orgID, id string) (Gate, error) {
	return scanGate(tx.tx.QueryRowContext(ctx, tx.s.q(`SELECT `+gateCols+` FROM gates WHERE id = ? AND org_id = ?`+tx.forUpdate()), id, orgID))
}

// AcquireTaskLease gives owner the right to run a task until the lease
// runs out; false when another owner holds a live lease.
func (s *Store) AcquireTaskLease(ctx context.Context, id, owner string, now time.Time, ttl time.Duration) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE tasks SET lease_owner = ?, lease_until = ?
		WHERE id = ? AND (lease_owner IS NULL OR lease_owner = ? OR lease_until < ?)`),
		owner, now.Add(ttl).UnixMicro(), id, owner, now.UnixMicro())
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// ReleaseTaskLease gives a lease up.
func (s *Store) ReleaseTaskLease(ctx context.Context, id, owner string) error {
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE tasks SET lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ?`), id, owner)
	return err
}

// ClearTaskLeases drops every lease. Only a single-host embedded server may
// call it at start, when no other runner can exist.
func (s *Store) ClearTaskLeases(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, `UPDATE tasks SET lease_owner = NULL, lease_until = NULL WHERE lease_owner IS NOT NULL`)
	return err
}
