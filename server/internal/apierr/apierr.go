// Package apierr is the domain error: a blockedBy code, a message for people,
// and the typed actions that say what to do next. Adapters (REST, MCP) turn it
// into the error envelope; the status comes from the contract's shared table.
package apierr

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/pierhq/pier/models"
)

// Code is a blockedBy cause: what a refusal, a quote's denial or a
// failed step names as why.
type Code = models.BlockedBy

// Error is a failure with a blockedBy cause.
type Error struct {
	Code    Code
	Message string
	Actions []models.Action
	Details []models.FieldProblem
	// RetryAfterSeconds is sent as Retry-After when positive.
	RetryAfterSeconds int
	// Header holds extra response headers, such as Allow or RateLimit.
	Header http.Header
	// Cause is logged, never shown.
	Cause error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Cause)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Cause }

// Status is the HTTP status the contract assigns to the code.
func (e *Error) Status() int {
	if info, ok := models.LookupBlockedBy(e.Code); ok {
		return info.Status
	}
	return http.StatusInternalServerError
}

// Retryable is the contract's retryability for the code.
func (e *Error) Retryable() bool {
	info, _ := models.LookupBlockedBy(e.Code)
	return info.Retryable
}

// New returns an error with a code, a message and the way forward.
func New(code models.BlockedBy, msg string, actions ...models.Action) *Error {
	return &Error{Code: code, Message: msg, Actions: actions}
}

// Newf is New with formatting and no actions; add them with WithActions.
func Newf(code models.BlockedBy, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithActions sets the actions and returns e.
func (e *Error) WithActions(a ...models.Action) *Error {
	e.Actions = a
	return e
}

// WithDetails adds field problems and returns e.
func (e *Error) WithDetails(d ...models.FieldProblem) *Error {
	e.Details = append(e.Details, d...)
	return e
}

// WithField adds the problem with one field of the request and returns e.
func (e *Error) WithField(field, problem string) *Error {
	return e.WithDetails(models.FieldProblem{Field: field, Problem: problem})
}

// Internal wraps an unexpected error; its cause is logged but never shown.
func Internal(cause error) *Error {
	return &Error{Code: "internal:error", Message: "an unexpected error occurred; retry, with the same Idempotency-Key when the operation takes one", Cause: cause}
}

// As finds an *Error in err's chain, wrapping anything else as internal.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Internal(err)
}
