package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// A running `pier server` writes where its data is to a run file, so that
// `pier admin` and `pier ca`, which act on the data directory rather than
// on the server, act on the one the server uses without being told.

// RunFileEnv overrides the run file's path (tests, several servers).
const RunFileEnv = "PIER_RUN_FILE"

// runInfo is the run file's content. The database URL is not written: it
// may hold a password; only whether the server uses PostgreSQL.
type runInfo struct {
	PID      int    `json:"pid"`
	DataDir  string `json:"dataDir"`
	BaseURL  string `json:"baseUrl"`
	Postgres bool   `json:"postgres,omitempty"`
}

// RunFile is where a running server says where its data is: $PIER_RUN_FILE,
// else pier/server.json in $XDG_RUNTIME_DIR, else in the user's cache
// directory.
func RunFile() string {
	if p := env(RunFileEnv, ""); p != "" {
		return p
	}
	dir := env("XDG_RUNTIME_DIR", "")
	if dir == "" {
		var err error
		if dir, err = os.UserCacheDir(); err != nil {
			dir = os.TempDir()
		}
	}
	return filepath.Join(dir, "pier", "server.json")
}

// writeRunFile records this process as the running server; the returned
// function removes the record, unless another server has replaced it.
func writeRunFile(dataDir, baseURL string, postgres bool) (func(), error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, err
	}
	path := RunFile()
	b, _ := json.Marshal(runInfo{PID: os.Getpid(), DataDir: abs, BaseURL: baseURL, Postgres: postgres})
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	tmp := path + fmt.Sprintf(".%d", os.Getpid())
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return nil, err
	}
	return func() {
		if ri, ok := readRunFile(path); ok && ri.PID == os.Getpid() {
			os.Remove(path)
		}
	}, nil
}

// readRunFile reads the run file at path.
func readRunFile(path string) (runInfo, bool) {
	var ri runInfo
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &ri) != nil || ri.DataDir == "" || ri.PID <= 0 {
		return ri, false
	}
	return ri, true
}

// runningServer is the server the run file names, if that process is
// still alive.
func runningServer() (runInfo, bool) {
	ri, ok := readRunFile(RunFile())
	if !ok {
		return ri, false
	}
	if err := syscall.Kill(ri.PID, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return ri, false
	}
	return ri, true
}

// adminDataDir settles the data directory an admin command acts on: the
// one --data-dir or PIER_DATA_DIR names, else the running server's (from
// its run file), else the default. It returns how it was chosen, for the
// command's output.
func adminDataDir(cmd *cobra.Command, dataDir *string, databaseURL string) string {
	if f := cmd.Flags().Lookup("data-dir"); f != nil && f.Changed {
		return "--data-dir"
	}
	if env("PIER_DATA_DIR", "") != "" {
		return "PIER_DATA_DIR"
	}
	if ri, ok := runningServer(); ok {
		*dataDir = ri.DataDir
		how := fmt.Sprintf("the running server's, pid %d at %s, from %s", ri.PID, ri.BaseURL, RunFile())
		if ri.Postgres && databaseURL == "" {
			how += "; that server uses PostgreSQL: pass its --database-url"
		}
		return how
	}
	return "the default; no running server found in " + RunFile()
}

// dataDirNote names the data directory an admin command used and why.
func dataDirNote(dataDir, databaseURL, how string) string {
	return fmt.Sprintf("data directory %s (%s)", dataDirOf(dataDir, databaseURL), how)
}

// sameDir reports whether a and b name the same directory.
func sameDir(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}
