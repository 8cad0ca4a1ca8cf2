// Command pier-server is Pier's full binary: the CLI with the server's
// commands (`pier server`, `pier admin …`, `pier ca`, `pier sandbox
// publish-reference`). The client, cmd/pier, hands those commands over to
// it.
package main

import (
	"os"

	"github.com/pierhq/pier/cli"
	"github.com/pierhq/pier/server"
)

func main() {
	os.Exit(cli.Main(server.NewCommands()...))
}
