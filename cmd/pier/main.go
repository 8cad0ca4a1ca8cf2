// Command pier is Pier's one binary: the CLI, and `pier server`.
package main

import (
	"os"

	"github.com/pierhq/pier/cli"
	"github.com/pierhq/pier/server"
)

func main() {
	os.Exit(cli.Main(server.NewCommands()...))
}
