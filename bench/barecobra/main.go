// Command barecobra is the peer of `pier --version` in bench/peers.sh's
// CLI start row: a cobra root command with a version and nothing else, so
// the difference is what Pier's client links and initialises.
package main

import (
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{Use: "bare", Version: "1.0.0", Run: func(*cobra.Command, []string) {}}
	if root.Execute() != nil {
		os.Exit(1)
	}
}
