package server_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/pierhq/pier/server"
	"github.com/pierhq/pier/server/internal/service"
)

// launchSite launches an edge site with no domain and returns its service.
func launchSite(t *testing.T, ts *testServer, a account, name, words string) string {
	t.Helper()
	r := ts.Client.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": name, "target": "edge", "bundleId": upload(t, ts, a, siteSaying(words))}, a.header())
	if r.StatusCode != 202 {
		t.Fatalf("launch %s: %d %s", name, r.StatusCode, r.Body)
	}
	task := waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	return task["serviceId"].(string)
}

// domainService is the service that serves domain, from get_domain.
func domainService(t *testing.T, ts *testServer, a account, domain string) string {
	t.Helper()
	d := ts.Client.Do("GET", "/v1/domains/"+domain, nil, a.header()).JSON()["data"].(map[string]any)
	id, _ := d["serviceId"].(string)
	return id
}

func toolOf(action any) (string, map[string]any) {
	a := action.(map[string]any)
	args, _ := a["arguments"].(map[string]any)
	tool, _ := a["tool"].(string)
	return tool, args
}

// A domain moves between services: attach refuses while another service
// holds it, naming that service and the detach and attach that move it;
// detach and attach answer with undos that reverse each other; DNS and the
// edge follow; the zone's mail records stay throughout.
func TestDomainsAttachDetach(t *testing.T) {
	engines(t, func(t *testing.T, db string) {
		ts := start(t, server.Config{DatabaseURL: db})
		a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
		c := ts.Client
		domain, _ := mailDomain(t, ts, a, "move")
		first := domainService(t, ts, a, domain)
		second := launchSite(t, ts, a, "second", "second site")

		r := c.Do("PUT", "/v1/domains/"+domain+"/service", map[string]any{"serviceId": second}, a.header())
		if r.StatusCode != 409 || r.JSON()["blockedBy"] != "conflict:domain_attached" || !strings.Contains(r.JSON()["message"].(string), first) {
			t.Fatalf("attach of a held domain: %d %s", r.StatusCode, r.Body)
		}
		acts := r.JSON()["actions"].([]any)
		if tool, args := toolOf(acts[0]); tool != "detach_domain" || args["domain"] != domain {
			t.Fatalf("first action: %v", acts[0])
		}
		if tool, args := toolOf(acts[1]); tool != "attach_domain" || args["domain"] != domain || args["serviceId"] != second {
			t.Fatalf("second action: %v", acts[1])
		}

		r = c.Do("DELETE", "/v1/domains/"+domain+"/service", nil, a.header())
		if r.StatusCode != 200 {
			t.Fatalf("detach: %d %s", r.StatusCode, r.Body)
		}
		data := r.JSON()["data"].(map[string]any)
		if tool, args := toolOf(data["undo"].(map[string]any)["command"]); data["state"] != "detached" || data["previousServiceId"] != first ||
			tool != "attach_domain" || args["serviceId"] != first {
			t.Fatalf("detach answer: %s", r.Body)
		}
		if rrs := dnsAnswer(t, ts, domain, dns.TypeA); len(rrs) != 0 {
			t.Fatalf("A after detach: %v", rrs)
		}
		if mx := dnsAnswer(t, ts, domain, dns.TypeMX); len(mx) != 1 {
			t.Fatalf("MX after detach: %v", mx)
		}
		if body, _, _ := hostBody(t, ts, domain); strings.Contains(body, "mail") {
			t.Fatalf("the detached domain still serves the first site: %q", body)
		}

		r = c.Do("PUT", "/v1/domains/"+domain+"/service", map[string]any{"serviceId": second}, a.header())
		if r.StatusCode != 200 {
			t.Fatalf("attach: %d %s", r.StatusCode, r.Body)
		}
		data = r.JSON()["data"].(map[string]any)
		if tool, args := toolOf(data["undo"].(map[string]any)["command"]); data["state"] != "attached" || data["serviceId"] != second ||
			tool != "detach_domain" || args["domain"] != domain {
			t.Fatalf("attach answer: %s", r.Body)
		}
		if rrs := dnsAnswer(t, ts, domain, dns.TypeA); len(rrs) != 1 {
			t.Fatalf("A after attach: %v", rrs)
		}
		if mx := dnsAnswer(t, ts, domain, dns.TypeMX); len(mx) != 1 {
			t.Fatalf("MX after attach: %v", mx)
		}
		for _, h := range []string{domain, "www." + domain} {
			if body, tlsBody, err := hostBody(t, ts, h); !strings.Contains(body, "second site") || err != nil || !strings.Contains(tlsBody, "second site") {
				t.Fatalf("%s after attach: %q %q %v", h, body, tlsBody, err)
			}
		}
		if got := domainService(t, ts, a, domain); got != second {
			t.Fatalf("get_domain names %q, want %s", got, second)
		}
		// Attaching it where it is answers the same.
		if r := c.Do("PUT", "/v1/domains/"+domain+"/service", map[string]any{"serviceId": second}, a.header()); r.StatusCode != 200 {
			t.Fatalf("attach again: %d %s", r.StatusCode, r.Body)
		}
	})
}

// Another organisation's domain is invisible: attach and detach answer it
// exactly as they answer a name nobody bought.
func TestDomainsAttachOtherOrganisation(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	b := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	c := ts.Client
	domain := availableDomains(1, "dev", "theirs")[0]
	q := c.Do("POST", "/v1/quotes", domainQuote(a.project, domain, 1), a.header()).JSON()["data"].(map[string]any)["quoteId"]
	r := c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "site", "target": "edge", "bundleId": upload(t, ts, a, siteSaying("A")), "domain": domain, "quoteId": q}, a.header())
	waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	bsvc := launchSite(t, ts, b, "site", "B")
	nobody := availableDomains(1, "dev", "nobodys")[0]

	same := func(what string, theirs, none func(d string) (int, string)) {
		ts, tb := theirs(domain)
		ns, nb := none(nobody)
		if ts != 404 || ts != ns || strings.ReplaceAll(tb, domain, "D") != strings.ReplaceAll(nb, nobody, "D") {
			t.Fatalf("%s: another organisation's domain answers %d %s\nand a name nobody bought %d %s", what, ts, tb, ns, nb)
		}
	}
	same("attach", func(d string) (int, string) {
		r := c.Do("PUT", "/v1/domains/"+d+"/service", map[string]any{"serviceId": bsvc}, b.header())
		return r.StatusCode, string(r.Body)
	}, func(d string) (int, string) {
		r := c.Do("PUT", "/v1/domains/"+d+"/service", map[string]any{"serviceId": bsvc}, b.header())
		return r.StatusCode, string(r.Body)
	})
	same("detach", func(d string) (int, string) {
		r := c.Do("DELETE", "/v1/domains/"+d+"/service", nil, b.header())
		return r.StatusCode, string(r.Body)
	}, func(d string) (int, string) {
		r := c.Do("DELETE", "/v1/domains/"+d+"/service", nil, b.header())
		return r.StatusCode, string(r.Body)
	})
	if body, _, _ := hostBody(t, ts, domain); !strings.Contains(body, "A") || strings.Contains(body, "B") {
		t.Fatalf("A's domain serves %q", body)
	}
}

// Tearing a site down keeps the zone's mail records, which belong to the
// domain's email setup, and its receipt says so; a relaunch on the domain
// keeps them, and the leave package's zone has them.
func TestTeardownKeepsMailRecords(t *testing.T) {
	ts := start(t, server.Config{})
	a := newAccount(t, ts, 100_000_000, service.DefaultPolicy(), "launch", "read", "quote", "buy_domain")
	c := ts.Client
	domain, _ := mailDomain(t, ts, a, "keepmail")
	svc := domainService(t, ts, a, domain)

	r := c.Do("POST", "/v1/services/"+svc+"/teardown", nil, a.header())
	if r.StatusCode != 202 {
		t.Fatalf("teardown: %d %s", r.StatusCode, r.Body)
	}
	receipt := r.JSON()["data"].(map[string]any)["receipt"].(map[string]any)
	if kept, _ := receipt["kept"].([]any); len(kept) != 1 || kept[0] != "mail_records:"+domain {
		t.Fatalf("teardown receipt: %v", receipt)
	}
	task := waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	if kept, _ := task["result"].(map[string]any)["kept"].([]any); len(kept) != 1 || !strings.Contains(kept[0].(map[string]any)["what"].(string), "mail_records") {
		t.Fatalf("teardown result: %v", task["result"])
	}
	if kept, _ := task["receipt"].(map[string]any)["kept"].([]any); len(kept) != 1 {
		t.Fatalf("finished teardown's receipt: %v", task["receipt"])
	}
	checkMail := func(when string) {
		t.Helper()
		if mx := dnsAnswer(t, ts, domain, dns.TypeMX); len(mx) != 1 || mx[0].(*dns.MX).Mx != "mail."+domain+"." {
			t.Fatalf("MX %s: %v", when, mx)
		}
		if s := txt(dnsAnswer(t, ts, service.DKIMSelector+"._domainkey."+domain, dns.TypeTXT)); !strings.HasPrefix(s, "v=DKIM1") {
			t.Fatalf("DKIM %s: %q", when, s)
		}
		if s := txt(dnsAnswer(t, ts, "_dmarc."+domain, dns.TypeTXT)); !strings.HasPrefix(s, "v=DMARC1") {
			t.Fatalf("DMARC %s: %q", when, s)
		}
	}
	checkMail("after teardown")
	if rrs := dnsAnswer(t, ts, domain, dns.TypeA); len(rrs) != 0 {
		t.Fatalf("A after teardown: %v", rrs)
	}

	r = c.Do("POST", "/v1/projects/"+a.project+"/export", nil, a.header())
	if r.StatusCode != 200 {
		t.Fatalf("export: %d %s", r.StatusCode, r.Body)
	}
	zoneFile := ""
	for _, f := range r.JSON()["data"].(map[string]any)["files"].([]any) {
		f := f.(map[string]any)
		if f["path"] == "zones/"+domain+".zone" {
			b, _ := base64.StdEncoding.DecodeString(f["contentBase64"].(string))
			zoneFile = string(b)
		}
	}
	if !strings.Contains(zoneFile, "\tMX\t10 mail."+domain+".") || !strings.Contains(zoneFile, "v=DKIM1") || !strings.Contains(zoneFile, "_dmarc."+domain) {
		t.Fatalf("leave package zone:\n%s", zoneFile)
	}

	// Launching on the domain again (owned: no quote) keeps them.
	r = c.Do("POST", "/v1/projects/"+a.project+"/launch", map[string]any{"name": "again", "target": "edge", "bundleId": upload(t, ts, a, siteSaying("again")), "domain": domain}, a.header())
	if r.StatusCode != 202 {
		t.Fatalf("relaunch: %d %s", r.StatusCode, r.Body)
	}
	waitTask(t, ts, a, r.JSON()["data"].(map[string]any)["taskId"].(string), "succeeded")
	checkMail("after relaunch")
	if rrs := dnsAnswer(t, ts, domain, dns.TypeA); len(rrs) != 1 {
		t.Fatalf("A after relaunch: %v", rrs)
	}
}
