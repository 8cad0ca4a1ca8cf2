package cmdutil

import (
	"context"
	"errors"
)

// ErrInterrupted says that the person pressed Ctrl-C (SIGINT) before the
// command finished. It exits with ExitInterrupted, and its message says
// what the server already holds and how to go on, never that the server
// is unreachable.
type ErrInterrupted struct {
	// Err is what the command was doing when it stopped.
	Err error
	// Next says what the server holds and the command that goes on from
	// there, such as following a task that keeps running; empty for the
	// general advice.
	Next string
}

func (e *ErrInterrupted) Error() string {
	if e.Err == nil {
		return "interrupted"
	}
	return "interrupted: " + e.Err.Error()
}

func (e *ErrInterrupted) Unwrap() error { return e.Err }

// interruptedNext is the advice of an interruption that names nothing
// more precise: what the server accepted stays, and nothing half-made
// counts.
const interruptedNext = "What the server accepted before the interruption stays, and nothing half-sent is kept: " +
	"run the command again to go on (an upload resumes where it stopped; a task keeps running, and pier tasks list shows it)."

// Interrupted turns err into an ErrInterrupted saying next when ctx ended
// because the person pressed Ctrl-C, and returns err unchanged otherwise
// (a --timeout that ran out is not an interruption).
func Interrupted(ctx context.Context, err error, next string) error {
	if err == nil || !errors.Is(ctx.Err(), context.Canceled) {
		return err
	}
	var done *ErrInterrupted
	if errors.As(err, &done) {
		return err
	}
	return &ErrInterrupted{Err: err, Next: next}
}
