package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkVersionStart is the time from Start to a healthy answer of the
// smallest process version (a static Go binary answering on $PORT), in a
// sandbox and as a bare process: the difference is what the sandbox costs
// a start (goal: at most 100 ms). Stopping is not timed.
//
//	go test -run '^$' -bench VersionStart -benchtime 20x ./server/internal/runner
func BenchmarkVersionStart(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "hello")
	build := exec.Command("go", "build", "-o", bin, "./testdata/hello")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building testdata/hello: %v\n%s", err, out)
	}
	body, err := os.ReadFile(bin)
	if err != nil {
		b.Fatal(err)
	}
	materialize := func(_ context.Context, dir string) error {
		return os.WriteFile(filepath.Join(dir, "hello"), body, 0o755)
	}
	for _, mode := range []string{"sandboxed", "bare"} {
		b.Run(mode, func(b *testing.B) {
			s := sandboxed(b, &events{}, Limits{})
			if mode == "bare" {
				s.sb, s.sbErr, s.cfg.AllowUnsandboxed = nil, errors.New("benchmark: bare processes"), true
			}
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				id := fmt.Sprintf("svc_bench%d", i)
				if _, err := s.Start(ctx, Spec{ServiceID: id, Version: 1, Command: "./hello", Materialize: materialize, HealthTimeout: 10 * time.Second}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				s.Stop(ctx, id, 1)
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/start")
		})
	}
}
