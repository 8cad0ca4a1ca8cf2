package launch

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/pierhq/pier/cli/cmd/launch/watch"
)

// TestMain runs this test binary as a watcher when the watcher tests
// start it as a deploy starts `pier __watch`.
func TestMain(m *testing.M) {
	if root := os.Getenv("PIER_TEST_WATCH_ROOT"); root != "" {
		if err := watch.Run(context.Background(), watch.Options{Root: root, Socket: os.Getenv("PIER_TEST_WATCH_SOCKET")}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
