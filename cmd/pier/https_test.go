package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
)

// httpsget CAFILE URL fetches URL over HTTPS from the test server's TLS
// listener, trusting only the CA in CAFILE, and writes the body to stdout.
// URL may be "stdout" for the first line of the last command's stdout.
// Like curl --cacert against a *.localhost name, without needing a resolver.
func httpsget(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: httpsget CAFILE URL|stdout")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(ts.ReadFile(args[0]))) {
		ts.Fatalf("%s holds no certificate", args[0])
	}
	url := args[1]
	if url == "stdout" {
		url = strings.TrimSpace(strings.SplitN(ts.ReadFile("stdout"), "\n", 2)[0])
	}
	addr := ts.Getenv("PIER_TEST_HTTPS_ADDR")
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	resp, err := client.Get(url)
	if err == nil && resp.StatusCode != 200 {
		err = &statusError{resp.StatusCode}
	}
	if neg {
		if err == nil {
			ts.Fatalf("httpsget %s succeeded", url)
		}
		return
	}
	if err != nil {
		ts.Fatalf("httpsget %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	ts.Stdout().Write(body)
}

type statusError struct{ code int }

func (e *statusError) Error() string { return http.StatusText(e.code) }
