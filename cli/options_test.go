package cli

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// The hand-written holder, verify, ledger, mail and workflow commands,
// tested through runF: what the flags, arguments and environment say reaches the options,
// and a usage error never reaches runF.

func TestHolderKeygenOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want HolderKeygenOptions
	}{
		{[]string{"--key", "holder.jwk"}, HolderKeygenOptions{Key: "holder.jwk"}},
		{[]string{"--key", "holder.jwk", "--json"}, HolderKeygenOptions{Key: "holder.jwk", JSON: true}},
	} {
		f, ts := newTestFactory(nil)
		var got *HolderKeygenOptions
		if code := runWith(t, f, NewCmdHolderKeygen(f, func(o *HolderKeygenOptions) error { got = o; return nil }), c.args...); code != ExitOK {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.err)
		}
		if got.IO != f.IO {
			t.Errorf("%v: the options do not carry the factory's streams", c.args)
		}
		got.IO = nil
		if !reflect.DeepEqual(*got, c.want) {
			t.Errorf("%v: %+v, want %+v", c.args, *got, c.want)
		}
	}
	f, _ := newTestFactory(nil)
	called := false
	if code := runWith(t, f, NewCmdHolderKeygen(f, func(*HolderKeygenOptions) error { called = true; return nil })); code != ExitUsage || called {
		t.Errorf("keygen without --key: exit %d, runF called %v", code, called)
	}
}

func TestHolderMandateOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want HolderMandateOptions
	}{
		{[]string{"--session", "sbs_1", "--key", "holder.jwk", "--registration-secret", "sbr_1"}, nil,
			HolderMandateOptions{Session: "sbs_1", Key: "holder.jwk", Registration: "sbr_1"}},
		{[]string{"--session", "sbs_1", "--key", "holder.jwk", "--issuer-kid", "kid_1", "--json"}, map[string]string{"PIER_SANDBOX_REGISTRATION_SECRET": " sbr_env\n"},
			HolderMandateOptions{Session: "sbs_1", Key: "holder.jwk", Registration: "sbr_env", IssuerKID: "kid_1", JSON: true}},
		{[]string{"--session", "sbs_1", "--key", "holder.jwk", "--registration-secret", "sbr_flag"}, map[string]string{"PIER_SANDBOX_REGISTRATION_SECRET": "sbr_env"},
			HolderMandateOptions{Session: "sbs_1", Key: "holder.jwk", Registration: "sbr_flag"}},
		// Printing a mandate without registering it needs no secret.
		{[]string{"--session", "sbs_1", "--key", "holder.jwk", "--no-post"}, nil,
			HolderMandateOptions{Session: "sbs_1", Key: "holder.jwk", NoPost: true}},
	} {
		f, ts := newTestFactory(c.env)
		var got *HolderMandateOptions
		if code := runWith(t, f, NewCmdHolderMandate(f, func(o *HolderMandateOptions) error { got = o; return nil }), c.args...); code != ExitOK {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.err)
		}
		if got.IO != f.IO || got.Factory != f {
			t.Errorf("%v: the options do not carry the factory", c.args)
		}
		got.IO, got.Factory = nil, nil
		if !reflect.DeepEqual(*got, c.want) {
			t.Errorf("%v: %+v, want %+v", c.args, *got, c.want)
		}
	}
	for _, args := range [][]string{
		{"--key", "holder.jwk", "--registration-secret", "sbr_1"},
		{"--session", "sbs_1", "--registration-secret", "sbr_1"},
		{"--session", "sbs_1", "--key", "holder.jwk"},
	} {
		f, _ := newTestFactory(nil)
		called := false
		if code := runWith(t, f, NewCmdHolderMandate(f, func(*HolderMandateOptions) error { called = true; return nil }), args...); code != ExitUsage || called {
			t.Errorf("%v: exit %d, runF called %v", args, code, called)
		}
	}
}

func TestHolderDecideOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want HolderDecideOptions
	}{
		{[]string{"--key", "holder.jwk", "--gate-file", "attempt.json"}, HolderDecideOptions{Key: "holder.jwk", GateFile: "attempt.json"}},
		{[]string{"--key", "holder.jwk", "--gate-file", "-", "--deny", "--no-post", "--json"}, HolderDecideOptions{Key: "holder.jwk", GateFile: "-", Deny: true, NoPost: true, JSON: true}},
		{[]string{"--key", "holder.jwk", "--session", "sbs_1", "--gate", `{"id":"sbg_1"}`}, HolderDecideOptions{Key: "holder.jwk", Session: "sbs_1", Gate: `{"id":"sbg_1"}`}},
	} {
		f, ts := newTestFactory(nil)
		var got *HolderDecideOptions
		if code := runWith(t, f, NewCmdHolderDecide(f, func(o *HolderDecideOptions) error { got = o; return nil }), c.args...); code != ExitOK {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.err)
		}
		if got.IO != f.IO || got.Factory != f {
			t.Errorf("%v: the options do not carry the factory", c.args)
		}
		got.IO, got.Factory = nil, nil
		if !reflect.DeepEqual(*got, c.want) {
			t.Errorf("%v: %+v, want %+v", c.args, *got, c.want)
		}
	}
	for _, args := range [][]string{
		{"--gate-file", "attempt.json"},
		{"--key", "holder.jwk"},
		{"--key", "holder.jwk", "--gate", "{}", "--gate-file", "attempt.json"},
	} {
		f, _ := newTestFactory(nil)
		called := false
		if code := runWith(t, f, NewCmdHolderDecide(f, func(*HolderDecideOptions) error { called = true; return nil }), args...); code != ExitUsage || called {
			t.Errorf("%v: exit %d, runF called %v", args, code, called)
		}
	}
}

func TestVerifySandboxProofOptions(t *testing.T) {
	for _, c := range []struct {
		args    []string
		env     map[string]string
		want    VerifyOptions
		baseURL string
	}{
		{nil, nil, VerifyOptions{}, DefaultBaseURL},
		{[]string{"--base-url", "https://pier.example", "--api-url", "https://api.pier.example", "--tamper-check", "--json"}, nil,
			VerifyOptions{APIURL: "https://api.pier.example", TamperCheck: true, JSON: true}, "https://pier.example"},
		{[]string{"--tamper-check"}, map[string]string{"PIER_BASE_URL": "http://127.0.0.1:9090"},
			VerifyOptions{TamperCheck: true}, "http://127.0.0.1:9090"},
	} {
		f, ts := newTestFactory(c.env)
		var got *VerifyOptions
		if code := runWith(t, f, NewCmdVerifySandboxProof(f, func(o *VerifyOptions) error { got = o; return nil }), c.args...); code != ExitOK {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.err)
		}
		if got.IO != f.IO || got.Factory != f {
			t.Fatalf("%v: the options do not carry the factory", c.args)
		}
		if base := got.Factory.BaseURL(); base != c.baseURL {
			t.Errorf("%v: base URL %q, want %q", c.args, base, c.baseURL)
		}
		got.IO, got.Factory = nil, nil
		if !reflect.DeepEqual(*got, c.want) {
			t.Errorf("%v: %+v, want %+v", c.args, *got, c.want)
		}
	}
	f, _ := newTestFactory(nil)
	called := false
	if code := runWith(t, f, NewCmdVerifySandboxProof(f, func(*VerifyOptions) error { called = true; return nil }), "proof.json"); code != ExitUsage || called {
		t.Errorf("an argument: exit %d, runF called %v", code, called)
	}
}

func TestLedgerVerifyOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want LedgerVerifyOptions
	}{
		{[]string{"ledger.jsonl"}, LedgerVerifyOptions{File: "ledger.jsonl"}},
		{[]string{"-", "--partial", "--json"}, LedgerVerifyOptions{File: "-", Partial: true, JSON: true}},
	} {
		f, ts := newTestFactory(nil)
		var got *LedgerVerifyOptions
		if code := runWith(t, f, NewCmdLedgerVerify(f, func(o *LedgerVerifyOptions) error { got = o; return nil }), c.args...); code != ExitOK {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.err)
		}
		if got.IO != f.IO {
			t.Errorf("%v: the options do not carry the factory's streams", c.args)
		}
		got.IO = nil
		if !reflect.DeepEqual(*got, c.want) {
			t.Errorf("%v: %+v, want %+v", c.args, *got, c.want)
		}
	}
	for _, args := range [][]string{nil, {"a.jsonl", "b.jsonl"}} {
		f, _ := newTestFactory(nil)
		called := false
		if code := runWith(t, f, NewCmdLedgerVerify(f, func(*LedgerVerifyOptions) error { called = true; return nil }), args...); code != ExitUsage || called {
			t.Errorf("%v: exit %d, runF called %v", args, code, called)
		}
	}
}

func TestLedgerExportOptions(t *testing.T) {
	for _, c := range []struct {
		args     []string
		out      string
		pageSize int
	}{
		{[]string{"--out", "ledger.jsonl"}, "ledger.jsonl", 1000},
		{[]string{"-o", "-", "--page-size", "50"}, "-", 50},
	} {
		f, ts := newTestFactory(nil)
		var got *LedgerExportOptions
		if code := runWith(t, f, NewCmdLedgerExport(f, func(o *LedgerExportOptions) error { got = o; return nil }), c.args...); code != ExitOK {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.err)
		}
		if got.IO != f.IO || got.Out != c.out || got.PageSize != c.pageSize || got.Fetch == nil {
			t.Errorf("%v: %+v, want out %q, page size %d and a fetch", c.args, *got, c.out, c.pageSize)
		}
	}
	for _, args := range [][]string{nil, {"--out", "x", "--page-size", "0"}, {"--out", "x", "--page-size", "1001"}} {
		f, _ := newTestFactory(nil)
		called := false
		if code := runWith(t, f, NewCmdLedgerExport(f, func(*LedgerExportOptions) error { called = true; return nil }), args...); code != ExitUsage || called {
			t.Errorf("%v: exit %d, runF called %v", args, code, called)
		}
	}

	// The fetch handed to runF pages GET /v1/ledger at the base URL, with
	// the API key.
	var gotPath, gotQuery, gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotQuery, gotAuth = r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization")
		writeEnvelope(w, 200, `{"actions":[{"kind":"stop","reason":"done"}],"data":{"entries":[]},"formatVersion":"1"}`)
	}))
	defer srv.Close()
	f, ts := newTestFactory(map[string]string{"PIER_BASE_URL": srv.URL, "PIER_API_KEY": "agk_test"})
	var got *LedgerExportOptions
	if code := runWith(t, f, NewCmdLedgerExport(f, func(o *LedgerExportOptions) error { got = o; return nil }), "--out", "-"); code != ExitOK {
		t.Fatalf("exit %d %s", code, ts.err)
	}
	if _, err := got.Fetch(context.Background(), 4, 10); err != nil {
		t.Fatal(err)
	}
	if gotPath != "/v1/ledger" || gotQuery != "after=4&limit=10" || gotAuth != "Bearer agk_test" {
		t.Errorf("fetch sent %s?%s with %q", gotPath, gotQuery, gotAuth)
	}
}

func TestMailWaitOptions(t *testing.T) {
	since := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		args []string
		want MailWaitOptions
	}{
		{[]string{"--to", "agent@acme.dev", "--subject", "verify", "--from", "noreply@service.example", "--since", "2026-11-25T10:00:00Z", "--timeout", "30s"},
			MailWaitOptions{To: "agent@acme.dev", Subject: "verify", From: "noreply@service.example", Since: since, Wait: 30 * time.Second}},
		{[]string{"--to", "agent@acme.dev", "--since", "2026-11-25T10:00:00Z"},
			MailWaitOptions{To: "agent@acme.dev", Since: since, Wait: 60 * time.Second}},
	} {
		f, ts := newTestFactory(nil)
		var got *MailWaitOptions
		if code := runWith(t, f, NewCmdMailWait(f, func(o *MailWaitOptions) error { got = o; return nil }), c.args...); code != ExitOK {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.err)
		}
		if got.Factory != f {
			t.Errorf("%v: the options do not carry the factory", c.args)
		}
		got.Factory = nil
		if !reflect.DeepEqual(*got, c.want) {
			t.Errorf("%v: %+v, want %+v", c.args, *got, c.want)
		}
	}
	// Without --since, messages count from about now.
	f, _ := newTestFactory(nil)
	var got *MailWaitOptions
	before := time.Now()
	if code := runWith(t, f, NewCmdMailWait(f, func(o *MailWaitOptions) error { got = o; return nil }), "--to", "agent@acme.dev"); code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	if got.Since.After(before) || before.Sub(got.Since) > time.Minute {
		t.Errorf("default since %s, want just before %s", got.Since, before)
	}
	for _, args := range [][]string{nil, {"--to", "agent@acme.dev", "--since", "yesterday"}} {
		f, _ := newTestFactory(nil)
		called := false
		if code := runWith(t, f, NewCmdMailWait(f, func(*MailWaitOptions) error { called = true; return nil }), args...); code != ExitUsage || called {
			t.Errorf("%v: exit %d, runF called %v", args, code, called)
		}
	}
}

func TestWorkflowOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want WorkflowPrepareOptions
	}{
		{[]string{"plan.yaml"}, nil, WorkflowPrepareOptions{File: "plan.yaml"}},
		{[]string{"plan.yaml"}, map[string]string{"PIER_PROJECT": "prj_env"}, WorkflowPrepareOptions{File: "plan.yaml", Project: "prj_env"}},
		{[]string{"plan.yaml", "--project", "prj_1"}, map[string]string{"PIER_PROJECT": "prj_env"}, WorkflowPrepareOptions{File: "plan.yaml", Project: "prj_1"}},
	} {
		f, ts := newTestFactory(c.env)
		var got *WorkflowPrepareOptions
		if code := runWith(t, f, NewCmdWorkflowPrepare(f, func(o *WorkflowPrepareOptions) error { got = o; return nil }), c.args...); code != ExitOK {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.err)
		}
		got.Factory = nil
		if !reflect.DeepEqual(*got, c.want) {
			t.Errorf("prepare %v: %+v, want %+v", c.args, *got, c.want)
		}
	}
	f, ts := newTestFactory(nil)
	var verify *WorkflowVerifyOptions
	if code := runWith(t, f, NewCmdWorkflowVerify(f, func(o *WorkflowVerifyOptions) error { verify = o; return nil }), "prepared.json", "--jwks", "jwks.json"); code != ExitOK {
		t.Fatalf("verify: exit %d %s", code, ts.err)
	}
	if verify.Factory != f || verify.File != "prepared.json" || verify.JWKS != "jwks.json" {
		t.Errorf("verify: %+v", *verify)
	}
	for _, cmd := range []func(f *Factory) *cobra.Command{
		func(f *Factory) *cobra.Command {
			return NewCmdWorkflowPrepare(f, func(*WorkflowPrepareOptions) error { return errors.New("runF called") })
		},
		func(f *Factory) *cobra.Command {
			return NewCmdWorkflowVerify(f, func(*WorkflowVerifyOptions) error { return errors.New("runF called") })
		},
	} {
		f, _ := newTestFactory(nil)
		if code := runWith(t, f, cmd(f)); code != ExitUsage {
			t.Errorf("%s without a file: exit %d", cmd(f).Name(), code)
		}
	}
}
