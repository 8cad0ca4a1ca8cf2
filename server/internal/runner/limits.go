package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// setLimits applies rlimits to a started process. os/exec starts a command
// with CLONE_VFORK, so by the time Start returns the command has been
// exec'd and has done no work yet: the limits bind all of it. The process
// count is per user, so it is only set when the version has a user of its
// own.
func setLimits(pid int, l Limits, ownUser bool) {
	set := func(res int, v int64) {
		if v > 0 {
			lim := unix.Rlimit{Cur: uint64(v), Max: uint64(v)}
			unix.Prlimit(pid, res, &lim, nil)
		}
	}
	set(unix.RLIMIT_AS, l.MemoryBytes)
	set(unix.RLIMIT_CPU, l.CPUSeconds)
	set(unix.RLIMIT_NOFILE, l.OpenFiles)
	if ownUser {
		set(unix.RLIMIT_NPROC, l.Processes)
	}
}

// cgroupV2 makes a cgroup per version under a writable cgroup v2
// hierarchy whose root delegates the memory, pids and cpu controllers.
type cgroupV2 struct{ root string }

// detectCgroupV2 returns the hierarchy at mount when it is cgroup v2 with
// the controllers Pier needs, and writable; nil otherwise (rlimits only).
func detectCgroupV2(mount string) *cgroupV2 {
	b, err := os.ReadFile(filepath.Join(mount, "cgroup.controllers"))
	if err != nil {
		return nil
	}
	have := strings.Fields(string(b))
	for _, c := range []string{"memory", "pids", "cpu"} {
		if !slices.Contains(have, c) {
			return nil
		}
	}
	root := filepath.Join(mount, "pier")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil
	}
	if err := os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+memory +pids +cpu"), 0o644); err != nil {
		return nil
	}
	return &cgroupV2{root: root}
}

func (c *cgroupV2) dir(serviceID string, version int) string {
	return filepath.Join(c.root, fmt.Sprintf("%s-v%d", serviceID, version))
}

// create makes the version's cgroup with its limits and opens it for
// clone3's CLONE_INTO_CGROUP.
func (c *cgroupV2) create(serviceID string, version int, l Limits) (*os.File, error) {
	d := c.dir(serviceID, version)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, err
	}
	write := func(name, v string) error { return os.WriteFile(filepath.Join(d, name), []byte(v), 0o644) }
	if l.MemoryBytes > 0 {
		if err := write("memory.max", strconv.FormatInt(l.MemoryBytes, 10)); err != nil {
			return nil, err
		}
	}
	if l.Processes > 0 {
		if err := write("pids.max", strconv.FormatInt(l.Processes, 10)); err != nil {
			return nil, err
		}
	}
	// One CPU at most.
	if err := write("cpu.max", "100000 100000"); err != nil {
		return nil, err
	}
	return os.Open(d)
}

func (c *cgroupV2) remove(serviceID string, version int) { os.Remove(c.dir(serviceID, version)) }
