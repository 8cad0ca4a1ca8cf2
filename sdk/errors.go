package sdk

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Error is a typed error envelope returned by the API.
type Error struct {
	StatusCode int
	BlockedBy  BlockedBy
	Message    string
	Retryable  bool
	Actions    []Action
	Details    []FieldProblem
	// RetryAfterSeconds is the Retry-After header, when sent.
	RetryAfterSeconds int
	// Body is the raw response body.
	Body []byte
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (HTTP %d)", e.BlockedBy, e.Message, e.StatusCode)
}

// errorFromResponse builds an *Error from a non-success response. A body that
// is not an error envelope still yields an *Error, with a blockedBy guessed
// from the status through the shared table.
func errorFromResponse(resp *http.Response, body []byte) error {
	if resp == nil {
		return &Error{BlockedBy: "internal:error", Message: "no response", Retryable: true}
	}
	e := &Error{StatusCode: resp.StatusCode, Body: body}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		fmt.Sscanf(ra, "%d", &e.RetryAfterSeconds)
	}
	var env ErrorEnvelope
	if err := json.Unmarshal(body, &env); err == nil && env.BlockedBy != "" {
		e.BlockedBy = env.BlockedBy
		e.Message = env.Message
		e.Retryable = env.Retryable
		e.Actions = env.Actions
		if env.Details != nil {
			e.Details = *env.Details
		}
		return e
	}
	e.BlockedBy = blockedByForStatus(resp.StatusCode)
	e.Message = strings.TrimSpace(string(body))
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	info, _ := LookupBlockedBy(e.BlockedBy)
	e.Retryable = info.Retryable
	return e
}

// blockedByForStatus reads the shared table in reverse, for responses that
// did not come from Pier (a proxy's 502, say).
func blockedByForStatus(status int) BlockedBy {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate:limited"
	case status == http.StatusNotFound:
		return "not_found:route"
	case status == http.StatusUnauthorized:
		return "auth:invalid_credentials"
	case status >= 500 && status != http.StatusNotImplemented:
		return "internal:unavailable"
	case status == http.StatusNotImplemented:
		return "plan:not_implemented"
	}
	return "input:invalid"
}

func readAll(r io.Reader) []byte {
	b, _ := io.ReadAll(io.LimitReader(r, 16<<20))
	return b
}
