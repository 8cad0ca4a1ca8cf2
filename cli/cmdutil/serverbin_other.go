//go:build !unix

package cmdutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// execReplace runs path with argv in env and exits with its exit code,
// where the system cannot replace a process.
func execReplace(path string, argv, env []string) error {
	cmd := exec.Command(path, argv[1:]...)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err == nil || errors.As(err, &exit) {
		os.Exit(cmd.ProcessState.ExitCode())
	}
	return fmt.Errorf("start %s: %w", path, err)
}
