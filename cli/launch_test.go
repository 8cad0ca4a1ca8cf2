package cli

import (
	"testing"

	"github.com/spf13/cobra"
)

// runWith parses args on cmd under a root with the global flags and
// returns the exit code.
func runWith(t *testing.T, f *Factory, cmd *cobra.Command, args ...string) int {
	t.Helper()
	root := newRootCmd(f, nil)
	for _, c := range root.Commands() {
		if c.Name() == cmd.Name() {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(cmd)
	return execute(f, root, append([]string{cmd.Name()}, args...))
}

func TestLaunchOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want LaunchOptions
	}{
		{[]string{"./site"}, LaunchOptions{Dir: "./site", Name: "site", Years: 1, Wait: true}},
		{[]string{"./My Site/", "--project", "prj_1", "--domain", "acme.dev", "--years", "2"}, LaunchOptions{Dir: "./My Site/", Project: "prj_1", Name: "my-site", Domain: "acme.dev", Years: 2, Wait: true}},
		{[]string{"./site", "--name", "web", "--no-wait"}, LaunchOptions{Dir: "./site", Name: "web", Years: 1}},
		{[]string{"./site", "--wait"}, LaunchOptions{Dir: "./site", Name: "site", Years: 1, Wait: true}},
	} {
		f, ts := newTestFactory(map[string]string{})
		var got *LaunchOptions
		cmd := NewCmdLaunch(f, func(o *LaunchOptions) error { got = o; return nil })
		if code := runWith(t, f, cmd, c.args...); code != 0 {
			t.Fatalf("%v: exit %d %s", c.args, code, ts.err)
		}
		got.Factory = nil
		if *got != c.want {
			t.Errorf("%v: %+v, want %+v", c.args, *got, c.want)
		}
	}
	f, _ := newTestFactory(nil)
	if code := runWith(t, f, NewCmdLaunch(f, func(*LaunchOptions) error { return nil })); code != ExitUsage {
		t.Errorf("launch without a directory: exit %d", code)
	}
}

func TestExportAndUploadOptions(t *testing.T) {
	f, _ := newTestFactory(nil)
	var ex *ExportOptions
	if code := runWith(t, f, NewCmdExport(f, func(o *ExportOptions) error { ex = o; return nil }), "prj_1", "--out", "leave"); code != 0 || ex.Project != "prj_1" || ex.Out != "leave" {
		t.Fatalf("export: exit %d %+v", code, ex)
	}
	f, _ = newTestFactory(nil)
	if code := runWith(t, f, NewCmdExport(f, func(*ExportOptions) error { return nil }), "prj_1"); code != ExitUsage {
		t.Errorf("export without --out: exit %d", code)
	}
	f, _ = newTestFactory(nil)
	var up *UploadOptions
	cmd := NewCmdBundlesUpload(f, func(o *UploadOptions) error { up = o; return nil })
	if code := runWith(t, f, cmd, "./site", "--project", "prj_2"); code != 0 || up.Dir != "./site" || up.Project != "prj_2" {
		t.Fatalf("upload: exit %d %+v", code, up)
	}
}
