//go:build unix

package cmdutil

import (
	"fmt"
	"syscall"
)

// execReplace replaces the process with path running argv in env: the
// server gets the terminal, the signals and the exit code as if it had
// been started directly.
func execReplace(path string, argv, env []string) error {
	err := syscall.Exec(path, argv, env)
	return fmt.Errorf("start %s: %w", path, err)
}
