package sdk

import (
	"context"
	"fmt"
	"time"
)

// InputRequiredError reports a task waiting for a human decision.
type InputRequiredError struct {
	Task        *TaskHandle
	ApprovalURL string
}

func (e *InputRequiredError) Error() string {
	return fmt.Sprintf("task %s needs a human decision: open %s", e.Task.TaskId, e.ApprovalURL)
}

// TaskFailedError reports a task that ended without succeeding.
type TaskFailedError struct {
	Task *TaskHandle
}

func (e *TaskFailedError) Error() string {
	return fmt.Sprintf("task %s ended %s", e.Task.TaskId, e.Task.State)
}

// WaitOptions tunes WaitForTask.
type WaitOptions struct {
	// Interval is the poll interval when the server suggests none (default 1s).
	Interval time.Duration
	// FirstInterval, when set, is the first wait, doubled at each poll up to
	// Interval: a task that ends quickly (a static relaunch takes tens of
	// milliseconds) is seen soon, a long one is not polled faster.
	FirstInterval time.Duration
	// OnProgress, when set, is called with every polled state.
	OnProgress func(*TaskHandle)
}

// WaitForTask polls a task until it succeeds, fails, or needs a human. On
// input_required it returns at once with an *InputRequiredError carrying the
// approval URL; a failed or canceled task yields a *TaskFailedError.
func (c *Client) WaitForTask(ctx context.Context, id string, opts WaitOptions) (*TaskEnvelope, error) {
	interval := opts.Interval
	if interval <= 0 {
		interval = time.Second
	}
	next := interval
	if opts.FirstInterval > 0 && opts.FirstInterval < interval {
		next = opts.FirstInterval
	}
	for {
		env, err := c.GetTask(ctx, id)
		if err != nil {
			return nil, err
		}
		t := &env.Data
		if opts.OnProgress != nil {
			opts.OnProgress(t)
		}
		switch t.State {
		case TaskHandleStateSucceeded:
			return env, nil
		case TaskHandleStateFailed, TaskHandleStateCanceled:
			return env, &TaskFailedError{Task: t}
		case TaskHandleStateInputRequired:
			url := ""
			if t.ApprovalUrl != nil {
				url = *t.ApprovalUrl
			}
			return env, &InputRequiredError{Task: t, ApprovalURL: url}
		}
		wait := next
		next = min(2*next, interval)
		if t.PollAfterSeconds != nil && *t.PollAfterSeconds > 0 {
			wait = time.Duration(*t.PollAfterSeconds) * time.Second
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
}
