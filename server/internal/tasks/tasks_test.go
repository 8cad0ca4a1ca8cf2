package tasks

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pierhq/pier/server/internal/store"
)

// newStore opens an embedded store with one organisation and returns a
// function that records a queued task in it.
func newStore(t *testing.T) (*store.Store, func(id string)) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	if _, err := st.Accounts().CreateOrganization(ctx, "org_test", "test", now); err != nil {
		t.Fatal(err)
	}
	return st, func(id string) {
		t.Helper()
		err := st.InTx(ctx, func(tx *store.Tx) error {
			return tx.Tasks().Insert(ctx, store.Task{ID: id, OrgID: "org_test", Kind: "launch", State: "queued", Steps: "[]", CreatedAt: now, UpdatedAt: now})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// recorder is a Run that records the tasks it ran and fails a task as
// often as told first.
type recorder struct {
	mu    sync.Mutex
	ran   map[string]int
	fails map[string]int
	ch    chan string
}

func newRecorder() *recorder {
	return &recorder{ran: map[string]int{}, fails: map[string]int{}, ch: make(chan string, 16)}
}

func (r *recorder) run(_ context.Context, id string) error {
	r.mu.Lock()
	r.ran[id]++
	fail := r.fails[id] > 0
	if fail {
		r.fails[id]--
	}
	r.mu.Unlock()
	if fail {
		return errors.New("transient")
	}
	r.ch <- id
	return nil
}

func (r *recorder) wait(t *testing.T, id string) {
	t.Helper()
	select {
	case got := <-r.ch:
		if got != id {
			t.Fatalf("ran %s, want %s", got, id)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("task %s never ran", id)
	}
}

func newRunner(t *testing.T, st *store.Store, run Run, idle time.Duration) *Runner {
	t.Helper()
	ctx := context.Background()
	r, err := New(ctx, st, "", run, Config{IdleAfter: idle, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(context.Background()) })
	return r
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEmbeddedRunnerSleepsWhenIdle: on SQLite River runs only while a job
// is unfinished, and an Enqueue wakes it, so an idle server makes no
// wake-ups of its own and a new task still starts at once.
func TestEmbeddedRunnerSleepsWhenIdle(t *testing.T) {
	st, addTask := newStore(t)
	rec := newRecorder()
	r := newRunner(t, st, rec.run, 200*time.Millisecond)
	if r.Running() {
		t.Fatal("River runs with no job at all")
	}

	addTask("tsk_one")
	if err := r.Enqueue(context.Background(), "tsk_one"); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, "tsk_one")
	eventually(t, "River stops once no job is left", func() bool { return !r.Running() })

	// A task enqueued while River sleeps starts it again; one that fails
	// once keeps it running until its retry has run.
	addTask("tsk_two")
	rec.mu.Lock()
	rec.fails["tsk_two"] = 1
	rec.mu.Unlock()
	if err := r.Enqueue(context.Background(), "tsk_two"); err != nil {
		t.Fatal(err)
	}
	if !r.Running() {
		t.Fatal("Enqueue did not wake River")
	}
	rec.wait(t, "tsk_two")
	rec.mu.Lock()
	if rec.ran["tsk_two"] != 2 {
		t.Errorf("tsk_two ran %d times, want 2 (a failure, then its retry)", rec.ran["tsk_two"])
	}
	rec.mu.Unlock()
	eventually(t, "River stops after the retry", func() bool { return !r.Running() })
}

// TestRunnerResumesUnfinishedTasks: a task left queued by a process that
// died is run after the next Start, without a new Enqueue from anyone.
func TestRunnerResumesUnfinishedTasks(t *testing.T) {
	st, addTask := newStore(t)
	addTask("tsk_left")
	rec := newRecorder()
	newRunner(t, st, rec.run, time.Second)
	rec.wait(t, "tsk_left")
}

// The retry policy docs/architecture.md states: 1 s, doubling, capped at a
// minute, and 10 attempts by default.
func TestRetryBackoff(t *testing.T) {
	b := backoff{base: DefaultRetryBackoff, max: DefaultMaxRetryBackoff}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute, time.Minute}
	for errs, w := range want {
		if got := b.delay(errs); got != w {
			t.Errorf("after %d earlier errors: %s, want %s", errs, got, w)
		}
	}
	if got := b.delay(1000); got != time.Minute {
		t.Errorf("after many errors: %s", got)
	}
	st, _ := newStore(t)
	r, err := New(context.Background(), st, "", newRecorder().run, Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if r.cfg.MaxAttempts != 10 {
		t.Errorf("default attempts %d, want 10", r.cfg.MaxAttempts)
	}
}

// A task that keeps failing runs MaxAttempts times and is then given up,
// once.
func TestRunnerGivesUpAfterMaxAttempts(t *testing.T) {
	st, addTask := newStore(t)
	rec := newRecorder()
	gaveUp := make(chan string, 4)
	ctx := context.Background()
	r, err := New(ctx, st, "", rec.run, Config{MaxAttempts: 3, RetryBackoff: time.Millisecond, MaxRetryBackoff: 5 * time.Millisecond,
		FetchPoll: 20 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnGiveUp: func(_ context.Context, id string, _ error) { gaveUp <- id }})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(context.Background()) })
	addTask("tsk_bad")
	rec.mu.Lock()
	rec.fails["tsk_bad"] = 1000
	rec.mu.Unlock()
	if err := r.Enqueue(ctx, "tsk_bad"); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-gaveUp:
		if id != "tsk_bad" {
			t.Fatalf("gave up on %s", id)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("never gave up")
	}
	time.Sleep(200 * time.Millisecond)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.ran["tsk_bad"] != 3 || len(gaveUp) != 0 {
		t.Fatalf("ran %d times and gave up %d more times, want 3 runs and one give-up", rec.ran["tsk_bad"], len(gaveUp))
	}
}

// River's INFO chatter is dropped unless the server logs at debug; its
// warnings always show.
func TestRiverLogsWarnUnlessDebug(t *testing.T) {
	for _, c := range []struct {
		level    slog.Level
		wantInfo bool
	}{{slog.LevelInfo, false}, {slog.LevelDebug, true}} {
		var buf bytes.Buffer
		log := RiverLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: c.level})))
		log.Info("River client started")
		log.Warn("something to see")
		out := buf.String()
		if strings.Contains(out, "River client started") != c.wantInfo || !strings.Contains(out, "something to see") || !strings.Contains(out, "component=river") {
			t.Errorf("at %v:\n%s", c.level, out)
		}
	}
}

// TestRunningTaskRenewsItsLease: a run longer than its lease keeps it,
// renewed every third of LeaseTTL, so no other runner may take the task
// while its runner lives; once the run ends the lease is given up.
func TestRunningTaskRenewsItsLease(t *testing.T) {
	st, insert := newStore(t)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	release, running := make(chan struct{}), make(chan struct{})
	run := func(ctx context.Context, id string) error {
		close(running)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	r, err := New(ctx, st, "", run, Config{LeaseTTL: ttl, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(context.Background()) })
	insert("task_long")
	if err := r.Enqueue(ctx, "task_long"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-running:
	case <-time.After(30 * time.Second):
		t.Fatal("the task never ran")
	}
	for range 4 {
		time.Sleep(ttl)
		if ok, err := st.Tasks().AcquireLease(ctx, "task_long", "another", time.Now(), ttl); err != nil || ok {
			t.Fatalf("another runner took the lease of a running task (ok %v, err %v)", ok, err)
		}
	}
	close(release)
	eventually(t, "the lease given up", func() bool {
		ok, _ := st.Tasks().AcquireLease(ctx, "task_long", "another", time.Now(), ttl)
		return ok
	})
}

// TestStopWhileAJobEnqueues: a job that enqueues another task while the
// runner stops (a workflow's launch step at shutdown) does not wait for
// the stop, and the stop does not wait out its deadline for the job.
func TestStopWhileAJobEnqueues(t *testing.T) {
	st, addTask := newStore(t)
	addTask("tsk_parent")
	addTask("tsk_child")
	var r *Runner
	started, enqueued := make(chan struct{}), make(chan error, 1)
	run := func(ctx context.Context, id string) error {
		if id != "tsk_parent" {
			return nil
		}
		close(started)
		time.Sleep(300 * time.Millisecond) // Stop is under way
		enqueued <- r.Enqueue(ctx, "tsk_child")
		return nil
	}
	ctx := context.Background()
	r, err := New(ctx, st, "", run, Config{IdleAfter: time.Minute, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-started
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	began := time.Now()
	if err := r.Stop(sctx); err != nil || time.Since(began) > 3*time.Second {
		t.Fatalf("Stop took %v: %v", time.Since(began), err)
	}
	if err := <-enqueued; err != nil {
		t.Fatalf("the job's Enqueue: %v", err)
	}
}
