package launch

import (
	"github.com/spf13/cobra"

	"github.com/pierhq/pier/cli/cmdutil"
)

// AddCommands adds the hand-written commands that chain operations:
// `pier bundles upload`, `pier launch` and `pier export`, and the hidden
// `pier __watch` that deploys start.
func AddCommands(root *cobra.Command, f *cmdutil.Factory) {
	if bundles := cmdutil.Subcommand(root, "bundles"); bundles != nil {
		bundles.AddCommand(NewCmdBundlesUpload(f, nil))
	}
	cmdutil.AddOperations(root, NewCmdLaunch(f, nil), NewCmdExport(f, nil))
	root.AddCommand(NewCmdWatch(f, nil))
}
