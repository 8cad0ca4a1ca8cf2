# Sourced by bench/edge.sh and bench/h2.sh, which serve the same static
# site from Pier's edge and from nginx.
#
#   static_site
#
# makes tmp (removed on exit, after the processes in pids are killed) and
# the site, site=$tmp/site: 1, 16, 32 and 64 KiB and 1 MiB of readable text, so every
# server treats them alike, and an index page.
static_site() {
  tmp=$(mktemp -d)
  pids=()
  trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
  site=$tmp/site
  mkdir -p "$site"
  head -c 768 /dev/urandom | base64 -w 0 | head -c 1024 >"$site/1k.txt"
  head -c 12288 /dev/urandom | base64 -w 0 | head -c 16384 >"$site/16k.txt"
  head -c 24576 /dev/urandom | base64 -w 0 | head -c 32768 >"$site/32k.txt"
  head -c 49152 /dev/urandom | base64 -w 0 | head -c 65536 >"$site/64k.txt"
  head -c 786432 /dev/urandom | base64 -w 0 | head -c 1048576 >"$site/1m.txt"
  echo '<!doctype html><title>bench</title>' >"$site/index.html"
  chmod 755 "$tmp"; chmod -R a+rX "$site" # nginx's worker runs as nobody
}

# The nginx peer serves the site's files as they are, one worker,
# keep-alive without limit.
#
#   start_nginx TMP SITE HTTP_LINES SERVER_LINES
#
# writes TMP/nginx.conf with HTTP_LINES in its http block (each ending in
# ";") and SERVER_LINES (the listen and TLS directives) in its one server,
# and starts nginx on CPU 0 in the background; nginx_pid is its pid.
start_nginx() {
  local tmp=$1 site=$2 http_lines=$3 server_lines=$4
  mkdir -p "$tmp/nginx"
  cat >"$tmp/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 1024; }
http {
	include /etc/nginx/mime.types;
	access_log off;
	sendfile on;
	tcp_nopush on;
	tcp_nodelay on;
	keepalive_timeout 65;
	keepalive_requests 1000000;
	$http_lines
	open_file_cache max=1000 inactive=60s;
	client_body_temp_path $tmp/nginx/body;
	proxy_temp_path $tmp/nginx/proxy;
	fastcgi_temp_path $tmp/nginx/fastcgi;
	uwsgi_temp_path $tmp/nginx/uwsgi;
	scgi_temp_path $tmp/nginx/scgi;
	server {
		$server_lines
		server_name _;
		root $site;
	}
}
NGINX
  taskset -c 0 nginx -c "$tmp/nginx.conf" -e "$tmp/nginx/error.log" 2>"$tmp/nginx.log" &
  nginx_pid=$!
}
