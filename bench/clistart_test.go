package bench

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The budget of package initialisation when the pier binary starts. pier
// (cmd/pier) is the client: it links the CLI, the SDK and what they need,
// not the server, whose commands it hands over to pier-server
// (cmd/pier-server). Linking a server package again, or building a
// regular expression, schema or table at init, shows here first. See
// bench/README.md, "CLI start", for the figures these were chosen from.
//
// Allocations and bytes move by a handful from run to run and not with the
// machine, so they carry the budget, with headroom (about 1.5 times) for
// new dependencies and Go releases; the clock only has to stay under a
// bound loose enough for a slow or busy machine, since it varies.
const (
	// 100 packages, 356 allocations and 58 KB at the time of writing, since
	// the client hands holder, conformance and workflows prepare|verify
	// over to pier-server and so links neither go-jose, jcs, jsonschema
	// with x/text nor yaml.v3 (117, 741 and 99 KB before; 125, 759 and 104
	// KB with lipgloss's terminal stack; 127, 1,307 and 169 KB before the
	// patterns, tables and help page became lazy; the binary that linked
	// the server: 215, 5,448 and 2.9 MB), built without cgo as make build
	// does. The most are net/http's and crypto's.
	initPackagesBudget = 120
	initAllocsBudget   = 550
	initBytesBudget    = 90_000
	// The fastest of several runs, summed over every package: 0.9 to 1.9
	// ms on the 2-core machine under other work; 2 to 4 ms when the binary
	// linked the server, 10 ms and more before that.
	initClockBudget = 3 * time.Millisecond
	clockRuns       = 7
)

// initLine is one line of GODEBUG=inittrace=1.
var initLine = regexp.MustCompile(`^init (\S+) @[0-9.]+ ms, ([0-9.]+) ms clock, ([0-9]+) bytes, ([0-9]+) allocs$`)

type pkgInit struct {
	name          string
	clock         time.Duration
	bytes, allocs int
}

// traceInit runs bin with args under GODEBUG=inittrace=1,gctrace=1 and
// returns its packages' inits, and whether a garbage collection ran.
func traceInit(t *testing.T, bin string, args ...string) (inits []pkgInit, gc bool) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1,gctrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, stderr.String())
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.HasPrefix(line, "gc ") {
			gc = true
		}
		m := initLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ms, _ := strconv.ParseFloat(m[2], 64)
		b, _ := strconv.Atoi(m[3])
		a, _ := strconv.Atoi(m[4])
		inits = append(inits, pkgInit{m[1], time.Duration(ms * float64(time.Millisecond)), b, a})
	}
	if len(inits) < 50 {
		t.Fatalf("only %d init lines in:\n%s", len(inits), stderr.String())
	}
	return inits, gc
}

// heaviest lists the packages that allocate most at init, for a failure.
func heaviest(inits []pkgInit) string {
	s := slices.Clone(inits)
	slices.SortFunc(s, func(a, b pkgInit) int { return b.allocs - a.allocs })
	var out strings.Builder
	for _, p := range s[:min(10, len(s))] {
		fmt.Fprintf(&out, "\n  %-60s %6d allocs %9d bytes %s", p.name, p.allocs, p.bytes, p.clock)
	}
	return out.String()
}

// buildClient builds cmd/pier as make build does, without cgo, and fails
// unless the binary is static: linked against libc, it would start the
// dynamic loader first, 1.2 to 1.5 ms of CPU a start on a loaded machine
// (bench/README.md, "CLI start").
func buildClient(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pier")
	build := exec.Command("go", "build", "-o", bin, "github.com/pierhq/pier/cmd/pier")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the client is linked dynamically (it names an interpreter): something it links needs cgo")
		}
	}
	return bin
}

// TestCLIStartBudget builds cmd/pier, the client, and holds the package initialisation
// of `pier --version` to the budget above: when it fails, the listed
// packages are where to look (a regular expression, schema, table or
// client built in a package-level var or init; make it lazy, with
// sync.OnceValue, or keep the package out of the binary). Find the
// culprit with
//
//	GODEBUG=inittrace=1 ./bin/pier --version 2>&1 | sort -k10 -n | tail
func TestCLIStartBudget(t *testing.T) {
	bin := buildClient(t)

	inits, gc := traceInit(t, bin, "--version")
	var allocs, size int
	for _, p := range inits {
		allocs += p.allocs
		size += p.bytes
	}
	t.Logf("%d packages initialise: %d allocations, %d bytes", len(inits), allocs, size)
	if len(inits) > initPackagesBudget || allocs > initAllocsBudget || size > initBytesBudget {
		t.Errorf("%d packages initialise, allocating %d times and %d bytes; the budget is %d, %d and %d. The heaviest:%s",
			len(inits), allocs, size, initPackagesBudget, initAllocsBudget, initBytesBudget, heaviest(inits))
	}
	// The first collection starts when the heap reaches 4 MB, far above
	// what the client allocates before main. (gctrace reports a
	// collection when it ends, so one the exit cuts short goes unseen.)
	if gc {
		t.Errorf("a garbage collection ran during `pier --version`: the heap at start passed 4 MB. The heaviest inits:%s", heaviest(inits))
	}

	best := time.Duration(1<<63 - 1)
	for range clockRuns {
		run, _ := traceInit(t, bin, "--version")
		var clock time.Duration
		for _, p := range run {
			clock += p.clock
		}
		best = min(best, clock)
	}
	t.Logf("package init clock: %s, the fastest of %d runs", best, clockRuns)
	if best > initClockBudget {
		slices.SortFunc(inits, func(a, b pkgInit) int { return int(b.clock - a.clock) })
		var out strings.Builder
		for _, p := range inits[:10] {
			fmt.Fprintf(&out, "\n  %-60s %s", p.name, p.clock)
		}
		t.Errorf("package init takes %s at best of %d runs; the budget is %s. The slowest of one run:%s", best, clockRuns, initClockBudget, out.String())
	}
}
