package server_test

import (
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/miekg/dns"

	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// siteFiles is a small site: an index, a stylesheet, a page in a folder and
// a 404 page.
var siteFiles = map[string]string{
	"index.html":      "<!doctype html><title>Acme</title><link rel=stylesheet href=style.css><h1>Hello from Acme</h1>",
	"style.css":       "body { font-family: sans-serif; }\n" + strings.Repeat("h1 { color: #333; }\n", 40),
	"docs/index.html": "<h1>Docs</h1>",
	"about.html":      "<h1>About</h1>",
	"404.html":        "<h1>Not here</h1>",
	"assets/logo.svg": "<svg xmlns='http://www.w3.org/2000/svg'/>",
}

func uploadBody(project string, files map[string]string) map[string]any {
	var list []any
	for p, c := range files {
		list = append(list, map[string]any{"path": p, "contentBase64": base64.StdEncoding.EncodeToString([]byte(c))})
	}
	return map[string]any{"projectId": project, "files": list}
}

// httpsClient reaches the server's TLS listener for any host name, and
// trusts only the server's local CA.
func httpsClient(ts *testServer) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ts.CARootPEM())
	addr := ts.HTTPSAddr()
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
}

func waitTask(t *testing.T, ts *testServer, a account, id string, want string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var task map[string]any
	for time.Now().Before(deadline) {
		task = ts.Client.Do("GET", "/v1/tasks/"+id, nil, a.header()).JSON()["data"].(map[string]any)
		if task["state"] == want {
			return task
		}
		if task["state"] == "failed" && want != "failed" {
			t.Fatalf("task failed: %v", task)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("task %s never reached %s: %v", id, want, task)
	return nil
}

func TestUploadAssets(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read")
	r := ts.Client.Do("POST", "/v1/bundles", uploadBody(a.project, siteFiles), a.header())
	b := r.JSON()["data"].(map[string]any)
	if r.StatusCode != 201 || b["fileCount"] != 6.0 || b["deduplicated"] != false || b["newBlobs"] != 6.0 {
		t.Fatalf("%d %s", r.StatusCode, r.Body)
	}
	// The same files again are the same bundle, and store nothing new.
	b2 := ts.Client.Do("POST", "/v1/bundles", uploadBody(a.project, siteFiles), a.header()).JSON()["data"].(map[string]any)
	if b2["bundleId"] != b["bundleId"] || b2["deduplicated"] != true || b2["newBlobs"] != 0.0 {
		t.Fatalf("dedup: %v", b2)
	}
	for _, bad := range []string{"../etc/passwd", "/abs.html", "a//b.html", "a/./b.html", `a\b.html`, "", "x\x00.html", "a/../b.html"} {
		r := ts.Client.Do("POST", "/v1/bundles", uploadBody(a.project, map[string]string{bad: "x"}), a.header())
		if r.StatusCode != 400 || r.JSON()["blockedBy"] != "input:invalid" {
			t.Errorf("path %q: %d %s", bad, r.StatusCode, r.Body)
		}
	}
	r = ts.Client.Do("POST", "/v1/bundles", map[string]any{"projectId": a.project, "files": []any{map[string]any{"path": "a.html", "contentBase64": "!!"}}}, a.header())
	if r.StatusCode != 400 {
		t.Fatalf("bad base64: %d", r.StatusCode)
	}
}

func TestLaunchPreviewOverHTTPS(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
		bundle := ts.Client.Do("POST", "/v1/bundles", uploadBody(a.project, siteFiles), a.header()).JSON()["data"].(map[string]any)["bundleId"]
		done, host := launchPreview(t, ts, a, bundle)
		p := &previewSite{t: t, c: httpsClient(ts), host: host}
		p.servesStaticFiles()
		p.servesFoldersPrettyURLsAndHeaders()
		unknownHostsGetNothing(t, p.c)
		previewTeardownStopsServing(t, ts, a, host, done["serviceId"].(string))
	})
}

// launchPreview launches bundle without a domain and wants its preview
// ready over HTTPS, with teardown as its undo. It answers the finished
// task and the preview's host.
func launchPreview(t *testing.T, ts *testServer, a account, bundle any) (map[string]any, string) {
	t.Helper()
	r := ts.Client.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": bundle}, a.header())
	if r.StatusCode != 202 {
		t.Fatalf("launch: %d %s", r.StatusCode, r.Body)
	}
	task := r.JSON()["data"].(map[string]any)
	undo := task["undo"].(map[string]any)["command"].(map[string]any)
	if undo["tool"] != "teardown_service" {
		t.Fatalf("undo %v", undo)
	}
	done := waitTask(t, ts, a, task["taskId"].(string), "succeeded")
	if ready := done["httpsReady"].(map[string]any); ready["preview"] != true {
		t.Fatalf("https ready %v", ready)
	}
	preview := done["previewUrl"].(string)
	host := strings.Split(strings.TrimPrefix(preview, "https://"), ":")[0]
	if !strings.HasSuffix(host, ".localhost") || !strings.HasPrefix(host, "site--") {
		t.Fatalf("preview host %s", host)
	}
	return done, host
}

// previewSite gets paths of a preview host over HTTPS.
type previewSite struct {
	t    *testing.T
	c    *http.Client
	host string
}

func (p *previewSite) get(path string, h http.Header) *http.Response {
	p.t.Helper()
	req, _ := http.NewRequest("GET", "https://"+p.host+path, nil)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := p.c.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// servesStaticFiles wants the index under a certificate for the host, a
// 304 for its ETag, and CSS compressed with gzip or br as asked.
func (p *previewSite) servesStaticFiles() {
	t, host := p.t, p.host
	t.Helper()
	resp := p.get("/", nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "Hello from Acme") || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("index: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if resp.TLS == nil || resp.TLS.PeerCertificates[0].DNSNames[0] != host {
		t.Fatal("certificate does not name the preview host")
	}
	etag := resp.Header.Get("ETag")
	if r := p.get("/", http.Header{"If-None-Match": {etag}}); r.StatusCode != 304 {
		t.Fatalf("If-None-Match: %d", r.StatusCode)
	}
	css := p.get("/style.css", http.Header{"Accept-Encoding": {"gzip"}})
	if css.Header.Get("Content-Encoding") != "gzip" || css.Header.Get("Vary") != "Accept-Encoding" || !strings.HasPrefix(css.Header.Get("Content-Type"), "text/css") {
		t.Fatalf("gzip: %v", css.Header)
	}
	zr, err := gzip.NewReader(css.Body)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(zr); !strings.HasPrefix(string(b), "body {") {
		t.Fatal("gzip body")
	}
	br := p.get("/style.css", http.Header{"Accept-Encoding": {"gzip, br"}})
	if br.Header.Get("Content-Encoding") != "br" || br.Header.Get("ETag") != strings.TrimSuffix(css.Header.Get("ETag"), `-gzip"`)+`-br"` {
		t.Fatalf("br: %v", br.Header)
	}
	if b, _ := io.ReadAll(brotli.NewReader(br.Body)); !strings.HasPrefix(string(b), "body {") {
		t.Fatal("br body")
	}
}

// servesFoldersPrettyURLsAndHeaders wants folder indexes, pretty URLs,
// the site's 404 page and its headers file honoured.
func (p *previewSite) servesFoldersPrettyURLsAndHeaders() {
	t := p.t
	t.Helper()
	if r := p.get("/docs/", nil); r.StatusCode != 200 {
		t.Fatalf("folder index: %d", r.StatusCode)
	}
	if r := p.get("/about", nil); r.StatusCode != 200 {
		t.Fatalf("pretty URL: %d", r.StatusCode)
	}
	nf := p.get("/missing", nil)
	nb, _ := io.ReadAll(nf.Body)
	if nf.StatusCode != 404 || !strings.Contains(string(nb), "Not here") {
		t.Fatalf("404 page: %d %s", nf.StatusCode, nb)
	}
	if svg := p.get("/assets/logo.svg", nil); svg.Header.Get("Content-Type") != "image/svg+xml" || svg.Header.Get("Cache-Control") != "public, max-age=3600" {
		t.Fatalf("svg headers %v", svg.Header)
	}
}

// An unknown preview host gets the preview zone's wildcard and Pier's 404
// page; a name outside the zone gets no certificate.
func unknownHostsGetNothing(t *testing.T, c *http.Client) {
	t.Helper()
	req, _ := http.NewRequest("GET", "https://nobody.localhost/", nil)
	if resp, err := c.Do(req); err != nil || resp.StatusCode != 404 {
		t.Fatalf("an unknown preview host: %v", err)
	} else {
		resp.Body.Close()
	}
	req, _ = http.NewRequest("GET", "https://nobody.example/", nil)
	if _, err := c.Do(req); err == nil {
		t.Fatal("a certificate was issued for a host outside the preview zone with no site")
	}
}

// Teardown stops serving.
func previewTeardownStopsServing(t *testing.T, ts *testServer, a account, host, svcID string) {
	t.Helper()
	// Teardown stops serving.
	r := ts.Client.Do("POST", "/v1/services/"+svcID+"/teardown", nil, a.header())
	if r.StatusCode != 202 {
		t.Fatalf("teardown: %d %s", r.StatusCode, r.Body)
	}
	waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	plain := &http.Client{}
	hreq, _ := http.NewRequest("GET", "http://"+ts.Addr()+"/", nil)
	hreq.Host = host
	hresp, err := plain.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	hresp.Body.Close()
	if hresp.StatusCode != 404 {
		t.Fatalf("after teardown: %d", hresp.StatusCode)
	}
	// Over HTTPS the torn-down preview host still verifies against Pier's
	// CA, with a certificate for its own name: curl and browsers refuse
	// the preview zone's wildcard, *.localhost.
	p := &previewSite{t: t, c: httpsClient(ts), host: host}
	tresp := p.get("/", nil)
	if tresp.StatusCode != 404 || tresp.TLS == nil || len(tresp.TLS.PeerCertificates[0].DNSNames) != 1 || tresp.TLS.PeerCertificates[0].DNSNames[0] != host {
		t.Fatalf("torn-down preview host over HTTPS: %d, names %v", tresp.StatusCode, tresp.TLS.PeerCertificates[0].DNSNames)
	}
	curlVerifies(t, ts, host, true)
	// A name no service ever had is curl's to refuse: it gets the zone's
	// wildcard only.
	curlVerifies(t, ts, "nobody.localhost", false)
}

// curlVerifies fetches https://host/ from the test server's TLS listener
// with curl, trusting only Pier's CA, and requires that the handshake
// verifies (or, with ok false, that curl refuses the certificate). It
// skips without curl.
func curlVerifies(t *testing.T, ts *testServer, host string, ok bool) {
	t.Helper()
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Log("no curl: the handshake is checked with crypto/tls only")
		return
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, ts.CARootPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ts.HTTPSAddr())
	out, err := exec.Command(curl, "-sS", "-o", "/dev/null", "--cacert", ca, "--resolve", host+":"+port+":127.0.0.1", "https://"+host+":"+port+"/").CombinedOutput()
	if (err == nil) != ok {
		t.Fatalf("curl --cacert pier-ca.pem https://%s/: %v (want verified=%t)\n%s", host, err, ok, out)
	}
}

func TestLaunchWithDomain(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
	c := ts.Client
	domain := availableDomains(1, "dev", "launch")[0]
	bundle := c.Do("POST", "/v1/bundles", uploadBody(a.project, siteFiles), a.header()).JSON()["data"].(map[string]any)["bundleId"]
	quote := c.Do("POST", "/v1/quotes", domainQuote(a.project, domain, 1), a.header()).JSON()["data"].(map[string]any)["quoteId"]

	r := c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "www", "target": "edge", "bundleId": bundle, "domain": domain, "quoteId": quote}, a.header())
	if r.StatusCode != 202 || r.JSON()["data"].(map[string]any)["budgetRemainingUsd"] != 88.0 {
		t.Fatalf("launch: %d %s", r.StatusCode, r.Body)
	}
	taskID := r.JSON()["data"].(map[string]any)["taskId"].(string)
	// Without buy_domain, registration waits for a human.
	waiting := waitTask(t, ts, a, taskID, "input_required")
	approval := waiting["approvalUrl"].(string)
	if n, _ := ts.Store().Domains().CountPurchases(context.Background(), domain); n != 0 {
		t.Fatal("bought before the human decided")
	}
	gateID := approval[strings.LastIndex(approval, "/")+1:]
	if err := ts.Service().Approvals.Decide(context.Background(), service.Human{OrgID: a.org, UserID: "usr_a"}, gateID, true); err != nil {
		t.Fatal(err)
	}
	done := waitTask(t, ts, a, taskID, "succeeded")
	if done["domainUrl"] == nil || done["httpsReady"].(map[string]any)["domain"] != true {
		t.Fatalf("domain not ready: %v", done)
	}
	if n, _ := ts.Store().Domains().CountPurchases(context.Background(), domain); n != 1 {
		t.Fatalf("purchases %d", n)
	}
	zoneAnswersOverDNS(t, ts.DNSAddr(), domain)
	// The launched domain is served over HTTPS with a verified chain.
	resp, err := httpsClient(ts).Get("https://" + domain + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "Hello from Acme") {
		t.Fatalf("domain: %d %s", resp.StatusCode, body)
	}
	leavePackageCarriesTheZone(t, ts, a, domain)
	// Teardown keeps the registration and says so.
	svcID := done["serviceId"].(string)
	r = c.Do("POST", "/v1/services/"+svcID+"/teardown", nil, a.header())
	td := waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	if !strings.Contains(fmt.Sprint(td["result"]), "domain_registration") {
		t.Fatalf("teardown result %v", td["result"])
	}
	if n, _ := ts.Store().Domains().CountPurchases(context.Background(), domain); n != 1 {
		t.Fatal("teardown touched the registration")
	}
}

// The zone answers over real DNS queries, on UDP and TCP: A for www, the
// apex's records, NXDOMAIN with the SOA for a name it lacks, and REFUSED
// outside it.
func zoneAnswersOverDNS(t *testing.T, addr, domain string) {
	t.Helper()
	for _, netw := range []string{"udp", "tcp"} {
		cl := &dns.Client{Net: netw, Timeout: 2 * time.Second}
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn("www."+domain), dns.TypeA)
		in, _, err := cl.Exchange(m, addr)
		if err != nil {
			t.Fatal(err)
		}
		if !in.Authoritative || len(in.Answer) != 1 || in.Answer[0].(*dns.A).A.String() != "127.0.0.1" {
			t.Fatalf("%s answer %v", netw, in)
		}
	}
	for _, q := range []uint16{dns.TypeSOA, dns.TypeNS, dns.TypeAAAA, dns.TypeCAA} {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(domain), q)
		in, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, addr)
		if err != nil || len(in.Answer) == 0 {
			t.Fatalf("%s: %v %v", dns.TypeToString[q], in, err)
		}
	}
	m := new(dns.Msg)
	m.SetQuestion("nothing."+dns.Fqdn(domain), dns.TypeA)
	if in, _, _ := (&dns.Client{}).Exchange(m, addr); in.Rcode != dns.RcodeNameError || len(in.Ns) != 1 {
		t.Fatalf("NXDOMAIN with SOA: %v", in)
	}
	m.SetQuestion("example.org.", dns.TypeA)
	if in, _, _ := (&dns.Client{}).Exchange(m, addr); in.Rcode != dns.RcodeRefused {
		t.Fatalf("not authoritative: %v", in)
	}
}

// The leave package carries the zone as an RFC 1035 master file.
func leavePackageCarriesTheZone(t *testing.T, ts *testServer, a account, domain string) {
	t.Helper()
	c := ts.Client
	pkg := c.Do("POST", "/v1/projects/"+a.project+"/export", nil, a.header()).JSON()["data"].(map[string]any)
	zoneFound := false
	for _, f := range pkg["files"].([]any) {
		f := f.(map[string]any)
		if f["path"] == "zones/"+domain+".zone" {
			raw, _ := base64.StdEncoding.DecodeString(f["contentBase64"].(string))
			zp := dns.NewZoneParser(strings.NewReader(string(raw)), "", "")
			types := map[uint16]bool{}
			for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
				types[rr.Header().Rrtype] = true
			}
			if zp.Err() != nil || !types[dns.TypeSOA] || !types[dns.TypeNS] || !types[dns.TypeA] || !types[dns.TypeAAAA] || !types[dns.TypeCAA] {
				t.Fatalf("zone file %v: %s", zp.Err(), raw)
			}
			zoneFound = true
		}
	}
	if !zoneFound {
		t.Fatal("no zone file in the leave package")
	}
}

func TestLaunchDomainDeniedRefunds(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote")
	c := ts.Client
	domain := availableDomains(1, "dev", "denied")[0]
	bundle := c.Do("POST", "/v1/bundles", uploadBody(a.project, siteFiles), a.header()).JSON()["data"].(map[string]any)["bundleId"]
	quote := c.Do("POST", "/v1/quotes", domainQuote(a.project, domain, 1), a.header()).JSON()["data"].(map[string]any)["quoteId"]
	r := c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": bundle, "domain": domain, "quoteId": quote}, a.header())
	taskID := r.JSON()["data"].(map[string]any)["taskId"].(string)
	approval := waitTask(t, ts, a, taskID, "input_required")["approvalUrl"].(string)
	if err := ts.Service().Approvals.Decide(context.Background(), service.Human{OrgID: a.org, UserID: "u"}, approval[strings.LastIndex(approval, "/")+1:], false); err != nil {
		t.Fatal(err)
	}
	done := waitTask(t, ts, a, taskID, "succeeded")
	if done["httpsReady"].(map[string]any)["preview"] != true || done["domainUrl"] != nil {
		t.Fatalf("%v", done)
	}
	p := c.Do("GET", "/v1/projects/"+a.project, nil, a.header()).JSON()["data"].(map[string]any)
	if p["spentUsd"] != 0.0 || p["remainingUsd"] != 100.0 {
		t.Fatalf("refund: %v", p)
	}
	if n, _ := ts.Store().Domains().CountPurchases(context.Background(), domain); n != 0 {
		t.Fatal("a denied domain was bought")
	}
}

func TestLaunchWithBuyDomainSkipsGate(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	c := ts.Client
	domain := availableDomains(1, "com", "direct")[0]
	bundle := c.Do("POST", "/v1/bundles", uploadBody(a.project, siteFiles), a.header()).JSON()["data"].(map[string]any)["bundleId"]
	quote := c.Do("POST", "/v1/quotes", domainQuote(a.project, domain, 1), a.header()).JSON()["data"].(map[string]any)["quoteId"]
	r := c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": bundle, "domain": domain, "quoteId": quote}, a.header())
	waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	if n, _ := ts.Store().Domains().CountPurchases(context.Background(), domain); n != 1 {
		t.Fatalf("purchases %d", n)
	}
	// A launch without a quote for its domain is refused before anything happens.
	r = c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "other", "target": "edge", "bundleId": bundle, "domain": availableDomains(2, "com", "direct")[1]}, a.header())
	if r.StatusCode != 402 || r.JSON()["blockedBy"] != "budget:insufficient" {
		t.Fatalf("no quote: %d %s", r.StatusCode, r.Body)
	}
}
