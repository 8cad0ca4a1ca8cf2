// Command httpwait waits until a URL answers 200 with a file's bytes, for
// bench/deploys.sh: it polls over one kept HTTPS connection every 2 ms,
// trusting only -cacert and dialling -addr whatever the URL's host, and
// exits 0 once the answer matches, 1 when -timeout passes first.
//
// It replaces a curl exec'd for every poll, whose own start and full TLS
// handshake (10 to 30 ms on the 2-core machine) were in every row the
// script timed.
//
//	httpwait -cacert ca.pem -addr 127.0.0.1:18097 https://host:18097/p/7.html site/p/7.html
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	cacert := flag.String("cacert", "", "PEM file of the only CA to trust")
	addr := flag.String("addr", "", "host:port to dial instead of the URL's host")
	timeout := flag.Duration("timeout", 60*time.Second, "give up after this long")
	flag.Parse()
	if flag.NArg() != 2 || *cacert == "" {
		fmt.Fprintln(os.Stderr, "usage: httpwait -cacert FILE [-addr HOST:PORT] [-timeout D] URL FILE")
		os.Exit(2)
	}
	if err := wait(*cacert, *addr, flag.Arg(0), flag.Arg(1), *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "httpwait:", err)
		os.Exit(1)
	}
}

func wait(cacert, addr, url, file string, timeout time.Duration) error {
	pem, err := os.ReadFile(cacert)
	if err != nil {
		return err
	}
	want, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return fmt.Errorf("%s holds no certificate", cacert)
	}
	var d net.Dialer
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			if addr != "" {
				a = addr
			}
			return d.DialContext(ctx, network, a)
		},
	}}
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		ok, why := matches(client, url, want)
		if ok {
			return nil
		}
		last = why
		time.Sleep(2 * time.Millisecond)
	}
	return fmt.Errorf("%s never answered 200 with %s's bytes within %s (last: %s)", url, file, timeout, last)
}

func matches(client *http.Client, url string, want []byte) (bool, string) {
	resp, err := client.Get(url)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(len(want))+1))
	if err != nil {
		return false, err.Error()
	}
	if resp.StatusCode != http.StatusOK {
		return false, resp.Status
	}
	if !bytes.Equal(body, want) {
		return false, "200 with other bytes"
	}
	return true, ""
}
