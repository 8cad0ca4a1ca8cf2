package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
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
	for code := ExitOK; code <= ExitServiceFailed; code++ {
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

// TestAnonymousOperationsSendNoKey checks that an anonymous operation never
// carries the API key, since holder-authority calls refuse one, and that an
// agent operation does.
func TestAnonymousOperationsSendNoKey(t *testing.T) {
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+r.Header.Get("Idempotency-Key"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"data":{"ok":true},"actions":[{"kind":"stop","reason":"done"}],"formatVersion":"1"}`)
	}))
	defer srv.Close()

	for _, args := range [][]string{
		{"sandbox", "mandates", "register", "ses_1", "--mandate", "jws", "--registration-secret", "sbr_1", "--idempotency-key", "idk_holder"},
		{"tasks", "get", "tsk_1"},
		{"services", "teardown", "svc_1", "--idempotency-key", "idk_fixed"},
	} {
		f, ts := newTestFactory(map[string]string{"PIER_BASE_URL": srv.URL, "PIER_API_KEY": "pk_secret"})
		if code := run(f, args); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, ts.err)
		}
		if !strings.Contains(ts.out.String(), "ok: yes") || !strings.Contains(ts.out.String(), "stop: done") {
			t.Errorf("%v: output %q", args, ts.out)
		}
	}
	want := []string{
		"POST /v1/sandbox/sessions/ses_1/mandate  idk_holder",
		"GET /v1/tasks/tsk_1 Bearer pk_secret ",
		"POST /v1/services/svc_1/teardown Bearer pk_secret idk_fixed",
	}
	if strings.Join(auth, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(auth, "\n"), strings.Join(want, "\n"))
	}
}

// TestOutputModes checks --json prints the body byte for byte, and that
// human output has no ANSI codes off a terminal.
func TestOutputModes(t *testing.T) {
	srv := httptest.NewServer(fakeAPI())
	defer srv.Close()
	env := map[string]string{"PIER_BASE_URL": srv.URL}

	f, ts := newTestFactory(env)
	if code := run(f, []string{"estimate", "--workload", "worker", "--json"}); code != 0 {
		t.Fatalf("exit %d: %s", code, ts.err)
	}
	resp, err := http.Post(srv.URL+"/v1/estimate", "application/json", strings.NewReader(`{"workload":"worker"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var want strings.Builder
	buf := make([]byte, 1<<16)
	for {
		n, err := resp.Body.Read(buf)
		want.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if ts.out.String() != want.String()+"\n" {
		t.Errorf("--json output differs from the body:\n%s\n%s", ts.out, want.String())
	}

	f, ts = newTestFactory(env)
	f.IO.StdoutIsTerminal = func() bool { return false }
	if code := run(f, []string{"estimate", "--workload", "worker"}); code != 0 {
		t.Fatalf("exit %d: %s", code, ts.err)
	}
	if strings.Contains(ts.out.String(), "\x1b[") {
		t.Errorf("ANSI codes in non-terminal output: %q", ts.out)
	}
	if ts.err.Len() != 0 {
		t.Errorf("stderr on success: %q", ts.err)
	}

	// With --json an error envelope goes to stdout too, and exits non-zero.
	f, ts = newTestFactory(env)
	code := run(f, []string{"quotes", "create", "--project-id", "p", "--items", "[]", "--json"})
	if code != ExitBlocked {
		t.Errorf("exit %d, want %d", code, ExitBlocked)
	}
	if !strings.HasPrefix(ts.out.String(), `{"blockedBy":"plan:not_implemented"`) {
		t.Errorf("stdout %q", ts.out)
	}
}
