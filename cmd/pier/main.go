// Command pier is Pier's CLI, a client of the API. It links neither the
// server nor the packages of the few commands that would slow every start:
// `pier server`, `pier admin …`, `pier ca`, `pier sandbox
// publish-reference`, `pier holder …`, `pier conformance …` and `pier
// workflows prepare|verify` hand over to the full binary, pier-server
// (cmd/pier-server), as cli/client describes.
package main

import (
	"os"

	"github.com/pierhq/pier/cli/client"
)

func main() {
	os.Exit(client.Main())
}
