package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testkit/contracttest"
	"github.com/pierhq/pier/internal/testkit/testpg"
	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
	"github.com/pierhq/pier/server/internal/store"
)

// Three replicas on one PostgreSQL behind nginx: a site launched through
// the balancer is served by every replica, and its teardown stops it on all
// three within a second.
func TestThreeReplicasBehindNginx(t *testing.T) {
	db := testpg.NewDatabase(t)
	var replicas []*testServer
	limits := map[string]server.RateLimit{"search": {PerSecond: 2, Burst: 5}}
	for range 3 {
		replicas = append(replicas, start(t, server.Config{DatabaseURL: db, RateLimits: limits}))
	}
	lb := testserver.Nginx(t, replicas...)
	api := replicas[0]
	acct := newAccount(t, api, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
	via := func(method, path string, body any) map[string]any {
		t.Helper()
		c := *api.Client
		c.BaseURL = "http://" + lb
		r := c.Do(method, path, body, acct.header())
		if r.StatusCode >= 300 {
			t.Fatalf("%s %s through nginx: %d %s", method, path, r.StatusCode, r.Body)
		}
		return r.JSON()["data"].(map[string]any)
	}
	bundle := via("POST", "/v1/bundles", uploadBody(acct.project, siteSaying("balanced")))["bundleId"]
	host := api.Service().PreviewHost("balanced", acct.project)
	launched := via("POST", "/v1/projects/"+acct.project+"/launch", map[string]any{"name": "balanced", "target": "edge", "bundleId": bundle})
	waitTask(t, api, acct, launched["taskId"].(string), "succeeded")
	for i, r := range replicas {
		if d := within(t, r, host, 200, time.Now()); d > time.Second {
			t.Fatalf("replica %d served the launch after %s", i+1, d)
		}
	}
	lbGet := func() int {
		req, _ := http.NewRequest("GET", "http://"+lb+"/", nil)
		req.Host = host
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for range 6 {
		if code := lbGet(); code != 200 {
			t.Fatalf("through nginx: %d", code)
		}
	}
	td := via("POST", "/v1/services/"+launched["serviceId"].(string)+"/teardown", nil)
	waitTask(t, api, acct, td["taskId"].(string), "succeeded")
	stopped := time.Now()
	for i, r := range replicas {
		if d := within(t, r, host, 404, stopped); d > time.Second {
			t.Fatalf("replica %d stopped serving after %s", i+1, d)
		}
	}
	for range 6 {
		if code := lbGet(); code != 404 {
			t.Fatalf("through nginx after the teardown: %d", code)
		}
	}

	// The rate limit holds across the three: nginx spreads the requests,
	// and the total allowed over the window is at most the limit plus one
	// burst.
	began, allowed := time.Now(), 0
	for i := range 30 {
		res, err := http.Get(fmt.Sprintf("http://%s/v1/domains/search?q=balanced%d", lb, i))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode == 200 {
			allowed++
		}
	}
	if most := 5 + int(2*time.Since(began).Seconds()) + 1; allowed > most || allowed < 5 {
		t.Fatalf("%d searches allowed through three replicas; between 5 and %d", allowed, most)
	}
}

// An operator's deployment, end to end: a throwaway PostgreSQL, three
// `pier server` processes from the built binary (each its own data
// directory, one --database-url) and Debian's nginx in front. It shows
// that what one replica launches every replica serves within a second of
// the task's success, that a teardown stops on all three within a second,
// that a rate limit holds across the three, that PostgreSQL restarting
// under them costs no replica a restart, and that SIGKILL of the replica
// running a launch leaves the launch to another, charged once.
func TestScaleOutAsAnOperatorRunsIt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three servers as separate processes behind nginx")
	}
	began := time.Now()
	c := startScaleOut(t, began)
	c.launchIsServedByEveryReplica()
	c.teardownStopsOnEveryReplica()
	c.rateLimitHoldsAcrossReplicas()
	c.replicasSurvivePostgresRestart()
	c.killedReplicasLaunchFinishesElsewhere()
	t.Logf("the whole run took %s", time.Since(began).Round(time.Millisecond))
}

// The rate limit every replica of the scale-out cluster is given.
const scaleOutPerSecond, scaleOutBurst = 2, 5

// scaleOutCluster is three `pier server` processes on one PostgreSQL
// behind nginx, with an API key for the project they share.
type scaleOutCluster struct {
	t        *testing.T
	db       string
	h        http.Header
	project  string
	replicas []*process
	addrs    []string
	lb       string
	viaLB    *contracttest.Client
	web      *http.Client
	// everyReplica lists the three replicas and nginx, for allAnswer.
	everyReplica []scaleOutTarget
}

type scaleOutTarget struct{ name, addr string }

func startScaleOut(t *testing.T, began time.Time) *scaleOutCluster {
	t.Helper()
	db := testpg.NewDatabase(t)
	bin, err := pierBinary()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL and the binary ready after %s", time.Since(began).Round(time.Millisecond))
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	out, err := exec.Command(bin, "admin", "create-key", "--data-dir", dirs[0], "--database-url", db,
		"--scopes", "read,quote,launch,buy_domain", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var key struct{ APIKey string }
	json.Unmarshal(out, &key)
	c := &scaleOutCluster{t: t, db: db, h: http.Header{"Authorization": {"Bearer " + key.APIKey}}, web: &http.Client{Timeout: 2 * time.Second}}

	// The job timeout is the default 2 minutes: a live replica takes a
	// dead one's task over once its lease (10 s, renewed while it runs)
	// runs out, at its next 5 s sweep. Every replica holds a launch after
	// it registered its domain; launches without a domain skip that step
	// and run through.
	flags := []string{"--database-url", db, "--preview-domain", "localhost",
		"--rate-limit", fmt.Sprintf("search=%d:%d", scaleOutPerSecond, scaleOutBurst)}
	pause := "PIER_TEST_PAUSE_AFTER_STEP=" + service.StepRegister
	for _, dir := range dirs {
		p := startProcessArgs(t, bin, dir, flags, pause)
		c.replicas = append(c.replicas, p)
		c.addrs = append(c.addrs, strings.TrimPrefix(p.url, "http://"))
	}
	c.lb = testserver.NginxAddrs(t, c.addrs...)
	t.Logf("three replicas and nginx up after %s", time.Since(began).Round(time.Millisecond))
	c.viaLB = &contracttest.Client{T: t, BaseURL: "http://" + c.lb}
	c.project = c.api(0).Do("GET", "/v1/projects", nil, c.h).JSON()["data"].(map[string]any)["projects"].([]any)[0].(map[string]any)["id"].(string)
	c.everyReplica = []scaleOutTarget{{"replica 1", c.addrs[0]}, {"replica 2", c.addrs[1]}, {"replica 3", c.addrs[2]}, {"nginx", c.lb}}
	return c
}

// api is a client of replica i's own URL.
func (c *scaleOutCluster) api(i int) *contracttest.Client {
	return &contracttest.Client{T: c.t, BaseURL: c.replicas[i].url}
}

func (c *scaleOutCluster) hostFor(name string) string {
	return name + "--" + strings.ReplaceAll(strings.ToLower(c.project), "_", "-") + ".localhost"
}

// status answers the status of GET / for host at addr, or 0 when the
// request fails.
func (c *scaleOutCluster) status(addr, host string) int {
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Host = host
	res, err := c.web.Do(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// allAnswer polls every target until each answers host with want, and
// fails unless each did within limit of since: one clock for all.
func (c *scaleOutCluster) allAnswer(what, host string, want int, since time.Time, limit time.Duration) {
	c.t.Helper()
	took := map[string]time.Duration{}
	for len(took) < len(c.everyReplica) && time.Since(since) < limit+5*time.Second {
		for _, tg := range c.everyReplica {
			if _, done := took[tg.name]; !done && c.status(tg.addr, host) == want {
				took[tg.name] = time.Since(since)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, tg := range c.everyReplica {
		d, ok := took[tg.name]
		switch {
		case !ok:
			c.t.Fatalf("%s: %s never answered %d for %s", what, tg.name, want, host)
		case d > limit:
			c.t.Fatalf("%s: %s answered %d after %s, more than %s after the task succeeded", what, tg.name, want, d.Round(time.Millisecond), limit)
		}
	}
	c.t.Logf("%s: %v", what, took)
}

// nginxAnswers sends a few requests through nginx, which spreads them
// over the replicas, and wants each answered alike.
func (c *scaleOutCluster) nginxAnswers(what, host string, want int) {
	c.t.Helper()
	for i := range 6 {
		if code := c.status(c.lb, host); code != want {
			c.t.Fatalf("%s: request %d through nginx answered %d, want %d", what, i+1, code, want)
		}
	}
}

// noReplicaServes wants each replica to answer 404 for host, so that it
// remembers the host has no site before the launch.
func (c *scaleOutCluster) noReplicaServes(host string, replicas ...int) {
	c.t.Helper()
	for _, i := range replicas {
		if code := c.status(c.addrs[i], host); code != 404 {
			c.t.Fatalf("before the launch replica %d answered %d", i+1, code)
		}
	}
}

// succeeded polls a task until it succeeds and answers when: the
// earlier of when the poll saw it and when its last step completed.
func (c *scaleOutCluster) succeeded(api *contracttest.Client, taskID string, d time.Duration) time.Time {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		task := api.Do("GET", "/v1/tasks/"+taskID, nil, c.h).JSON()["data"].(map[string]any)
		seen := time.Now()
		switch task["state"] {
		case "succeeded":
			var last time.Time
			for _, s := range task["steps"].([]any) {
				if at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(s.(map[string]any)["completedAt"])); err == nil && at.After(last) {
					last = at
				}
			}
			if !last.IsZero() && last.Before(seen) {
				return last
			}
			return seen
		case "failed", "canceled":
			c.t.Fatalf("task %s %s: %v", taskID, task["state"], task)
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatalf("task %s did not succeed within %s", taskID, d)
	return time.Time{}
}

// launch uploads a site saying name and launches it through api.
func (c *scaleOutCluster) launch(api *contracttest.Client, name string, extra map[string]any) map[string]any {
	c.t.Helper()
	r := api.Do("POST", "/v1/bundles", uploadBody(c.project, siteSaying(name)), c.h)
	if r.StatusCode != 201 {
		c.t.Fatalf("upload: %d %s", r.StatusCode, r.Body)
	}
	body := map[string]any{"name": name, "target": "edge", "bundleId": r.JSON()["data"].(map[string]any)["bundleId"]}
	for k, v := range extra {
		body[k] = v
	}
	r = api.Do("POST", "/v1/projects/"+c.project+"/launch", body, c.h)
	if r.StatusCode != 202 {
		c.t.Fatalf("launch %s: %d %s", name, r.StatusCode, r.Body)
	}
	return r.JSON()["data"].(map[string]any)
}

// A launch through replica 1's own URL is served by replicas 2 and 3
// within 1 s of its success. Both have already been asked for the host
// and remember that it has no site.
func (c *scaleOutCluster) launchIsServedByEveryReplica() {
	c.t.Helper()
	one := c.hostFor("one")
	c.noReplicaServes(one, 1, 2)
	l1 := c.launch(c.api(0), "one", nil)
	done := c.succeeded(c.api(0), l1["taskId"].(string), 20*time.Second)
	c.allAnswer("launch through replica 1", one, 200, done, time.Second)
	c.nginxAnswers("launch through replica 1", one, 200)
}

// A teardown (of a site launched through nginx) stops it on all three
// within 1 s of the teardown's success.
func (c *scaleOutCluster) teardownStopsOnEveryReplica() {
	c.t.Helper()
	two := c.hostFor("two")
	l2 := c.launch(c.viaLB, "two", nil)
	c.succeeded(c.viaLB, l2["taskId"].(string), 20*time.Second)
	c.allAnswer("launch through nginx", two, 200, time.Now(), 2*time.Second)
	td := c.viaLB.Do("POST", "/v1/services/"+l2["serviceId"].(string)+"/teardown", nil, c.h)
	if td.StatusCode != 202 {
		c.t.Fatalf("teardown: %d %s", td.StatusCode, td.Body)
	}
	done := c.succeeded(c.viaLB, td.JSON()["data"].(map[string]any)["taskId"].(string), 20*time.Second)
	c.allAnswer("teardown", two, 404, done, time.Second)
	c.nginxAnswers("teardown", two, 404)
	c.nginxAnswers("the other site after the teardown", c.hostFor("one"), 200)
}

// The rate limit holds across the three: searches sent round-robin to
// the replicas for a window are allowed at most the limit over the
// window plus one burst, and every replica refuses its share.
func (c *scaleOutCluster) rateLimitHoldsAcrossReplicas() {
	t := c.t
	t.Helper()
	window := 1500 * time.Millisecond
	allowed, refused := 0, make([]int, 3)
	windowStart := time.Now()
	for i := 0; time.Since(windowStart) < window && i < 500; i++ {
		res, err := c.web.Get(fmt.Sprintf("%s/v1/domains/search?q=scale%d", c.replicas[i%3].url, i))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		switch res.StatusCode {
		case 200:
			allowed++
		case 429:
			refused[i%3]++
		default:
			t.Fatalf("search on replica %d: %d", i%3+1, res.StatusCode)
		}
		time.Sleep(10 * time.Millisecond)
	}
	elapsed := time.Since(windowStart)
	most := scaleOutBurst + int(math.Ceil(scaleOutPerSecond*elapsed.Seconds()))
	t.Logf("rate limit: %d allowed in %s across three replicas (at most %d), refused per replica %v", allowed, elapsed.Round(time.Millisecond), most, refused)
	if allowed > most || allowed < scaleOutBurst {
		t.Fatalf("%d searches allowed in %s across three replicas; want between %d and %d", allowed, elapsed, scaleOutBurst, most)
	}
	for i, n := range refused {
		if n == 0 {
			t.Fatalf("replica %d refused nothing: %v", i+1, refused)
		}
	}
}

// PostgreSQL restarts under the three. Every replica answers the API and
// serves sites again without a restart of its own, and its invalidation
// listener is back: a launch afterwards is served by all three within 1 s.
func (c *scaleOutCluster) replicasSurvivePostgresRestart() {
	t := c.t
	t.Helper()
	sqlDB, err := sql.Open("pgx", c.db)
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	listeners := func() int {
		var n int
		sqlDB.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN pier_invalidate'`).Scan(&n)
		return n
	}
	if n := listeners(); n != 3 {
		t.Fatalf("%d replicas listen for invalidations before the restart, want 3", n)
	}
	restarted := time.Now()
	testpg.Restart(t)
	t.Logf("PostgreSQL restarted in %s", time.Since(restarted).Round(time.Millisecond))
	c.everyReplicaAnswersTheAPI(20 * time.Second)
	c.allAnswer("the site from before the restart", c.hostFor("one"), 200, time.Now(), 10*time.Second)
	for deadline := time.Now().Add(20 * time.Second); listeners() != 3; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d invalidation listeners are back 20 s after the restart, want 3", listeners())
		}
	}
	t.Logf("every replica recovered %s after the restart began", time.Since(restarted).Round(time.Millisecond))
	three := c.hostFor("three")
	c.noReplicaServes(three, 0, 1, 2)
	l3 := c.launch(c.viaLB, "three", nil)
	done := c.succeeded(c.viaLB, l3["taskId"].(string), 20*time.Second)
	c.allAnswer("launch after the restart", three, 200, done, time.Second)
}

// everyReplicaAnswersTheAPI polls each replica's API until it answers 200,
// for at most d each.
func (c *scaleOutCluster) everyReplicaAnswersTheAPI(d time.Duration) {
	c.t.Helper()
	for i := range c.replicas {
		deadline := time.Now().Add(d)
		for {
			r := c.api(i).Do("GET", "/v1/projects", nil, c.h)
			if r.StatusCode == 200 {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("replica %d answers %d after the restart: %s", i+1, r.StatusCode, r.Body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// SIGKILL of the replica running a launch that buys a domain, held after
// its registration: another replica's River rescues the task and finishes
// it, with one charge and one purchase.
func (c *scaleOutCluster) killedReplicasLaunchFinishesElsewhere() {
	t := c.t
	t.Helper()
	domain := availableDomains(1, "dev", "scaleout")[0]
	quote := c.api(0).Do("POST", "/v1/quotes", domainQuote(c.project, domain, 1), c.h).JSON()["data"].(map[string]any)
	l4 := c.launch(c.api(0), "four", map[string]any{"domain": domain, "quoteId": quote["quoteId"]})
	victim := c.replicaPausedAfter(service.StepRegister, 30*time.Second)
	c.replicas[victim].kill(t)
	killed := time.Now()
	survivor := c.api((victim + 1) % 3)
	task := finished(survivor, c.h, l4["taskId"].(string), 30*time.Second)
	if task["state"] != "succeeded" {
		t.Fatalf("30 s after replica %d was killed the task is %v: %v", victim+1, task["state"], task)
	}
	t.Logf("replica %d was killed holding the launch; another finished it %s later", victim+1, time.Since(killed).Round(time.Millisecond))
	c.chargedOnce(survivor, quote["amountUsd"])
	st, err := store.Open(context.Background(), "", c.db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if n, _ := st.Domains().CountPurchases(context.Background(), domain); n != 1 {
		t.Fatalf("the registrar sold %s %d times", domain, n)
	}
	c.nginxAnswers("the launch finished by another replica", c.hostFor("four"), 200)
}

// replicaPausedAfter waits for a replica to log that it paused after step
// and answers which one did.
func (c *scaleOutCluster) replicaPausedAfter(step string, d time.Duration) int {
	c.t.Helper()
	paused := regexp.MustCompile(`paused at step boundary.*step=` + step)
	victim := -1
	for deadline := time.Now().Add(d); victim < 0; time.Sleep(20 * time.Millisecond) {
		for i, p := range c.replicas {
			p.mu.Lock()
			if paused.MatchString(p.log.String()) {
				victim = i
			}
			p.mu.Unlock()
		}
		if victim < 0 && time.Now().After(deadline) {
			c.t.Fatal("no replica paused the launch after registering its domain")
		}
	}
	return victim
}

// chargedOnce wants the project charged the quoted amount, nothing held,
// and one consume_quote in the ledger.
func (c *scaleOutCluster) chargedOnce(api *contracttest.Client, quoted any) {
	c.t.Helper()
	proj := api.Do("GET", "/v1/projects/"+c.project, nil, c.h).JSON()["data"].(map[string]any)
	if proj["spentUsd"] != quoted || proj["heldUsd"] != 0.0 {
		c.t.Fatalf("charged %v (held %v), quoted %v", proj["spentUsd"], proj["heldUsd"], quoted)
	}
	consumes := 0
	for _, e := range api.Do("GET", "/v1/ledger?limit=1000", nil, c.h).JSON()["data"].(map[string]any)["entries"].([]any) {
		if e.(map[string]any)["action"] == "consume_quote" {
			consumes++
		}
	}
	if consumes != 1 {
		c.t.Fatalf("%d charges in the ledger, want 1", consumes)
	}
}
