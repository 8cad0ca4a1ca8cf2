// Command pier is Pier's CLI, a client of the API. It does not link the
// server, so that it starts quickly: `pier server`, `pier admin …`, `pier
// ca` and `pier sandbox publish-reference` hand over to the full binary,
// pier-server (cmd/pier-server), as cli.ServerCommands describes.
package main

import (
	"os"

	"github.com/pierhq/pier/cli"
)

func main() {
	os.Exit(cli.Main(cli.ServerCommands()...))
}
