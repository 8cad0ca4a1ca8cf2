package server_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// A sandboxed service reaches its own database, through its own gateway,
// and cannot list the other services' databases or roles.
func TestManagedPostgresFromTheSandbox(t *testing.T) {
	if !testserver.SandboxRequired() {
		t.Skip("set PIER_TEST_SANDBOX=require (CI does) to run services sandboxed")
	}
	admin := testpg.NewDatabase(t)
	u, _ := url.Parse(admin)
	u.Path = "/postgres"
	ts := start(t, server.Config{PostgresAdminURL: u.String(), Supervision: fastSupervision})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
	// Another tenant's database, whose name must not show.
	b := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
	other := launchProcess(t, ts, b, "other", "process", exampleFiles(t, "app"), map[string]any{"addons": []any{"managed_postgres"}})
	otherID := waitTask(t, ts, b, other["taskId"].(string), "succeeded")["serviceId"].(string)

	probe := `PSQL=$(ls /usr/lib/postgresql/*/bin/psql | tail -1)
"$PSQL" "$DATABASE_URL" -Atc "select 'db:' || current_database()" 2>&1
"$PSQL" "$DATABASE_URL" -Atc "select 'names:' || string_agg(datname, ',') from pg_database" 2>&1
"$PSQL" "$DATABASE_URL" -Atc "select 'roles:' || string_agg(rolname, ',') from pg_roles" 2>&1
echo DONE
exec python3 -m http.server "$PORT" --bind 127.0.0.1
`
	task := launchProcess(t, ts, a, "dbprobe", "process", map[string]string{"Procfile": "web: sh probe.sh\n", "probe.sh": probe},
		map[string]any{"addons": []any{"managed_postgres"}})
	id := waitTask(t, ts, a, task["taskId"].(string), "succeeded")["serviceId"].(string)
	var logs string
	waitFor(t, "the probe's output", func() bool { logs = logText(t, ts, a, id); return strings.Contains(logs, "DONE") })
	d, err := ts.Store().Services().Database(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	od, err := ts.Store().Services().Database(t.Context(), otherID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs, "db:"+d.Name) {
		t.Fatalf("the service did not reach its database %s:\n%s", d.Name, logs)
	}
	if strings.Contains(logs, od.Name) || strings.Contains(logs, "names:") || strings.Contains(logs, "roles:") {
		t.Fatalf("the service listed other databases or roles:\n%s", logs)
	}
	if !strings.Contains(logs, "permission denied") {
		t.Fatalf("listing the catalog was not refused:\n%s", logs)
	}
}

// pier services get shows a process service's sandbox and its limits.
func TestServiceShowsItsSandbox(t *testing.T) {
	ts := start(t, server.Config{Supervision: fastSupervision})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
	task := launchProcess(t, ts, a, "shop", "process", exampleFiles(t, "app"), nil)
	id := waitTask(t, ts, a, task["taskId"].(string), "succeeded")["serviceId"].(string)
	sb, ok := serviceOf(t, ts, a, id)["sandbox"].(map[string]any)
	if !ok {
		t.Fatalf("the service shows no sandbox: %v", serviceOf(t, ts, a, id))
	}
	want := "runc"
	if !testserver.SandboxRequired() {
		want = sb["isolation"].(string)
	}
	if sb["isolation"] != want || sb["memoryBytes"].(float64) <= 0 || sb["processes"].(float64) <= 0 || sb["diskBytes"].(float64) <= 0 {
		t.Fatalf("sandbox: %v", sb)
	}
}
