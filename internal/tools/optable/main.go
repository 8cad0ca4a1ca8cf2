// Command optable writes the operation table, from the contract to the
// store, into README.md and docs/architecture.md. It reads the code with
// its types, so the table cannot drift from it: a call through an
// interface is followed to the methods implementing it, the kept-answer
// column comes from the API handler itself, and the CLI column names the
// hand-written commands (pier launch…) that call an operation beside the
// generated one. make generate runs it and CI fails on a diff; its test
// fails when a row has an empty cell.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

const (
	begin = "<!-- BEGIN operation table: written by internal/tools/optable (make generate) -->"
	end   = "<!-- END operation table -->"
)

func main() {
	if err := run("."); err != nil {
		fmt.Fprintln(os.Stderr, "optable:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	rows, err := build(root)
	if err != nil {
		return err
	}
	table := render(rows)
	for _, doc := range []string{"README.md", "docs/architecture.md"} {
		if err := splice(filepath.Join(root, doc), table); err != nil {
			return err
		}
	}
	return nil
}

// splice replaces what lies between the markers.
func splice(path, table string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i, j := bytes.Index(b, []byte(begin)), bytes.Index(b, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s: markers %q and %q not found", path, begin, end)
	}
	out := slices.Concat(b[:i+len(begin)], []byte("\n"+table), b[j:])
	if bytes.Equal(out, b) {
		return nil
	}
	return os.WriteFile(path, out, 0o644)
}
