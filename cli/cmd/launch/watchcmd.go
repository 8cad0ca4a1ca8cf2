package launch

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli/cmd/launch/watch"
	"github.com/pierhq/pier/cli/cmdutil"
)

// watchCommand is the watcher's command, hidden: deploys start it.
const watchCommand = "__watch"

// WatchOptions are `pier __watch`'s.
type WatchOptions struct {
	Factory     *cmdutil.Factory
	Dir, Socket string
	Idle        time.Duration
	Status      bool
}

const watchLong = `Watch a folder for changes and tell the deploys of it what changed, as git's
fsmonitor daemon does. pier launch and pier bundles upload start it (detached,
in a session of its own) for a folder of 5,000 files or more, unless
PIER_WATCHER=off (or PIER_NO_WATCHER=1, or CI=true without PIER_WATCHER=on);
PIER_WATCHER=on starts it for a folder of any size. The next deploy asks it
which paths changed since the last one and stats only those, instead of every
file; without an answer within 50 ms it walks the whole folder, as before.

It keeps an inotify watch on each folder (hidden ones left out, as deploys
leave them out) and answers on a unix socket in the cache folder next to the
digests (PIER_CACHE_DIR, else pier in the user's cache folder): watch/HASH.sock,
mode 0600, HASH naming the folder's real path. When events were lost (the
kernel's queue overflowed) or the system's watch limit is reached, it answers
"walk everything". It exits after --idle without a question (30 minutes), and
when the folder is deleted or moved. Nothing is written into the folder.

--status asks the running watcher of the folder instead, and prints whether
one answers; with --json, an object: root, socket, running, instance, token,
full and reason.`

// NewCmdWatch is `pier __watch`.
func NewCmdWatch(f *cmdutil.Factory, runF func(*WatchOptions) error) *cobra.Command {
	opts := &WatchOptions{Factory: f}
	cmd := &cobra.Command{
		Use:    watchCommand + " <dir>",
		Short:  "Watch a folder for the deploys of it (started by pier launch)",
		Long:   watchLong,
		Hidden: true,
		Example: `  pier __watch ./site --status
  pier __watch ./site --status --json
  pier __watch ./site --idle 5m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Dir = args[0]
			if opts.Idle < 0 {
				return cmdutil.UsageErrorf(cmd.CommandPath(), "--idle must not be negative")
			}
			if runF != nil {
				return runF(opts)
			}
			return runWatch(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Socket, "socket", "", "the `path` to answer on (default: watch/HASH.sock in the cache folder)")
	cmd.Flags().DurationVar(&opts.Idle, "idle", watch.DefaultIdle, "exit after this long without a question")
	cmd.Flags().BoolVar(&opts.Status, "status", false, "ask the running watcher of the folder instead of watching")
	return cmd
}

// watchStatus is what --status --json prints.
type watchStatus struct {
	Root     string `json:"root"`
	Socket   string `json:"socket"`
	Running  bool   `json:"running"`
	Instance string `json:"instance,omitempty"`
	Token    uint64 `json:"token,omitempty"`
	Full     bool   `json:"full,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

func runWatch(ctx context.Context, o *WatchOptions) error {
	f := o.Factory
	where := "pier " + watchCommand
	abs, err := filepath.Abs(o.Dir)
	if err != nil {
		return cmdutil.UsageErrorf(where, "%v", err)
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return cmdutil.UsageErrorf(where, "%v", err)
	}
	if o.Socket == "" {
		dir := cacheRoot(f)
		if dir == "" {
			return cmdutil.UsageErrorf(where, "no cache folder for the socket (PIER_CACHE_DIR is off): give --socket")
		}
		o.Socket = watch.SocketPath(dir, root)
	}
	if !o.Status {
		return watch.Run(ctx, watch.Options{Root: root, Socket: o.Socket, Idle: o.Idle})
	}
	st := watchStatus{Root: root, Socket: o.Socket}
	if a, err := watch.Query(o.Socket, "", 0, time.Second); err == nil {
		st.Running, st.Instance, st.Token = true, a.Instance, a.Token
		if a.Reason != "the token is not this watcher's" {
			st.Full, st.Reason = a.Full, a.Reason
		}
	} else {
		st.Reason = err.Error()
	}
	if f.Config.JSON {
		return cmdutil.PrintJSON(f.IO.Out, st)
	}
	if !st.Running {
		fmt.Fprintf(f.IO.Out, "no watcher of %s answers on %s (%s)\n", root, o.Socket, st.Reason)
		return nil
	}
	fmt.Fprintf(f.IO.Out, "watching %s: instance %s, token %d, socket %s\n", root, st.Instance, st.Token, o.Socket)
	if st.Full {
		fmt.Fprintf(f.IO.Out, "every deploy walks the whole folder: %s\n", st.Reason)
	}
	return nil
}
