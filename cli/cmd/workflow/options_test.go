package workflow

import (
	"errors"
	"reflect"
	"testing"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
)

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
		f, ts := clitest.NewFactory(c.env)
		var got *WorkflowPrepareOptions
		if code := clitest.RunWith(t, f, NewCmdWorkflowPrepare(f, func(o *WorkflowPrepareOptions) error { got = o; return nil }), c.args...); code != cmdutil.ExitOK {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.Err)
		}
		got.Factory = nil
		if !reflect.DeepEqual(*got, c.want) {
			t.Errorf("prepare %v: %+v, want %+v", c.args, *got, c.want)
		}
	}
	f, ts := clitest.NewFactory(nil)
	var verify *WorkflowVerifyOptions
	if code := clitest.RunWith(t, f, NewCmdWorkflowVerify(f, func(o *WorkflowVerifyOptions) error { verify = o; return nil }), "prepared.json", "--jwks", "jwks.json"); code != cmdutil.ExitOK {
		t.Fatalf("verify: exit %d %s", code, ts.Err)
	}
	if verify.Factory != f || verify.File != "prepared.json" || verify.JWKS != "jwks.json" {
		t.Errorf("verify: %+v", *verify)
	}
	for _, cmd := range []func(f *cmdutil.Factory) *cobra.Command{
		func(f *cmdutil.Factory) *cobra.Command {
			return NewCmdWorkflowPrepare(f, func(*WorkflowPrepareOptions) error { return errors.New("runF called") })
		},
		func(f *cmdutil.Factory) *cobra.Command {
			return NewCmdWorkflowVerify(f, func(*WorkflowVerifyOptions) error { return errors.New("runF called") })
		},
	} {
		f, _ := clitest.NewFactory(nil)
		if code := clitest.RunWith(t, f, cmd(f)); code != cmdutil.ExitUsage {
			t.Errorf("%s without a file: exit %d", cmd(f).Name(), code)
		}
	}
}
