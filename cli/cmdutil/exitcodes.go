package cmdutil

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"strings"
	"syscall"

	"github.com/pierhq/pier/sdk"
)

// Exit codes. Main maps every error to one of these in ExitCode, and
// EXIT_CODES.md documents the same table for the README.
//
//	code  meaning                       causes
//	0     success
//	1     error                         anything not listed below
//	2     usage                         bad flags or arguments; input:* from the server
//	3     auth                          auth:*
//	4     blocked                       budget:*, policy:*, price:*, plan:*, approval:denied
//	5     input required                approval:pending; ErrInputRequired (a task needs a human)
//	6     not found                     not_found:*
//	7     rate limited                  rate:*, idempotency:in_flight (retries exhausted)
//	8     conflict                      conflict:*, idempotency:key_reused
//	9     server or network             internal:*, unknown 5xx, connection failures, timeouts
//	10    service failed                service:* (a version never became healthy, a crash loop)
//	130   interrupted                   Ctrl-C (SIGINT) before the command finished, as shells count 128+2
const (
	ExitOK            = 0
	ExitError         = 1
	ExitUsage         = 2
	ExitAuth          = 3
	ExitBlocked       = 4
	ExitInputRequired = 5
	ExitNotFound      = 6
	ExitRateLimited   = 7
	ExitConflict      = 8
	ExitServer        = 9
	ExitServiceFailed = 10
	ExitInterrupted   = 130
)

// ExitCodesDoc is EXIT_CODES.md, the table above as the README and
// `pier help exit-codes` show it.
//
//go:embed EXIT_CODES.md
var ExitCodesDoc string

// UsageError is a mistake in how the command was called: a bad flag, a
// missing argument or an invalid value. It exits with ExitUsage.
type UsageError struct {
	Err error
	// Command is the command path, such as "pier estimate", used to point
	// at its help.
	Command string
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// UsageErrorf is a usage error of the command at path cmd.
func UsageErrorf(cmd string, format string, a ...any) *UsageError {
	return &UsageError{Err: fmt.Errorf(format, a...), Command: cmd}
}

// ErrInputRequired says that work stopped because a human must act, such
// as approving a charge at ApprovalURL. It exits with ExitInputRequired.
type ErrInputRequired struct {
	// ApprovalURL is the page the human opens.
	ApprovalURL string
	// TaskID is the task waiting for the human, when there is one.
	TaskID string
	// Message says what is awaited.
	Message string
}

func (e *ErrInputRequired) Error() string {
	msg := e.Message
	if msg == "" {
		msg = "a human must act before this can continue"
	}
	if e.ApprovalURL != "" {
		msg += ": open " + e.ApprovalURL
	}
	return msg
}

// ExitCode maps an error to the process exit code. It is the only place
// that does so.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var apiErr *sdk.Error
	var usage *UsageError
	var input *ErrInputRequired
	var failed *sdk.TaskFailedError
	var interrupted *ErrInterrupted
	switch {
	case errors.As(err, &interrupted):
		return ExitInterrupted
	case errors.As(err, &input):
		return ExitInputRequired
	case errors.As(err, &failed):
		// A failed task exits as its typed cause would: name taken or
		// policy 4, conflict 8, a provider that kept failing 9, a service
		// that never became healthy 10.
		if failed.Task != nil && failed.Task.Result != nil {
			if code, ok := (*failed.Task.Result)["blockedBy"].(string); ok && code != "" {
				return exitCodeForAPIError(&sdk.Error{BlockedBy: sdk.BlockedBy(code)})
			}
		}
		return ExitError
	case errors.As(err, &usage):
		return ExitUsage
	case errors.As(err, &apiErr):
		return exitCodeForAPIError(apiErr)
	case isNetworkError(err):
		return ExitServer
	case isCobraUsage(err):
		return ExitUsage
	}
	return ExitError
}

// exitCodeForAPIError reads the blockedBy namespace, and the HTTP status
// for namespaces the table does not know.
func exitCodeForAPIError(e *sdk.Error) int {
	switch e.BlockedBy {
	case "approval:pending":
		return ExitInputRequired
	case "approval:denied":
		return ExitBlocked
	case "idempotency:in_flight":
		return ExitRateLimited
	case "idempotency:key_reused":
		return ExitConflict
	case "mail:no_message":
		return ExitNotFound
	}
	switch e.BlockedBy.Namespace() {
	case "input":
		return ExitUsage
	case "auth":
		return ExitAuth
	case "budget", "policy", "price", "plan", "approval", "quota", "mail":
		return ExitBlocked
	case "not_found":
		return ExitNotFound
	case "rate":
		return ExitRateLimited
	case "conflict", "idempotency":
		return ExitConflict
	case "internal", "provider":
		return ExitServer
	case "service":
		return ExitServiceFailed
	}
	switch {
	case e.StatusCode == 401 || e.StatusCode == 403:
		return ExitAuth
	case e.StatusCode == 404:
		return ExitNotFound
	case e.StatusCode == 409:
		return ExitConflict
	case e.StatusCode == 429:
		return ExitRateLimited
	case e.StatusCode >= 500:
		return ExitServer
	}
	return ExitError
}

func isNetworkError(err error) bool {
	// A file error carries a syscall.Errno, which satisfies net.Error too.
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var urlErr *url.Error
	return errors.As(err, &urlErr)
}

// isCobraUsage recognises the usage errors cobra returns as plain errors.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command ", "unknown flag", "unknown shorthand flag", "flag needs an argument", "invalid argument ", "required flag", "accepts ", "requires at least", "bad flag syntax"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
