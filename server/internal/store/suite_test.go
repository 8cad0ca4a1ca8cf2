package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/server/internal/store"
)

// The store suite: every noun's behaviour, written once and run on every
// engine, as River runs one driver suite (riverdrivertest) against each
// of its drivers. Each noun has a file of cases, <noun>_test.go, run by
// runCases; a case gets a fresh, migrated database of its own, so cases
// share nothing but the code under test.

func TestMain(m *testing.M) { os.Exit(testpg.Run(m)) }

// engines are the databases the suite runs on: a name, and where a new,
// empty database is (a data directory for SQLite, a URL for PostgreSQL).
var engines = []struct {
	name string
	new  func(t *testing.T) (dir, url string)
}{
	{"sqlite", func(t *testing.T) (string, string) { return t.TempDir(), "" }},
	{"postgres", func(t *testing.T) (string, string) { return "", migratedPostgres(t) }},
}

// template is a PostgreSQL database migrated once, which each case's
// database copies: CREATE DATABASE … TEMPLATE costs less than sixteen
// migrations. (TestMigrationsAreIdempotent migrates empty databases.)
var template struct {
	once     sync.Once
	url, err string
	n        atomic.Int64
}

func migratedPostgres(t *testing.T) string {
	t.Helper()
	template.once.Do(func() {
		template.url = testpg.NewDatabase(t)
		st, err := store.Open(context.Background(), "", template.url)
		if err != nil {
			template.err = err.Error()
			return
		}
		st.Close()
	})
	if template.err != "" {
		t.Fatalf("migrating the template database: %s", template.err)
	}
	if template.url == "" {
		t.Skip("no PostgreSQL") // NewDatabase skipped the first caller
	}
	u, err := url.Parse(template.url)
	if err != nil {
		t.Fatal(err)
	}
	from := strings.TrimPrefix(u.Path, "/")
	name := fmt.Sprintf("%s_c%d", from, template.n.Add(1))
	u.Path = "/postgres"
	admin, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(context.Background(), "CREATE DATABASE "+name+" TEMPLATE "+from); err != nil {
		t.Fatalf("copy the template database: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// suite runs f once per engine. open connects to the engine's database;
// called again it connects a second time, as another process (or
// replica) would.
func suite(t *testing.T, f func(t *testing.T, open func() *store.Store)) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			dir, url := e.new(t)
			f(t, func() *store.Store {
				st, err := store.Open(context.Background(), dir, url)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				return st
			})
		})
	}
}

// storeCase is one behaviour of a noun, run on a world of its own.
type storeCase struct {
	name string
	run  func(t *testing.T, w world)
}

// runCases runs a noun's cases on every engine: engine first, then case,
// so `go test -run 'TestQuotes/postgres/'` picks one engine.
func runCases(t *testing.T, cases []storeCase) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					dir, url := e.new(t)
					open := func(opts ...store.Option) *store.Store {
						st, err := store.Open(context.Background(), dir, url, opts...)
						if err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { st.Close() })
						return st
					}
					w := newWorld(t, open(), "org_a")
					w.open = open
					c.run(t, w)
				})
			}
		})
	}
}

var (
	ctx = context.Background()
	t0  = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
)

// world is an organisation with a project, the fixture most nouns need.
type world struct {
	st        *store.Store
	org, proj string
	// open connects to the world's database again, as another server
	// would, with its own options.
	open func(opts ...store.Option) *store.Store
}

func newWorld(t *testing.T, st *store.Store, org string) world {
	t.Helper()
	if _, err := st.Accounts().CreateOrganization(ctx, org, org, t0); err != nil {
		t.Fatal(err)
	}
	w := world{st: st, org: org, proj: "prj_" + org}
	if err := st.Projects().Create(ctx, store.Project{ID: w.proj, OrgID: org, Name: "p", LimitMicro: 100, Policy: "{}", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	return w
}

// other is a second organisation on the same database.
func (w world) other(t *testing.T, org string) world {
	o := newWorld(t, w.st, org)
	o.open = w.open
	return o
}

func (w world) service(t *testing.T, id string) store.Service {
	t.Helper()
	v := store.Service{ID: id, OrgID: w.org, ProjectID: w.proj, Name: id, Target: "edge", PreviewHost: id + ".preview.test",
		State: "live", TaskID: "tsk_" + id, CreatedAt: t0, UpdatedAt: t0}
	must(t, w.st.Services().Insert(ctx, v))
	return v
}

func (w world) task(t *testing.T, id, state string) store.Task {
	t.Helper()
	task := store.Task{ID: id, OrgID: w.org, ProjectID: w.proj, Kind: "launch", State: state, Steps: "[]", CreatedAt: t0, UpdatedAt: t0}
	must(t, w.st.Tasks().Insert(ctx, task))
	return task
}

func (w world) human(t *testing.T, id, kind string) store.Human {
	t.Helper()
	h := store.Human{ID: id, OrgID: w.org, Kind: kind, Name: id, Email: id + "@example.test", CreatedAt: t0}
	must(t, w.st.Accounts().CreateHuman(ctx, h))
	return h
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantErr fails unless err is target (nil for success).
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if target == nil && err != nil || target != nil && !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// race runs f n times at once and counts the calls that succeeded; a
// call may fail only with one of the errors allowed.
func race(t *testing.T, n int, f func(i int) error, allowed ...error) (wins int) {
	t.Helper()
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = f(i)
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err == nil {
			wins++
			continue
		}
		ok := false
		for _, a := range allowed {
			ok = ok || errors.Is(err, a)
		}
		if !ok {
			t.Fatalf("unexpected error in a concurrent call: %v", err)
		}
	}
	return wins
}
