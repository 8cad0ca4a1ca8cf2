package sdk_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestDependFromAnotherModule does what README.md's "Use Pier from Go"
// tells another module to do: require the SDK from a clone of Pier through
// a replace directive, build a program that imports it, and run it against
// a real server. It fails if the SDK stops building outside this module
// (an import of an internal package, a dependency missing from go.mod).
func TestDependFromAnotherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module with the go command")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	_, file, _, _ := runtime.Caller(0)
	pier := filepath.Dir(filepath.Dir(file))
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		// Offline: every module the SDK needs is in the module cache, as
		// Pier's own build put it there.
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOSUMDB=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mod", "init", "example.com/agent")
	// The README's two commands, with the clone's path.
	run("mod", "edit", "-require=github.com/pierhq/pier@v0.0.0", "-replace=github.com/pierhq/pier="+pier)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(`package main

import (
	"context"
	"fmt"
	"os"

	"github.com/pierhq/pier/sdk"
)

func main() {
	client, err := sdk.NewClient(os.Args[1])
	if err != nil {
		panic(err)
	}
	res, err := client.Estimate(context.Background(), sdk.EstimateRequest{Workload: sdk.WorkloadStaticSite})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(res.Data.SelectedTarget)
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	run("get", "github.com/pierhq/pier/sdk")
	run("build", "-o", "agent", ".")
	out, err := exec.Command(filepath.Join(dir, "agent"), baseURL).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "edge" {
		t.Fatalf("the program built against the SDK: %v\n%s", err, out)
	}
}
