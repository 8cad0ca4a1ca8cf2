//go:build !linux

package watch

import (
	"context"
	"time"
)

// Options are a watcher's.
type Options struct {
	Root, Socket string
	Idle         time.Duration
}

// Run has nothing to watch with here.
func Run(context.Context, Options) error { return ErrUnsupported }

// Trusted trusts nothing here.
func Trusted(string) error { return ErrUnsupported }

// Query finds no watcher here: every deploy walks its folder.
func Query(string, string, uint64, time.Duration) (*Answer, error) { return nil, ErrUnsupported }
