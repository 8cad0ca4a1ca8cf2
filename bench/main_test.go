package bench

import (
	"os"
	"testing"

	"github.com/pierhq/pier/internal/testkit/testpg"
)

// TestMain stops the throwaway PostgreSQL cluster the scale benchmarks
// start, when they start one. Run with childEnv set, the binary is the
// server of the server-CPU benchmarks instead (serveChild).
func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(serveChild(spec))
	}
	os.Exit(testpg.Run(m))
}
