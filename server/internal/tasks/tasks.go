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
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

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
	// (default JobTimeout plus a minute).
	LeaseTTL time.Duration
	// MaxAttempts before a task is failed (default 10).
	MaxAttempts int
	// MaxBackoff caps the wait between attempts (default 1 minute).
	MaxBackoff time.Duration
	// OnGiveUp is called when a task's last attempt fails.
	OnGiveUp func(ctx context.Context, taskID string, err error)
	Log      *slog.Logger
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
}

type worker struct {
	river.WorkerDefaults[Args]
	r *Runner
}

func (w *worker) Timeout(*river.Job[Args]) time.Duration { return w.r.cfg.JobTimeout }

// NextRetry backs off exponentially from one second, capped at MaxBackoff:
// only transient errors come back here (a permanent one ends the task in
// the run itself), and a task gives up after MaxAttempts.
func (w *worker) NextRetry(job *river.Job[Args]) time.Time {
	return time.Now().Add(Backoff(job.Attempt, w.r.cfg.MaxBackoff))
}

// Backoff is the wait before retry number attempt: 1s, 2s, 4s… up to max.
func Backoff(attempt int, max time.Duration) time.Duration {
	d := time.Second
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

func (w *worker) Work(ctx context.Context, job *river.Job[Args]) error {
	r := w.r
	ok, err := r.store.AcquireTaskLease(ctx, job.Args.TaskID, r.owner, time.Now(), r.cfg.LeaseTTL)
	if err != nil {
		return err
	}
	if !ok {
		// Another runner is working the task; look again shortly.
		return river.JobSnooze(2 * time.Second)
	}
	defer r.store.ReleaseTaskLease(context.WithoutCancel(ctx), job.Args.TaskID, r.owner)
	err = r.run(ctx, job.Args.TaskID)
	if err != nil && job.Attempt >= job.MaxAttempts && r.cfg.OnGiveUp != nil {
		r.cfg.OnGiveUp(context.WithoutCancel(ctx), job.Args.TaskID, err)
	}
	return err
}

// New prepares a runner over the store's engine and migrates River's
// tables. databaseURL is needed on PostgreSQL, where River uses its own pgx
// pool.
func New(ctx context.Context, st *store.Store, databaseURL string, run Run, cfg Config) (*Runner, error) {
	if cfg.JobTimeout == 0 {
		cfg.JobTimeout = 2 * time.Minute
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = cfg.JobTimeout + time.Minute
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 10
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	r := &Runner{store: st, run: run, cfg: cfg, owner: auth.ID("run")}
	workers := river.NewWorkers()
	river.AddWorker(workers, &worker{r: r})
	rc := &river.Config{
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 8}},
		Workers:              workers,
		FetchCooldown:        10 * time.Millisecond,
		FetchPollInterval:    50 * time.Millisecond,
		JobTimeout:           cfg.JobTimeout,
		RescueStuckJobsAfter: cfg.JobTimeout + time.Minute,
		MaxAttempts:          cfg.MaxAttempts,
		Logger:               cfg.Log.With("component", "river"),
	}
	switch st.Engine() {
	case store.SQLite:
		if err := setup[*sql.Tx](ctx, r, riversqlite.New(st.DB()), rc); err != nil {
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
	return nil
}

// Enqueue schedules a run of a task.
func (r *Runner) Enqueue(ctx context.Context, taskID string) error {
	return r.insert(context.WithoutCancel(ctx), Args{TaskID: taskID})
}

// Start begins working jobs, after re-enqueueing every unfinished task: a
// task whose job was lost, or whose process died mid-run, resumes here.
func (r *Runner) Start(ctx context.Context) error {
	if r.store.Engine() == store.SQLite {
		// An embedded server is the only runner on its database, so any
		// lease left behind belongs to a process that is gone.
		if err := r.store.ClearTaskLeases(ctx); err != nil {
			return err
		}
	}
	if err := r.start(ctx); err != nil {
		return err
	}
	tasks, err := r.store.UnfinishedTasks(ctx)
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
	return errors.Join(errs...)
}

// Stop waits for running jobs to finish, up to ctx's deadline.
func (r *Runner) Stop(ctx context.Context) error {
	err := r.stop(ctx)
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
