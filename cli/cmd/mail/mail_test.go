package mail

import (
	"reflect"
	"testing"
	"time"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
)

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
		f, ts := clitest.NewFactory(nil)
		var got *MailWaitOptions
		if code := clitest.RunWith(t, f, NewCmdMailWait(f, func(o *MailWaitOptions) error { got = o; return nil }), c.args...); code != cmdutil.ExitOK {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.Err)
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
	f, _ := clitest.NewFactory(nil)
	var got *MailWaitOptions
	before := time.Now()
	if code := clitest.RunWith(t, f, NewCmdMailWait(f, func(o *MailWaitOptions) error { got = o; return nil }), "--to", "agent@acme.dev"); code != cmdutil.ExitOK {
		t.Fatalf("exit %d", code)
	}
	if got.Since.After(before) || before.Sub(got.Since) > time.Minute {
		t.Errorf("default since %s, want just before %s", got.Since, before)
	}
	for _, args := range [][]string{nil, {"--to", "agent@acme.dev", "--since", "yesterday"}} {
		f, _ := clitest.NewFactory(nil)
		called := false
		if code := clitest.RunWith(t, f, NewCmdMailWait(f, func(*MailWaitOptions) error { called = true; return nil }), args...); code != cmdutil.ExitUsage || called {
			t.Errorf("%v: exit %d, runF called %v", args, code, called)
		}
	}
}
