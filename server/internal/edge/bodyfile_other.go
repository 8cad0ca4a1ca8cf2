//go:build !linux

package edge

import (
	"errors"
	"os"
)

// newBodyFile has no memfd to use here: bodies are written from memory.
func newBodyFile([]byte) (*os.File, bool, error) { return nil, false, errors.ErrUnsupported }
