package server

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAdminFindsTheRunningServer starts `pier server` as the command runs
// it, then runs pier admin with neither --data-dir nor PIER_DATA_DIR: the
// key it makes is in the running server's data directory (the server
// accepts it), and its output names that directory and how it was found.
// Once the server stops, admin names the directory it falls back to.
func TestAdminFindsTheRunningServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the server command")
	}
	dir := t.TempDir()
	t.Setenv(RunFileEnv, filepath.Join(dir, "run", "server.json"))
	t.Setenv("HOME", filepath.Join(dir, "home"))
	t.Setenv("PIER_DATA_DIR", "")
	os.Unsetenv("PIER_DATA_DIR")
	dataDir := filepath.Join(dir, "served")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, ri := startForRunFile(t, ctx, dataDir)
	if ri.PID != os.Getpid() || ri.DataDir != dataDir {
		t.Fatalf("run file %+v, want pid %d and %s", ri, os.Getpid(), dataDir)
	}

	adminUsesTheRunningServer(t, ri, dataDir)
	if _, errOut, err := admin("signin-link"); err != nil || !strings.Contains(errOut, dataDir) {
		t.Errorf("signin-link: %v\n%s", err, errOut)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("server: %v", err)
	}
	if _, err := os.Stat(RunFile()); !os.IsNotExist(err) {
		t.Errorf("the run file outlives the server: %v", err)
	}
	// No server: the default, named, and refused since it does not exist.
	_, _, err := admin("create-key")
	def := filepath.Join(dir, "home", ".local", "share", "pier")
	if err == nil || !strings.Contains(err.Error(), def) || !strings.Contains(err.Error(), "no running server found") {
		t.Errorf("create-key with no server running: %v", err)
	}
}

// startForRunFile starts the server command with its data in dataDir and
// waits for its run file.
func startForRunFile(t *testing.T, ctx context.Context, dataDir string) (chan error, runInfo) {
	t.Helper()
	srv := newServerCmd()
	srv.SetArgs([]string{"--data-dir", dataDir, "--http-addr", "127.0.0.1:0", "--https-addr", "127.0.0.1:0",
		"--http3-addr", "off", "--dns-addr", "127.0.0.1:0", "--smtp-addr", "127.0.0.1:0", "--log-level", "error"})
	var srvErr bytes.Buffer
	srv.SetErr(&srvErr)
	srv.SetOut(&srvErr)
	done := make(chan error, 1)
	go func() { done <- srv.ExecuteContext(ctx) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if ri, ok := readRunFile(RunFile()); ok {
			return done, ri
		}
		select {
		case err := <-done:
			t.Fatalf("server stopped: %v\n%s", err, srvErr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run file at %s", RunFile())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// admin runs pier admin with args, as a person would with no data
// directory named.
func admin(args ...string) (string, string, error) {
	c := newAdminCmd()
	var out, errOut bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&errOut)
	c.SetArgs(args)
	err := c.Execute()
	return out.String(), errOut.String(), err
}

// adminUsesTheRunningServer makes a key with no data directory named and
// wants it in the running server's: named so in the output, and accepted
// by the server.
func adminUsesTheRunningServer(t *testing.T, ri runInfo, dataDir string) {
	t.Helper()
	out, errOut, err := admin("create-key")
	if err != nil {
		t.Fatalf("create-key: %v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "data directory "+dataDir+" (the running server's") {
		t.Errorf("create-key does not name the running server's data directory:\n%s", errOut)
	}
	req, _ := http.NewRequest("GET", ri.BaseURL+"/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(out))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the running server refuses the key admin made: %d", resp.StatusCode)
	}
	if out, _, err := admin("create-key", "--json"); err != nil || !strings.Contains(out, `"dataDir":"`+dataDir+`"`) {
		t.Errorf("create-key --json does not name the data directory: %v\n%s", err, out)
	}
}
