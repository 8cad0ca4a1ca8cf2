// Package tasks runs durable tasks with River: a River job per task run,
// on SQLite (riversqlite) or PostgreSQL (riverpgxv5). The tasks table is the
// source of truth for state and steps; River delivers at-least-once
// execution with retries, and a lease on the task row makes sure one runner
// works a task at a time. Steps are idempotent, so a retry or a restart
// after a crash finishes the task without acting twice.
package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"database/sql"

	"github.com/pierhq/pier/server/internal/auth"
	"github.com/pierhq/pier/server/internal/store"
)

// Args is the River job: run a task.
type Args struct {
	TaskID string `json:"taskId"`
}

// Kind names the job.
func (Args) Kind() string { return "pier_task" }

// Run is what a job does with a task.
type Run func(ctx context.Context, taskID string) error

// Config tunes the runner.
type Config struct {
	// JobTimeout bounds one run of a task (default 2 minutes).
	JobTimeout time.Duration
	// LeaseTTL is how long a runner's claim on a task lasts without renewal
	// (default DefaultLeaseTTL). A running job renews it every third of
	// that, so a replica that dies mid-run frees its task within LeaseTTL
	// whatever JobTimeout is.
	LeaseTTL time.Duration
	// MaxAttempts before a task is failed (default 10). A snooze (Wait,
	// or a task leased elsewhere) spends none.
	MaxAttempts int
	// RetryBackoff is the wait before the first retry of a transient
	// error, doubling at each further one up to MaxRetryBackoff (defaults
	// 1 s and one minute).
	RetryBackoff, MaxRetryBackoff time.Duration
	// FetchPoll is how often River looks for retries and snoozes coming due
	// (default 5 s): a retry due sooner waits for the next look.
	FetchPoll time.Duration
	// OnGiveUp is called when a task's last attempt fails.
	OnGiveUp func(ctx context.Context, taskID string, err error)
	// IdleAfter is how long River keeps running on SQLite once no job is
	// left (default DefaultIdleAfter). PostgreSQL runners never stop: other
	// replicas insert jobs they must see.
	IdleAfter time.Duration
	Log       *slog.Logger
}

// Runner executes tasks.
type Runner struct {
	store  *store.Store
	run    Run
	cfg    Config
	owner  string
	insert func(ctx context.Context, args Args) error
	start  func(ctx context.Context) error
	stop   func(ctx context.Context) error
	close  func()
	// pending reports whether River holds a job not yet finished.
	pending func(ctx context.Context) (bool, error)

	// On SQLite River runs only while there is work (see idle). mu orders
	// an insert and the start it causes against an idle stop.
	mu        sync.Mutex
	lazy      bool
	running   bool
	closed    bool
	runCtx    context.Context
	idleTimer *time.Timer
	// sweeping is closed by Stop to end the sweep of orphaned tasks.
	sweeping chan struct{}
}

// DefaultIdleAfter is how long an embedded runner with no unfinished job
// keeps River running before stopping it. River's client wakes many times
// a second while it runs (its completer ticks every 50 ms), which an idle
// server should not; the next Enqueue starts it again.
const DefaultIdleAfter = 15 * time.Second

type worker struct {
	river.WorkerDefaults[Args]
	r *Runner
}

func (w *worker) Timeout(*river.Job[Args]) time.Duration { return w.r.cfg.JobTimeout }

func (w *worker) Work(ctx context.Context, job *river.Job[Args]) error {
	r := w.r
	// The lease names this job, not just this runner: two jobs for one
	// task (the start-up sweep's and one River kept from before a crash)
	// must not run it side by side in one process either.
	owner := fmt.Sprintf("%s:%d", r.owner, job.ID)
	ok, err := r.store.Tasks().AcquireLease(ctx, job.Args.TaskID, owner, time.Now(), r.cfg.LeaseTTL)
	if err != nil {
		return err
	}
	if !ok {
		// Another runner is working the task; look again shortly.
		return river.JobSnooze(2 * time.Second)
	}
	defer r.store.Tasks().ReleaseLease(context.WithoutCancel(ctx), job.Args.TaskID, owner)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go r.heartbeat(ctx, cancel, job.Args.TaskID, owner)
	err = r.run(ctx, job.Args.TaskID)
	var wait *WaitError
	if errors.As(err, &wait) {
		// Waiting on something else (another task, a human) is not a
		// failure and spends no attempt.
		return river.JobSnooze(wait.After)
	}
	if err != nil && job.Attempt >= job.MaxAttempts && r.cfg.OnGiveUp != nil {
		r.cfg.OnGiveUp(context.WithoutCancel(ctx), job.Args.TaskID, err)
	}
	return err
}

// errLeaseLost ends a run whose lease another runner took: this one
// could not renew it in time, so the task is no longer its to work.
var errLeaseLost = errors.New("tasks: the task's lease passed to another runner")

// heartbeat renews a running task's lease every third of LeaseTTL until
// ctx ends. A renewal refused (another runner holds the lease) or a lease
// left unrenewed past its end (the database unreachable) cancels the run:
// the task may already be running elsewhere.
func (r *Runner) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, taskID, owner string) {
	every := r.cfg.LeaseTTL / 3
	t := time.NewTicker(every)
	defer t.Stop()
	renewed := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		rctx, rcancel := context.WithTimeout(ctx, every)
		ok, err := r.store.Tasks().AcquireLease(rctx, taskID, owner, now, r.cfg.LeaseTTL)
		rcancel()
		switch {
		case err == nil && ok:
			renewed = now
		case err == nil, time.Since(renewed) >= r.cfg.LeaseTTL:
			r.cfg.Log.Warn("task lease lost; stopping this run", "task", taskID, "err", err)
			cancel(errLeaseLost)
			return
		}
	}
}

// RiverLogger is the logger River writes to: only its warnings and errors,
// unless the server logs at debug, since at INFO River narrates every
// start, leadership election and job (33 of a fresh server's first 41
// lines).
func RiverLogger(base *slog.Logger) *slog.Logger {
	if base.Enabled(context.Background(), slog.LevelDebug) {
		return base.With("component", "river")
	}
	return slog.New(minLevel{base.Handler(), slog.LevelWarn}).With("component", "river")
}

// WaitError asks the runner to look at the task again after a while: it
// waits on something outside it, such as another task or a human.
type WaitError struct{ After time.Duration }

func (e *WaitError) Error() string { return fmt.Sprintf("waiting; look again in %s", e.After) }

// Wait is the error a Run returns to be called again after d.
func Wait(d time.Duration) error { return &WaitError{After: d} }

// New prepares a runner over the store's engine and migrates River's
// tables. databaseURL is needed on PostgreSQL, where River uses its own pgx
// pool.
func New(ctx context.Context, st *store.Store, databaseURL string, run Run, cfg Config) (*Runner, error) {
	if cfg.JobTimeout == 0 {
		cfg.JobTimeout = 2 * time.Minute
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = DefaultRetryBackoff
	}
	if cfg.MaxRetryBackoff == 0 {
		cfg.MaxRetryBackoff = DefaultMaxRetryBackoff
	}
	if cfg.FetchPoll == 0 {
		cfg.FetchPoll = defaultFetchPoll
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.IdleAfter == 0 {
		cfg.IdleAfter = DefaultIdleAfter
	}
	r := &Runner{store: st, run: run, cfg: cfg, owner: auth.ID("run")}
	workers := river.NewWorkers()
	river.AddWorker(workers, &worker{r: r})
	rc := &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 8}},
		Workers:           workers,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: cfg.FetchPoll,
		JobTimeout:        cfg.JobTimeout,
		// River's rescuer is the backstop for a job whose runner died: the
		// task itself moves sooner, once its lease runs out (sweepOrphans).
		RescueStuckJobsAfter: cfg.JobTimeout + cfg.LeaseTTL,
		MaxAttempts:          cfg.MaxAttempts,
		RetryPolicy:          backoff{base: cfg.RetryBackoff, max: cfg.MaxRetryBackoff},
		Logger:               RiverLogger(cfg.Log),
	}
	switch st.Engine() {
	case store.SQLite:
		// One process owns an embedded database, so nothing but this
		// client inserts jobs: River's poll-only mode, woken by each local
		// insert, replaces the SQLite listener's 50 ms notification poll,
		// and an idle server sleeps between River's maintenance ticks.
		rc.PollOnly = true
		r.lazy = true
		if err := setup[*sql.Tx](ctx, r, localSQLiteDriver{riversqlite.New(st.DB())}, rc); err != nil {
			return nil, err
		}
		r.close = func() {}
	case store.Postgres:
		pool, err := pgxpool.New(ctx, databaseURL)
		if err != nil {
			return nil, err
		}
		if err := setup[pgx.Tx](ctx, r, riverpgxv5.New(pool), rc); err != nil {
			pool.Close()
			return nil, err
		}
		r.close = pool.Close
	default:
		return nil, fmt.Errorf("tasks: no River driver for %s", st.Engine())
	}
	return r, nil
}

func setup[TTx any](ctx context.Context, r *Runner, driver riverdriver.Driver[TTx], rc *river.Config) error {
	// River's migrations log every step at info; keep only warnings.
	quiet := slog.New(minLevel{r.cfg.Log.Handler(), slog.LevelWarn})
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: quiet.With("component", "rivermigrate")})
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("tasks: migrate River: %w", err)
	}
	client, err := river.NewClient(driver, rc)
	if err != nil {
		return err
	}
	r.insert = func(ctx context.Context, args Args) error {
		// Jobs are not unique: River requires a unique job to block on
		// "running", and a job left running by a dead process would then
		// block the task until rescued. Extra jobs are harmless: the task
		// lease lets one work at a time, and a finished task ends the rest.
		_, err := client.Insert(ctx, args, nil)
		return err
	}
	r.start = client.Start
	r.stop = client.Stop
	r.pending = func(ctx context.Context) (bool, error) {
		res, err := client.JobList(ctx, river.NewJobListParams().First(1).States(rivertype.JobStateAvailable,
			rivertype.JobStatePending, rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled))
		if err != nil {
			return false, err
		}
		return len(res.Jobs) > 0, nil
	}
	return nil
}

// ensureRunning starts River if it is stopped. r.mu is held.
func (r *Runner) ensureRunning() error {
	if r.running || r.closed || r.runCtx == nil {
		return nil
	}
	if err := r.start(r.runCtx); err != nil {
		return err
	}
	r.running = true
	if r.lazy {
		r.idleTimer = time.AfterFunc(r.cfg.IdleAfter, r.stopIfIdle)
	}
	return nil
}

// stopIfIdle stops River when it holds no unfinished job, and otherwise
// looks again after Config.IdleAfter.
func (r *Runner) stopIfIdle() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.running || r.closed {
		return
	}
	ctx, cancel := context.WithTimeout(r.runCtx, 10*time.Second)
	defer cancel()
	busy, err := r.pending(ctx)
	if err != nil || busy {
		r.idleTimer.Reset(r.cfg.IdleAfter)
		return
	}
	if err := r.stop(ctx); err != nil {
		r.cfg.Log.Warn("stopping idle task runner", "err", err)
		r.idleTimer.Reset(r.cfg.IdleAfter)
		return
	}
	r.running = false
}

// Running reports whether River is working jobs now; on SQLite it is not
// while the runner is idle.
func (r *Runner) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running
}

// DefaultLeaseTTL is how long a task's lease outlives its last renewal: a
// replica killed mid-run frees its task after at most this, and another
// takes it at its next sweep (every orphanSweep).
const DefaultLeaseTTL = 10 * time.Second

// orphanSweep is how often replicas on PostgreSQL look for tasks whose
// lease ran out.
const orphanSweep = 5 * time.Second

// defaultFetchPoll is how often a runner looks for jobs that no insert
// announced: retries and snoozes coming due.
const defaultFetchPoll = 5 * time.Second

// The retry defaults: transient errors are retried after 1 s, 2 s, 4 s…
// up to a minute apart, and the task fails after the tenth attempt.
const (
	DefaultMaxAttempts     = 10
	DefaultRetryBackoff    = time.Second
	DefaultMaxRetryBackoff = time.Minute
)

// backoff is the runner's River retry policy: base after the first error,
// doubling with each error the job has had, capped at max. Snoozes record
// no error, so waiting does not lengthen it.
type backoff struct{ base, max time.Duration }

func (b backoff) NextRetry(job *rivertype.JobRow) time.Time {
	return time.Now().Add(b.delay(len(job.Errors)))
}

// delay is the wait after a job's errors-th earlier error.
func (b backoff) delay(errors int) time.Duration {
	d := b.base
	for range errors {
		if d >= b.max {
			break
		}
		d *= 2
	}
	return min(d, b.max)
}

// localSQLiteDriver is River's SQLite driver without its polled listener.
// River wakes its own producer on a job inserted outside a transaction only
// when the driver has no listener; Enqueue inserts that way, so a task
// starts at once instead of at the next fetch poll.
type localSQLiteDriver struct{ *riversqlite.Driver }

func (localSQLiteDriver) SupportsListener() bool { return false }

// Enqueue schedules a run of a task.
func (r *Runner) Enqueue(ctx context.Context, taskID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.insert(context.WithoutCancel(ctx), Args{TaskID: taskID}); err != nil {
		return err
	}
	return r.ensureRunning()
}

// Start begins working jobs, after re-enqueueing every unfinished task: a
// task whose job was lost, or whose process died mid-run, resumes here.
func (r *Runner) Start(ctx context.Context) error {
	if r.store.Engine() == store.SQLite {
		// An embedded server is the only runner on its database, so any
		// lease left behind belongs to a process that is gone.
		if err := r.store.Tasks().ClearLeases(ctx); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.runCtx = context.WithoutCancel(ctx)
	var err error
	if !r.lazy {
		err = r.ensureRunning()
	} else if busy, perr := r.pending(ctx); perr != nil || busy {
		// Jobs left by an earlier run (retries, snoozes) need River now.
		err = errors.Join(perr, r.ensureRunning())
	}
	r.mu.Unlock()
	if err != nil {
		return err
	}
	tasks, err := r.store.Tasks().Unfinished(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range tasks {
		errs = append(errs, r.Enqueue(ctx, t.ID))
	}
	if len(tasks) > 0 {
		r.cfg.Log.Info("resuming unfinished tasks", "count", len(tasks))
	}
	if r.store.Engine() == store.Postgres {
		r.mu.Lock()
		if r.sweeping == nil && !r.closed {
			r.sweeping = make(chan struct{})
			go r.sweepOrphans(r.sweeping)
		}
		r.mu.Unlock()
	}
	return errors.Join(errs...)
}

// sweepOrphans, with replicas on PostgreSQL, enqueues every few seconds
// the unfinished tasks whose lease ran out: their runner died mid-run
// (a SIGKILLed replica): a live run renews its lease every third of
// LeaseTTL, so a lease runs out only when its runner stopped. River's own
// rescuer would find the job too, but only after JobTimeout and on its
// 30 s cycle; the extra job finds the task done or leased
// and ends if another got there first.
func (r *Runner) sweepOrphans(done chan struct{}) {
	t := time.NewTicker(orphanSweep)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		orphans, err := r.store.Tasks().ExpiredLeases(ctx, time.Now())
		for _, o := range orphans {
			if err := r.Enqueue(ctx, o.ID); err == nil {
				r.cfg.Log.Info("taking over a task whose runner stopped", "task", o.ID)
			}
		}
		cancel()
		if err != nil {
			r.cfg.Log.Debug("sweeping orphaned tasks", "err", err)
		}
	}
}

// Stop waits for running jobs to finish, up to ctx's deadline.
func (r *Runner) Stop(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	if r.idleTimer != nil {
		r.idleTimer.Stop()
	}
	if r.sweeping != nil {
		close(r.sweeping)
		r.sweeping = nil
	}
	running := r.running
	r.mu.Unlock()
	// River waits for the jobs it is running, and a job may enqueue
	// another task (a workflow's launch step does): Enqueue takes mu, so
	// River is stopped without it. closed keeps it from starting again.
	var err error
	if running {
		err = r.stop(ctx)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running = false
	r.close()
	return err
}

// minLevel drops records below a level.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(a), m.min}
}

func (m minLevel) WithGroup(name string) slog.Handler {
	return minLevel{m.Handler.WithGroup(name), m.min}
}
