#!/usr/bin/env bash
# Serves the same two files (1 KiB and 64 KiB) from Pier's edge, Caddy and
# nginx, and drives each with wrk over HTTP/1.1 keep-alive and over TLS.
# Servers are pinned to CPU 0 and wrk to CPU 1. Prints requests per second
# and the ratios pier/caddy and pier/nginx (goal: >= 1.0 and >= 0.7).
#
#   bash bench/edge.sh                   # 3 runs of 5 s per server and case
#   DURATION=10s REPEAT=5 bash bench/edge.sh
#
# Pier serves the files as a launched site, so requests name its preview
# host. *.localhost does not resolve here for wrk, so wrk connects to
# 127.0.0.1 and sends the preview host in the Host header; over TLS its SNI
# is then 127.0.0.1, for which Pier answers with a local-CA certificate of
# the same kind (ECDSA P-256) as the preview host's. Caddy and nginx serve
# any host name with an ECDSA P-256 certificate made for the run.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-5s}
REPEAT=${REPEAT:-3}
CONNS=${CONNS:-32}
need=()
command -v wrk >/dev/null || need+=(wrk)
command -v caddy >/dev/null || need+=(caddy)
command -v nginx >/dev/null || need+=(nginx)
command -v bc >/dev/null || need+=(bc)
command -v openssl >/dev/null || need+=(openssl)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
mkdir -p bin
go build -o bin/pier ./cmd/pier

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

# The site: the two files, readable text so every server treats them alike.
site=$tmp/site
mkdir -p "$site"
head -c 768 /dev/urandom | base64 -w 0 | head -c 1024 >"$site/1k.txt"
head -c 49152 /dev/urandom | base64 -w 0 | head -c 65536 >"$site/64k.txt"
echo '<!doctype html><title>bench</title>' >"$site/index.html"
chmod 755 "$tmp"; chmod -R a+rX "$site" # nginx's worker runs as nobody

PIER_HTTP=127.0.0.1:18090 PIER_HTTPS=127.0.0.1:18443
export PIER_DATA_DIR=$tmp/data PIER_BASE_URL=http://$PIER_HTTP
export PIER_API_KEY=$(./bin/pier admin create-key --json | jq -r .apiKey)
project=$(./bin/pier admin create-project --name bench --json | jq -r .projectId)
taskset -c 0 ./bin/pier server --http-addr $PIER_HTTP --https-addr $PIER_HTTPS --dns-addr 127.0.0.1:18053 \
  --smtp-addr 127.0.0.1:18025 --log-level warn 2>"$tmp/pier.log" &
pids+=($!)
for _ in $(seq 100); do curl -fsS "http://$PIER_HTTP/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
preview=$(./bin/pier launch "$site" --project "$project" --name bench 2>"$tmp/launch.log")
host=${preview#https://}; host=${host%%/*}; host=${host%%:*}
echo "pier edge site: $preview"

# One certificate for Caddy and nginx, of the kind Pier's local CA issues.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null

CADDY_HTTP=18091 CADDY_TLS=18444
cat >"$tmp/Caddyfile" <<EOF
{
	admin off
	auto_https off
	storage file_system $tmp/caddy
}
http://:$CADDY_HTTP {
	root * $site
	file_server
}
https://:$CADDY_TLS {
	tls $tmp/cert.pem $tmp/key.pem
	root * $site
	file_server
}
EOF
XDG_DATA_HOME=$tmp/caddy XDG_CONFIG_HOME=$tmp/caddy HOME=$tmp \
  taskset -c 0 caddy run --config "$tmp/Caddyfile" --adapter caddyfile >"$tmp/caddy.log" 2>&1 &
pids+=($!)

NGINX_HTTP=18092 NGINX_TLS=18445
mkdir -p "$tmp/nginx"
cat >"$tmp/nginx.conf" <<EOF
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
	open_file_cache max=1000 inactive=60s;
	client_body_temp_path $tmp/nginx/body;
	proxy_temp_path $tmp/nginx/proxy;
	fastcgi_temp_path $tmp/nginx/fastcgi;
	uwsgi_temp_path $tmp/nginx/uwsgi;
	scgi_temp_path $tmp/nginx/scgi;
	server {
		listen 127.0.0.1:$NGINX_HTTP;
		listen 127.0.0.1:$NGINX_TLS ssl;
		ssl_certificate $tmp/cert.pem;
		ssl_certificate_key $tmp/key.pem;
		ssl_session_cache shared:SSL:1m;
		server_name _;
		root $site;
	}
}
EOF
taskset -c 0 nginx -c "$tmp/nginx.conf" -e "$tmp/nginx/error.log" 2>"$tmp/nginx.log" &
pids+=($!)
sleep 0.5

# Every server must answer the same bytes before anything is timed.
for f in 1k.txt 64k.txt; do
  want=$(sha256sum <"$site/$f")
  for url in "http://127.0.0.1:18090/$f" "https://127.0.0.1:18443/$f" \
             "http://127.0.0.1:$CADDY_HTTP/$f" "https://127.0.0.1:$CADDY_TLS/$f" \
             "http://127.0.0.1:$NGINX_HTTP/$f" "https://127.0.0.1:$NGINX_TLS/$f"; do
    got=$(curl -fsSk -H "Host: $host" "$url" | sha256sum) || { echo "no answer from $url"; cat "$tmp"/*.log; exit 1; }
    [ "$got" = "$want" ] || { echo "$url serves other bytes"; exit 1; }
  done
done

rps() { # url
  taskset -c 1 wrk -t1 -c"$CONNS" -d"$DURATION" --latency -H "Host: $host" "$1" | tee -a "$tmp/wrk.log" | awk '/Requests\/sec/ {print $2}'
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

echo "wrk -t1 -c$CONNS -d$DURATION, $REPEAT rounds of pier, caddy, nginx; medians; servers on CPU 0, wrk on CPU 1"
printf '%-10s %10s %10s %10s %11s %11s\n' case pier caddy nginx pier/caddy pier/nginx
fail=0
for proto in http https; do
  for f in 1k.txt 64k.txt; do
    case $proto in http) pp=18090 cp=$CADDY_HTTP np=$NGINX_HTTP ;; https) pp=18443 cp=$CADDY_TLS np=$NGINX_TLS ;; esac
    ps=() cs=() ns=() rcs=() rns=()
    for _ in $(seq "$REPEAT"); do
      pi=$(rps "$proto://127.0.0.1:$pp/$f"); ci=$(rps "$proto://127.0.0.1:$cp/$f"); ni=$(rps "$proto://127.0.0.1:$np/$f")
      ps+=("$pi") cs+=("$ci") ns+=("$ni")
      rcs+=("$(echo "$pi / $ci" | bc -l)") rns+=("$(echo "$pi / $ni" | bc -l)")
    done
    # The three runs of a round follow each other, so they share the
    # machine's load: the ratio is the median of the rounds' ratios.
    p=$(median "${ps[@]}") c=$(median "${cs[@]}") n=$(median "${ns[@]}")
    rc=$(median "${rcs[@]}") rn=$(median "${rns[@]}")
    printf '%-10s %10.0f %10.0f %10.0f %11.2f %11.2f\n' "$proto ${f%.txt}" "$p" "$c" "$n" "$rc" "$rn"
    printf '  runs: pier %s | caddy %s | nginx %s\n' "${ps[*]}" "${cs[*]}" "${ns[*]}" >&2
    if [ "$(echo "$rc < 1.0 || $rn < 0.7" | bc -l)" = 1 ]; then fail=1; fi
  done
done
grep -E "Non-2xx|Socket errors" "$tmp/wrk.log" && { echo "errors during the run"; exit 1; } || true
if [ "$fail" = 0 ]; then echo "goal met: pier >= 1.0x caddy and >= 0.7x nginx in every case"; else echo "goal missed in at least one case (see the ratios)"; fi
