// Command proxy is net/http/httputil's ReverseProxy set up as Pier's edge
// sets up its proxy to a process (the same upstream transport, Host kept,
// X-Forwarded-* set, a flush after every write), in front of one address:
// the peer that tells the cost of a Go reverse proxy hop from the cost of
// what Pier adds around it (routing by Host, the edge's lookup, logging).
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18191", "listen address")
	to := flag.String("to", "", "upstream host:port")
	flush := flag.Duration("flush", -1, "ReverseProxy.FlushInterval (Pier's edge: -1, a flush after every write)")
	flag.Parse()
	if *to == "" {
		log.Fatal("-to is required")
	}
	target := &url.URL{Scheme: "http", Host: *to}
	log.Fatal(http.ListenAndServe(*addr, &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          4096,
			MaxIdleConnsPerHost:   512,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: 5 * time.Minute,
			ExpectContinueTimeout: time.Second,
			DisableCompression:    true,
		},
		FlushInterval: *flush,
	}))
}
