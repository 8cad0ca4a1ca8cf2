package holder

import (
	"reflect"
	"testing"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
)

func TestHolderKeygenOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want HolderKeygenOptions
	}{
		{[]string{"--key", "holder.jwk"}, HolderKeygenOptions{Key: "holder.jwk"}},
		{[]string{"--key", "holder.jwk", "--json"}, HolderKeygenOptions{Key: "holder.jwk", JSON: true}},
	} {
		f, ts := clitest.NewFactory(nil)
		var got *HolderKeygenOptions
		if code := clitest.RunWith(t, f, NewCmdHolderKeygen(f, func(o *HolderKeygenOptions) error { got = o; return nil }), c.args...); code != cmdutil.ExitOK {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.Err)
		}
		if got.IO != f.IO {
			t.Errorf("%v: the options do not carry the factory's streams", c.args)
		}
		got.IO = nil
		if !reflect.DeepEqual(*got, c.want) {
			t.Errorf("%v: %+v, want %+v", c.args, *got, c.want)
		}
	}
	f, _ := clitest.NewFactory(nil)
	called := false
	if code := clitest.RunWith(t, f, NewCmdHolderKeygen(f, func(*HolderKeygenOptions) error { called = true; return nil })); code != cmdutil.ExitUsage || called {
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
			HolderMandateOptions{HolderCall: HolderCall{Session: "sbs_1", Key: "holder.jwk"}, Registration: "sbr_1"}},
		{[]string{"--session", "sbs_1", "--key", "holder.jwk", "--issuer-kid", "kid_1", "--json"}, map[string]string{"PIER_SANDBOX_REGISTRATION_SECRET": " sbr_env\n"},
			HolderMandateOptions{HolderCall: HolderCall{Session: "sbs_1", Key: "holder.jwk", JSON: true}, Registration: "sbr_env", IssuerKID: "kid_1"}},
		{[]string{"--session", "sbs_1", "--key", "holder.jwk", "--registration-secret", "sbr_flag"}, map[string]string{"PIER_SANDBOX_REGISTRATION_SECRET": "sbr_env"},
			HolderMandateOptions{HolderCall: HolderCall{Session: "sbs_1", Key: "holder.jwk"}, Registration: "sbr_flag"}},
		// Printing a mandate without registering it needs no secret.
		{[]string{"--session", "sbs_1", "--key", "holder.jwk", "--no-post"}, nil,
			HolderMandateOptions{HolderCall: HolderCall{Session: "sbs_1", Key: "holder.jwk", NoPost: true}}},
	} {
		f, ts := clitest.NewFactory(c.env)
		var got *HolderMandateOptions
		if code := clitest.RunWith(t, f, NewCmdHolderMandate(f, func(o *HolderMandateOptions) error { got = o; return nil }), c.args...); code != cmdutil.ExitOK {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.Err)
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
		f, _ := clitest.NewFactory(nil)
		called := false
		if code := clitest.RunWith(t, f, NewCmdHolderMandate(f, func(*HolderMandateOptions) error { called = true; return nil }), args...); code != cmdutil.ExitUsage || called {
			t.Errorf("%v: exit %d, runF called %v", args, code, called)
		}
	}
}

func TestHolderDecideOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want HolderDecideOptions
	}{
		{[]string{"--key", "holder.jwk", "--gate-file", "attempt.json"}, HolderDecideOptions{HolderCall: HolderCall{Key: "holder.jwk"}, GateFile: "attempt.json"}},
		{[]string{"--key", "holder.jwk", "--gate-file", "-", "--deny", "--no-post", "--json"}, HolderDecideOptions{HolderCall: HolderCall{Key: "holder.jwk", NoPost: true, JSON: true}, GateFile: "-", Deny: true}},
		{[]string{"--key", "holder.jwk", "--session", "sbs_1", "--gate", `{"id":"sbg_1"}`}, HolderDecideOptions{HolderCall: HolderCall{Key: "holder.jwk", Session: "sbs_1"}, Gate: `{"id":"sbg_1"}`}},
	} {
		f, ts := clitest.NewFactory(nil)
		var got *HolderDecideOptions
		if code := clitest.RunWith(t, f, NewCmdHolderDecide(f, func(o *HolderDecideOptions) error { got = o; return nil }), c.args...); code != cmdutil.ExitOK {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.Err)
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
		f, _ := clitest.NewFactory(nil)
		called := false
		if code := clitest.RunWith(t, f, NewCmdHolderDecide(f, func(*HolderDecideOptions) error { called = true; return nil }), args...); code != cmdutil.ExitUsage || called {
			t.Errorf("%v: exit %d, runF called %v", args, code, called)
		}
	}
}
