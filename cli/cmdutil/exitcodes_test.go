package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pierhq/pier/sdk"
)

func TestExitCode(t *testing.T) {
	api := func(code sdk.BlockedBy, status int) error {
		return &sdk.Error{BlockedBy: code, StatusCode: status, Message: "m"}
	}
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, ExitOK},
		{"plain", errors.New("boom"), ExitError},
		{"usage", &UsageError{Err: errors.New("bad flag")}, ExitUsage},
		{"wrapped usage", fmt.Errorf("x: %w", &UsageError{Err: errors.New("bad")}), ExitUsage},
		{"cobra unknown command", errors.New(`unknown command "x" for "pier"`), ExitUsage},
		{"input required", &ErrInputRequired{ApprovalURL: "https://a"}, ExitInputRequired},
		{"input:invalid", api("input:invalid", 400), ExitUsage},
		{"input:unknown_field", api("input:unknown_field", 400), ExitUsage},
		{"auth:missing_credentials", api("auth:missing_credentials", 401), ExitAuth},
		{"auth:insufficient_scope", api("auth:insufficient_scope", 403), ExitAuth},
		{"budget:insufficient", api("budget:insufficient", 402), ExitBlocked},
		{"policy:price_ceiling", api("policy:price_ceiling", 403), ExitBlocked},
		{"policy:approval_required", api("policy:approval_required", 403), ExitBlocked},
		{"plan:price_changed", api("plan:price_changed", 409), ExitBlocked},
		{"plan:not_implemented", api("plan:not_implemented", 501), ExitBlocked},
		{"approval:denied", api("approval:denied", 403), ExitBlocked},
		{"approval:pending", api("approval:pending", 409), ExitInputRequired},
		{"not_found:resource", api("not_found:resource", 404), ExitNotFound},
		{"not_found:route", api("not_found:route", 404), ExitNotFound},
		{"rate:limited", api("rate:limited", 429), ExitRateLimited},
		{"idempotency:in_flight", api("idempotency:in_flight", 409), ExitRateLimited},
		{"conflict:state", api("conflict:state", 409), ExitConflict},
		{"idempotency:key_reused", api("idempotency:key_reused", 422), ExitConflict},
		{"plan:no_command", api("plan:no_command", 422), ExitBlocked},
		{"plan:addon_unavailable", api("plan:addon_unavailable", 503), ExitBlocked},
		{"service:unhealthy", api("service:unhealthy", 422), ExitServiceFailed},
		{"service:crashed", api("service:crashed", 409), ExitServiceFailed},
		{"internal:error", api("internal:error", 500), ExitServer},
		{"internal:unavailable", api("internal:unavailable", 503), ExitServer},
		{"unknown namespace 502", api("proxy:bad_gateway", 502), ExitServer},
		{"unknown namespace 418", api("teapot:yes", 418), ExitError},
		{"wrapped api error", fmt.Errorf("call: %w", api("auth:invalid_credentials", 401)), ExitAuth},
		{"connection refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, ExitServer},
		{"timeout", context.DeadlineExceeded, ExitServer},
		{"interrupted", &ErrInterrupted{Err: context.Canceled}, ExitInterrupted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExitCode(tt.err); got != tt.want {
				t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

// TestEveryBlockedByHasACode checks that every code in the contract's
// table maps somewhere other than the generic 1.
func TestEveryBlockedByHasACode(t *testing.T) {
	for _, c := range sdk.BlockedByCodes() {
		info, _ := sdk.LookupBlockedBy(c)
		if got := ExitCode(&sdk.Error{BlockedBy: c, StatusCode: info.Status}); got == ExitError || got == ExitOK {
			t.Errorf("%s maps to %d", c, got)
		}
	}
}

// TestExitCodesDocumented keeps EXIT_CODES.md in step with the constants.
func TestExitCodesDocumented(t *testing.T) {
	doc, err := os.ReadFile("EXIT_CODES.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[int]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\| (\d+) +\|`).FindAllStringSubmatch(string(doc), -1) {
		n, _ := strconv.Atoi(m[1])
		rows[n] = true
	}
	for code := ExitOK; code <= ExitInterrupted; code++ {
		if code > ExitServiceFailed && code < ExitInterrupted {
			continue
		}
		if !rows[code] {
			t.Errorf("EXIT_CODES.md has no row for %d", code)
		}
	}
	for _, c := range sdk.BlockedByCodes() {
		ns := c.Namespace()
		if !strings.Contains(string(doc), "`"+ns+":") {
			t.Errorf("EXIT_CODES.md does not mention the %s: namespace", ns)
		}
	}
}
