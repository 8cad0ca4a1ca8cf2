package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"testing"

	"github.com/pierhq/pier/internal/testkit/testserver"
	"github.com/pierhq/pier/sdk"
	"github.com/pierhq/pier/server"
)

// baseURL is a real Pier started for the examples; in your code it is
// os.Getenv("PIER_BASE_URL") or "http://localhost:8080".
var baseURL string

func TestMain(m *testing.M) {
	dir, _ := os.MkdirTemp("", "pier-sdk-example-")
	s, stop, err := testserver.Serve(server.Config{DataDir: dir, HTTPAddr: "127.0.0.1:0"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	baseURL = "http://" + s.Addr()
	code := m.Run()
	stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

func ExampleClient_SearchDomains() {
	client, err := sdk.NewClient(baseURL)
	if err != nil {
		log.Fatal(err)
	}
	maxPrice := 20.0
	res, err := client.SearchDomains(context.Background(), &sdk.SearchDomainsParams{
		Q:                    "acme",
		TldAllowlist:         &[]sdk.Tld{"dev", "com", "io"},
		MaxFirstYearPriceUsd: &maxPrice,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("tlds:", res.Data.AppliedFilters.Tlds)
	for _, c := range res.Data.Candidates {
		fmt.Printf("%s available=%t first year $%.2f\n", c.Domain, c.Available, *c.FirstYearPriceUsd)
	}
	// Output:
	// tlds: [dev com io]
	// acme.dev available=true first year $12.00
	// acme.com available=false first year $11.25
}

func ExampleClient_Estimate() {
	client, err := sdk.NewClient(baseURL)
	if err != nil {
		log.Fatal(err)
	}
	requests := 2_000_000
	res, err := client.Estimate(context.Background(), sdk.EstimateRequest{
		Workload:        sdk.WorkloadDatabaseBackedApp,
		MonthlyRequests: &requests,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s at $%.2f a month (%s)\n", res.Data.SelectedTarget, res.Data.MonthlyUsd, res.Data.SelectionReason)
	// Output:
	// process at $22.00 a month (cheapest_capable)
}

func ExampleError() {
	client, _ := sdk.NewClient(baseURL)
	target := sdk.TargetNameEdge
	_, err := client.Estimate(context.Background(), sdk.EstimateRequest{Workload: sdk.WorkloadDynamicService, Target: &target})
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.StatusCode, apiErr.BlockedBy, apiErr.Retryable, len(apiErr.Actions) > 0)
	}
	// Output:
	// 422 plan:target_incapable false true
}
