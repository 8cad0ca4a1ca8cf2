// Package testpg starts a throwaway PostgreSQL cluster for tests: initdb in a
// temporary directory, a Unix socket only (no TCP port to collide on), and a
// fresh database per test. PostgreSQL refuses to run as root, so as root the
// cluster runs as the "postgres" system user that Debian's package creates.
//
// When PostgreSQL is not installed the tests that need it skip, unless
// PIER_TEST_POSTGRES=require (as .ci/run sets), when they fail.
package testpg

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
)

var (
	once     sync.Once
	cluster  *Cluster
	startErr error
	dbSeq    atomic.Int64
)

// Cluster is a running throwaway PostgreSQL.
type Cluster struct {
	dir    string
	bin    string
	asUser string
}

// Run wraps testing.M: it runs the tests and then stops the cluster if one
// was started. Use it from TestMain: os.Exit(testpg.Run(m)).
func Run(m *testing.M) int {
	code := m.Run()
	if cluster != nil {
		cluster.Stop()
	}
	return code
}

// NewDatabase returns the URL of a new, empty database.
func NewDatabase(t testing.TB) string {
	t.Helper()
	if os.Getenv("PIER_TEST_POSTGRES") == "skip" {
		t.Skip("PIER_TEST_POSTGRES=skip")
	}
	once.Do(func() { cluster, startErr = start() })
	if startErr != nil {
		if os.Getenv("PIER_TEST_POSTGRES") == "require" {
			t.Fatalf("postgres required but unavailable: %v", startErr)
		}
		t.Skipf("postgres unavailable (set PIER_TEST_POSTGRES=require to fail instead): %v", startErr)
	}
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))
	db, err := sql.Open("pgx", cluster.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	return cluster.URL(name)
}

// URL returns a connection URL for database name.
func (c *Cluster) URL(name string) string {
	return fmt.Sprintf("postgres://postgres@/%s?host=%s&sslmode=disable", name, c.dir)
}

func findBin() (string, error) {
	if p, err := exec.LookPath("pg_config"); err == nil {
		if out, err := exec.Command(p, "--bindir").Output(); err == nil {
			dir := string(out[:len(out)-1])
			if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
				return dir, nil
			}
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(matches) == 0 {
		return "", fmt.Errorf("no postgres binary (install the postgresql package)")
	}
	sort.Slice(matches, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(matches[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(matches[j]))))
		return vi > vj
	})
	return filepath.Dir(matches[0]), nil
}

func start() (*Cluster, error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pier-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root needs the postgres system user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
		c.asUser = "postgres"
	}
	data := filepath.Join(dir, "data")
	if out, err := c.run("initdb", "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	if out, err := c.run("pg_ctl", "-D", data, "-o", c.opts(), "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		return nil, fmt.Errorf("pg_ctl start: %v: %s\n%s", err, out, log)
	}
	return c, nil
}

// opts are the server's settings: durability off, for tests, unless
// PIER_TEST_PG_DURABLE=1 asks for PostgreSQL's defaults (fsync and
// synchronous commit on), as throughput benchmarks must run.
func (c *Cluster) opts() string {
	durability := "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	if os.Getenv("PIER_TEST_PG_DURABLE") == "1" {
		durability = "-c fsync=on -c synchronous_commit=on -c full_page_writes=on"
	}
	return fmt.Sprintf("-k %s -c listen_addresses='' %s -c max_connections=300", c.dir, durability)
}

// Restart stops the package's cluster, cutting every connection, and
// starts it again: what a database failover does to its clients.
func Restart(t testing.TB) {
	t.Helper()
	if cluster == nil {
		t.Fatal("testpg: no cluster to restart; call NewDatabase first")
	}
	data := filepath.Join(cluster.dir, "data")
	if out, err := cluster.run("pg_ctl", "-D", data, "-o", cluster.opts(), "-l", filepath.Join(cluster.dir, "log"), "-m", "fast", "-w", "-t", "60", "restart"); err != nil {
		t.Fatalf("pg_ctl restart: %v: %s", err, out)
	}
}

func (c *Cluster) run(name string, args ...string) ([]byte, error) {
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if c.asUser != "" {
		cmd = exec.Command("runuser", append([]string{"-u", c.asUser, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = c.dir
	return cmd.CombinedOutput()
}

// Stop stops the cluster and removes its directory.
func (c *Cluster) Stop() {
	c.run("pg_ctl", "-D", filepath.Join(c.dir, "data"), "-m", "immediate", "-w", "stop")
	os.RemoveAll(c.dir)
}
