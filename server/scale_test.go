package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/pierhq/pier/internal/testpg"
	"github.com/pierhq/pier/internal/testserver"
	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
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
