package bench

import (
	"os"
	"testing"

	"github.com/pierhq/pier/internal/testkit/testpg"
)

// TestMain stops the throwaway PostgreSQL cluster the scale benchmarks
// start, when they start one.
func TestMain(m *testing.M) { os.Exit(testpg.Run(m)) }
