package verify

import (
	"reflect"
	"testing"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
)

func TestVerifySandboxProofOptions(t *testing.T) {
	for _, c := range []struct {
		args    []string
		env     map[string]string
		want    VerifyOptions
		baseURL string
	}{
		{nil, nil, VerifyOptions{}, cmdutil.DefaultBaseURL},
		{[]string{"--base-url", "https://pier.example", "--api-url", "https://api.pier.example", "--tamper-check", "--json"}, nil,
			VerifyOptions{APIURL: "https://api.pier.example", TamperCheck: true, JSON: true}, "https://pier.example"},
		{[]string{"--tamper-check"}, map[string]string{"PIER_BASE_URL": "http://127.0.0.1:9090"},
			VerifyOptions{TamperCheck: true}, "http://127.0.0.1:9090"},
	} {
		f, ts := clitest.NewFactory(c.env)
		var got *VerifyOptions
		if code := clitest.RunWith(t, f, NewCmdVerifySandboxProof(f, func(o *VerifyOptions) error { got = o; return nil }), c.args...); code != cmdutil.ExitOK {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.Err)
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
	f, _ := clitest.NewFactory(nil)
	called := false
	if code := clitest.RunWith(t, f, NewCmdVerifySandboxProof(f, func(*VerifyOptions) error { called = true; return nil }), "proof.json"); code != cmdutil.ExitUsage || called {
		t.Errorf("an argument: exit %d, runF called %v", code, called)
	}
}
