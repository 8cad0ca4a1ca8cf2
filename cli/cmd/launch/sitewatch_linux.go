package launch

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// startWatcher starts `pier __watch` of root, answering on sock, in a
// session of its own with no terminal and no stream of the CLI's, so it
// outlives the deploy. Tests replace it.
var startWatcher = func(sock, root string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	// A test binary running the CLI in process would start itself, which
	// runs its tests rather than the watcher; the tests that want one
	// replace startWatcher.
	if strings.HasSuffix(exe, ".test") {
		return errors.New("not starting a watcher from a test binary: " + exe)
	}
	cmd := exec.Command(exe, watchCommand, "--socket", sock, root)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Dir = "/"
	if err := cmd.Start(); err != nil {
		return err
	}
	return cmd.Process.Release()
}
