package testserver

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Nginx runs Debian's nginx in front of the replicas' HTTP listeners,
// as an operator would (HTTP/1.1 upstream, X-Forwarded-For appended with
// the client's address), and answers its address. PIER_TEST_NGINX=require
// (CI) fails instead of skipping when nginx is missing.
func Nginx(t testing.TB, replicas ...*Server) string {
	t.Helper()
	addrs := make([]string, len(replicas))
	for i, r := range replicas {
		addrs[i] = r.Addr()
	}
	return NginxAddrs(t, addrs...)
}

// NginxAddrs is Nginx in front of HTTP listeners given by address
// (host:port), such as replicas running as processes of their own.
func NginxAddrs(t testing.TB, addrs ...string) string {
	t.Helper()
	return NginxWith(t, NginxOptions{}, addrs...)
}

// NginxIn is nginx listening on listen (host:port) in the bound network
// namespace netns (a path such as /run/netns/NAME; empty for this
// process's own), entered with nsenter, as on a machine of its own in
// front of replicas at addrs.
func NginxIn(t testing.TB, netns, listen string, addrs ...string) string {
	t.Helper()
	return NginxWith(t, NginxOptions{Netns: netns, Listen: listen}, addrs...)
}

// NginxOptions tune the nginx NginxWith runs, as an operator would for
// throughput, and where it runs. The zero value is Nginx's: one worker, a
// new upstream connection for every request, on a free loopback port.
type NginxOptions struct {
	// Workers is worker_processes (0: 1).
	Workers int
	// Keepalive is how many idle connections each worker keeps to the
	// replicas (nginx's upstream keepalive); 0 keeps none.
	Keepalive int
	// Netns is the bound network namespace nginx runs in (empty: this
	// process's), and Listen its address there (empty: a free loopback
	// port).
	Netns, Listen string
}

// NginxWith is NginxAddrs with opts.
func NginxWith(t testing.TB, opts NginxOptions, addrs ...string) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin = "/usr/sbin/nginx"
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("PIER_TEST_NGINX") == "require" || os.Getenv("CI") == "true" {
			t.Fatal("nginx is not installed (.ci/run installs nginx-light)")
		}
		t.Skip("nginx is not installed; set PIER_TEST_NGINX=require to fail instead")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	addr := opts.Listen
	if addr == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = ln.Addr().String()
		ln.Close()
	}
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), nginxConf(dir, addr, opts, addrs), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"))
	if opts.Netns != "" {
		cmd = exec.Command("nsenter", "--net="+opts.Netns, bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"))
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// SIGTERM: the master ends its workers, which a SIGKILL of the
		// master would leave running.
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
	t.Fatalf("nginx did not start: %s", b)
	return ""
}

// nginxConf is the configuration of an nginx in dir listening on addr in
// front of addrs.
func nginxConf(dir, addr string, opts NginxOptions, addrs []string) []byte {
	var upstream strings.Builder
	for _, a := range addrs {
		fmt.Fprintf(&upstream, "    server %s;\n", a)
	}
	// Without upstream keepalive nginx asks each replica to close.
	connection := "close"
	if opts.Keepalive > 0 {
		fmt.Fprintf(&upstream, "    keepalive %d;\n", opts.Keepalive)
		connection = ""
	}
	return fmt.Appendf(nil, `daemon off;
worker_processes %[4]d;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  upstream pier {
%[2]s  }
  server {
    listen %[3]s;
    location / {
      proxy_pass http://pier;
      proxy_http_version 1.1;
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header Connection "%[5]s";
      proxy_next_upstream error timeout;
    }
  }
}
`, dir, upstream.String(), addr, max(opts.Workers, 1), connection)
}
