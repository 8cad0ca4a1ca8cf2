// Command vectorgen regenerates the sandbox proof test vectors:
//
//	go run ./verifier/internal/vectorgen
//
// from the module root. Keys under -keys are created on the first run only;
// with them committed, the output is byte-for-byte reproducible.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/pierhq/pier/verifier/internal/vectors"
)

func main() {
	out := flag.String("out", "verifier/testdata/vectors", "directory to write the vectors into (replaced)")
	keysDir := flag.String("keys", "verifier/testdata/keys", "directory of the fixed signing keys")
	flag.Parse()
	keys, err := vectors.LoadKeys(*keysDir)
	if err == nil {
		err = vectors.Generate(*out, keys)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vectorgen:", err)
		os.Exit(1)
	}
}
