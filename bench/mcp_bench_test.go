package bench

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"
)

// mcpCall is what a stateless MCP client sends for one tool call once it has
// initialized: one POST, with the negotiated version in a header.
func mcpCall(b *testing.B, c *http.Client, url string, body []byte) []byte {
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-03-26")
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("POST /mcp: %d %s", resp.StatusCode, out)
	}
	return out
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

// BenchmarkMCPSearchDomains times tools/call search_domains against the same
// search as a REST GET, interleaved on one server, and reports the rate ratio
// (REST time / MCP time: 1.0 means MCP is as fast as REST) and the p50
// latency of each door.
func BenchmarkMCPSearchDomains(b *testing.B) {
	p := pierServer(b)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	const restPath = "/v1/domains/search?q=acme&tldAllowlist=com,dev,io&maxFirstYearPriceUsd=50"
	call := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_domains",` +
		`"arguments":{"q":"acme","tldAllowlist":["com","dev","io"],"maxFirstYearPriceUsd":50}}}`)

	rest := do(b, c, "GET", p.URL+restPath, nil)
	var answer struct {
		Result struct {
			IsError           bool            `json:"isError"`
			StructuredContent json.RawMessage `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(mcpCall(b, c, p.URL+"/mcp", call), &answer); err != nil || answer.Result.IsError {
		b.Fatalf("tools/call search_domains failed: %v %s", err, answer.Result.StructuredContent)
	}
	var a, r any
	json.Unmarshal(answer.Result.StructuredContent, &a)
	json.Unmarshal(rest, &r)
	if ab, _ := json.Marshal(a); !bytes.Equal(ab, must(json.Marshal(r))) {
		b.Fatalf("MCP and REST answers differ:\n%s\n%s", ab, rest)
	}

	restT := make([]time.Duration, 0, b.N)
	mcpT := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		do(b, c, "GET", p.URL+restPath, nil)
		t1 := time.Now()
		mcpCall(b, c, p.URL+"/mcp", call)
		t2 := time.Now()
		restT = append(restT, t1.Sub(t0))
		mcpT = append(mcpT, t2.Sub(t1))
	}
	b.StopTimer()
	var restSum, mcpSum time.Duration
	for i := range restT {
		restSum += restT[i]
		mcpSum += mcpT[i]
	}
	b.ReportMetric(float64(mcpSum.Nanoseconds())/float64(b.N), "mcp-ns/call")
	b.ReportMetric(float64(restSum.Nanoseconds())/float64(b.N), "rest-ns/req")
	b.ReportMetric(float64(restSum)/float64(mcpSum), "ratio")
	b.ReportMetric(float64(percentile(mcpT, 0.5).Microseconds()), "mcp-p50-µs")
	b.ReportMetric(float64(percentile(restT, 0.5).Microseconds()), "rest-p50-µs")
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
