//go:build !linux

package launch

import "github.com/pierhq/pier/cli/cmd/launch/watch"

// startWatcher has no watcher to start here.
var startWatcher = func(sock, root string) error { return watch.ErrUnsupported }
