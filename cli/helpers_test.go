package cli

import (
	"testing"

	"github.com/pierhq/pier/cli/cmdutil"
	"github.com/pierhq/pier/cli/internal/clitest"
)

// runCaptured executes args with every operation's API call replaced by a
// capture of its options. It returns the options (nil when no operation
// ran), the exit code and the streams.
func runCaptured(t *testing.T, stdin string, args ...string) (*cmdutil.OperationOptions, int, *clitest.Streams) {
	t.Helper()
	f, ts := clitest.NewFactory(nil)
	ts.In.WriteString(stdin)
	var got *cmdutil.OperationOptions
	root := newRootCmd(f, func(o *cmdutil.OperationOptions) error {
		got = o
		return nil
	})
	code := cmdutil.Execute(f, root, args)
	return got, code, ts
}
