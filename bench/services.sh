#!/usr/bin/env bash
# Launches examples/app (Python's standard library behind a Procfile) as a
# process service and drives it with wrk four times per round: directly,
# at the address its process listens on (inside its sandbox's network
# namespace, wrk entered into it with nsenter, when it runs sandboxed); through Pier's HTTP listener with
# the preview host in the Host header; through bench/proxy, a bare
# net/http/httputil ReverseProxy set up as Pier's edge sets up its own; and
# through Debian's nginx (one worker, a keep-alive upstream pool): the
# peers for the proxy hop itself. Prints requests per second of each, the
# medians over the rounds, and the medians of the rounds' ratios
# pier/direct (goal: >= 0.8), goproxy/direct, nginx/direct, pier/goproxy
# and pier/nginx, and the CPU time per request of the app (direct), of pier
# server, of bench/proxy and of nginx's worker (app-us, pier-us, goprx-us,
# nginx-us: the proxies' own, the app's not counted).
#
#   bash bench/services.sh                  # 3 rounds of 5 s per side
#   DURATION=3s REPEAT=5 bash bench/services.sh
#   PIN=0 bash bench/services.sh            # no CPU pinning
#   PIER_BIN=/tmp/pier-server bash bench/services.sh   # another build of pier-server (or a pier from before the split)
#   PORT_BASE=18290 bash bench/services.sh  # other ports (default 18190-18195)
#   RESULTS=file RUNSTATS=file bash bench/services.sh   # for bench/peers.sh
#   PIER_FLAGS="--service-cpu-millis 2000" bash bench/services.sh   # extra flags for pier server
#
# By default the server, and so the app it starts (a child inherits its
# CPU affinity), and bench/proxy run on CPU 0 and wrk on CPU 1, as in
# bench/edge.sh: a proxy's work is paid on the app's core. Everything stays
# on loopback. examples/app is one Python process (threads under the GIL),
# so every side is bounded by it.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-5s}
REPEAT=${REPEAT:-3}
CONNS=${CONNS:-16}
PIN=${PIN:-1}
# shellcheck source=bench/runstat.sh
. bench/runstat.sh
need=()
command -v wrk >/dev/null || need+=(wrk)
command -v jq >/dev/null || need+=(jq)
command -v curl >/dev/null || need+=(curl)
command -v bc >/dev/null || need+=(bc)
[ -x /usr/bin/python3 ] || command -v python3 >/dev/null || need+=(python3)
[ -x /usr/sbin/nginx ] || need+=(nginx-light)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
mkdir -p bin
PIER_BIN=${PIER_BIN:-bin/pier-server}
[ "$PIER_BIN" = bin/pier-server ] && go build -o bin/pier-server ./cmd/pier-server
go build -o bin/benchproxy ./bench/proxy

srv=() cli=()
if [ "$PIN" = 1 ]; then srv=(taskset -c 0) cli=(taskset -c 1); fi

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

# PORT_BASE moves the six ports (HTTP, the Go peer, HTTPS, DNS, SMTP,
# nginx) when another run holds them.
B=${PORT_BASE:-18190}
PIER_HTTP=127.0.0.1:$B
for p in $B $((B + 1)) $((B + 2)) $((B + 3)) $((B + 4)) $((B + 5)); do
  if ss -Htln "sport = :$p" | grep -q .; then echo "port $p is in use (another run?); set PORT_BASE"; exit 1; fi
done
export PIER_DATA_DIR=$tmp/data PIER_BASE_URL=http://$PIER_HTTP
mkdir -p "$PIER_DATA_DIR"
key=$("$PIER_BIN" admin create-key --scopes read,quote,launch --json | jq -r .apiKey)
project=$("$PIER_BIN" admin create-project --name bench --json | jq -r .projectId)
"${srv[@]}" "$PIER_BIN" server --http-addr $PIER_HTTP --https-addr 127.0.0.1:$((B + 2)) --dns-addr 127.0.0.1:$((B + 3)) \
  --smtp-addr 127.0.0.1:$((B + 4)) --log-level warn ${PIER_FLAGS:-} 2>"$tmp/pier.log" &
pids+=($!)
for _ in $(seq 100); do curl -fsS "http://$PIER_HTTP/healthz" >/dev/null 2>&1 && break; sleep 0.1; done

api() { # method path [json]
  local args=(-fsS -X "$1" -H "Authorization: Bearer $key" -H "Accept: application/json")
  if [ "$1" = POST ]; then args+=(-H "Content-Type: application/json" -H "Idempotency-Key: $(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"); fi
  if [ $# -ge 3 ]; then args+=(--data-binary "$3"); fi
  curl "${args[@]}" "http://$PIER_HTTP$2" || { echo "pier: $1 $2 failed" >&2; cat "$tmp/pier.log" >&2; exit 1; }
}

# Upload, quote, launch, wait for the task: what pier launch does for a site.
files=$(for f in examples/app/*; do jq -n --arg p "$(basename "$f")" --arg c "$(base64 -w 0 "$f")" '{path: $p, contentBase64: $c}'; done | jq -s .)
bundle=$(api POST /v1/bundles "$(jq -n --arg p "$project" --argjson f "$files" '{projectId: $p, files: $f}')" | jq -r .data.bundleId)
quote=$(api POST /v1/quotes "$(jq -n --arg p "$project" '{projectId: $p, items: [{kind: "service", workload: "dynamic_service", target: "process", name: "app", months: 1}]}')" | jq -r .data.quoteId)
task=$(api POST "/v1/projects/$project/launch" "$(jq -n --arg b "$bundle" --arg q "$quote" '{name: "app", target: "process", bundleId: $b, quoteId: $q}')" | jq -r .data.taskId)
for _ in $(seq 300); do
  t=$(api GET "/v1/tasks/$task")
  state=$(jq -r .data.state <<<"$t")
  [ "$state" = succeeded ] && break
  [ "$state" = failed ] && { echo "launch failed: $t"; exit 1; }
  sleep 0.1
done
[ "$state" = succeeded ] || { echo "launch not done after 30 s: $t"; exit 1; }
service=$(jq -r .data.serviceId <<<"$t")
preview=$(jq -r .data.previewUrl <<<"$t")
host=${preview#https://}; host=${host%%/*}; host=${host%%:*}

# The app's own address, from the line it prints when it listens (logs are
# written in batches, so wait for it).
port=
for _ in $(seq 100); do
  port=$(api GET "/v1/services/$service/logs?tail=100" | jq -r '.data.lines[].text' |
    sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' | tail -1)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "no 'listening on' line in the service's logs"; api GET "/v1/services/$service/logs?tail=100"; exit 1; }
pid=$(ss -Htlnp "sport = :$port" 2>/dev/null | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1)
upstream=127.0.0.1:$port inns=()
if [ -z "$pid" ]; then
  # Sandboxed: the app listens in a network namespace of its own, and the
  # peers reach it at its sandbox's address, as Pier's edge does; "direct"
  # is wrk entered into that namespace.
  pid=$(pgrep -n -f 'app.py' || true)
  [ -n "$pid" ] || { echo "no examples/app process found"; exit 1; }
  addr=$(nsenter --net=/proc/$pid/ns/net ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1)
  upstream=$addr:$port inns=(nsenter --net=/proc/$pid/ns/net)
  # The sandbox's cpuset cgroup gave the app every CPU back: pin it (its
  # threads included) where the server is, as an unsandboxed child is.
  [ "$PIN" = 1 ] && taskset -a -p -c 0 "$pid" >/dev/null
fi
direct=http://127.0.0.1:$port/ proxied=http://$PIER_HTTP/ goproxy=http://127.0.0.1:$((B + 1))/
echo "examples/app: $preview, process ${pid:-?} listening on 127.0.0.1:$port${inns:+ in its sandbox at $upstream}"
"${srv[@]}" ./bin/benchproxy -addr 127.0.0.1:$((B + 1)) -to "$upstream" 2>"$tmp/benchproxy.log" &
pids+=($!)
for _ in $(seq 50); do curl -fsS "$goproxy" >/dev/null 2>&1 && break; sleep 0.1; done
# nginx as a reverse proxy, as an operator would put it in front of an app:
# one worker on the proxies' core, HTTP/1.1 to a keep-alive upstream pool.
nginxurl=http://127.0.0.1:$((B + 5))/
mkdir -p "$tmp/nginx"
cat >"$tmp/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	tcp_nodelay on;
	keepalive_timeout 65;
	keepalive_requests 1000000;
	client_body_temp_path $tmp/nginx/body;
	proxy_temp_path $tmp/nginx/proxy;
	fastcgi_temp_path $tmp/nginx/fastcgi;
	uwsgi_temp_path $tmp/nginx/uwsgi;
	scgi_temp_path $tmp/nginx/scgi;
	upstream app { server $upstream; keepalive 64; keepalive_requests 1000000; }
	server {
		listen 127.0.0.1:$((B + 5));
		location / {
			proxy_pass http://app;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header Host \$host;
			proxy_set_header X-Forwarded-For \$remote_addr;
			proxy_set_header X-Forwarded-Proto http;
		}
	}
}
EOF
"${srv[@]}" /usr/sbin/nginx -c "$tmp/nginx.conf" -e "$tmp/nginx/error.log" 2>"$tmp/nginx.log" &
pids+=($!)
for _ in $(seq 50); do curl -fsS "$nginxurl" >/dev/null 2>&1 && break; sleep 0.1; done
ngpid=$(pgrep -P "${pids[2]}" | head -1)

# Every door must answer the same bytes before anything is timed.
want=$("${inns[@]}" curl -fsS "$direct") || { echo "no answer from $direct"; exit 1; }
for u in "$proxied" "$goproxy" "$nginxurl"; do
  got=$(curl -fsS -H "Host: $host" "$u") || { echo "no answer from $u for $host"; cat "$tmp"/*.log; exit 1; }
  [ "$got" = "$want" ] || { echo "$u answers $got, directly $want"; exit 1; }
done

# cpu PID: the process's user and system time so far, in clock ticks.
cpu() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
tick=$(getconf CLK_TCK)
# rps URL PID LABEL: wrk's requests per second against URL, and the CPU
# time PID spent per request meanwhile, in microseconds (its hop: the
# app's CPU is not counted for a proxy). LABEL names the run in RUNSTATS.
rps() {
  echo "== $1" >>"$tmp/wrk.log"
  local before out n
  before=$(cpu "$2")
  runstat_begin "${pids[@]}"
  local ns=()
  [ "$1" = "$direct" ] && ns=("${inns[@]}")
  out=$("${ns[@]}" "${cli[@]}" wrk -t1 -c"$CONNS" -d"$DURATION" --latency -H "Host: $host" "$1" | tee -a "$tmp/wrk.log")
  runstat_end "$3"
  n=$(awk '/requests in/ {print $1}' <<<"$out")
  echo "$(awk '/Requests\/sec/ {print $2}' <<<"$out") $(echo "($(cpu "$2") - $before) * 1000000 / $tick / $n" | bc -l)"
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

pinning="no pinning"; [ "$PIN" = 1 ] && pinning="server, app and peers on CPU 0, wrk on CPU 1"
echo "wrk -t1 -c$CONNS -d$DURATION, $REPEAT rounds of direct, pier, goproxy, nginx; $pinning; load average $(cut -d' ' -f1-3 /proc/loadavg)"
fmt='%-6s %8s %8s %8s %8s %7s %7s %7s %7s %7s %7s %7s %7s %7s\n'
num='%-6s %8.0f %8.0f %8.0f %8.0f %7.2f %7.2f %7.2f %7.2f %7.2f %7.0f %7.0f %7.0f %7.0f\n'
# shellcheck disable=SC2059
printf "$fmt" round direct pier goproxy nginx p/dir g/dir n/dir p/g p/n app-us pier-us gprx-us ngx-us
ds=() ps=() gs=() ns=() rs=() rgs=() rns=() rpgs=() rpns=() dus=() pus=() gus=() nus=()
srvpid=${pids[0]} gopid=${pids[1]}
for i in $(seq "$REPEAT"); do
  # The four runs of a round follow each other and share the machine's
  # load, so a round's ratios are steadier than ratios of medians.
  read -r d du < <(rps "$direct" "${pid:-0}" "app direct")
  read -r p pu < <(rps "$proxied" "$srvpid" "app via pier")
  read -r g gu < <(rps "$goproxy" "$gopid" "app via goproxy")
  read -r n nu < <(rps "$nginxurl" "${ngpid:-0}" "app via nginx")
  dus+=("$du") pus+=("$pu") gus+=("$gu") nus+=("$nu")
  r=$(echo "$p / $d" | bc -l) rg=$(echo "$g / $d" | bc -l) rn=$(echo "$n / $d" | bc -l)
  rpg=$(echo "$p / $g" | bc -l) rpn=$(echo "$p / $n" | bc -l)
  ds+=("$d") ps+=("$p") gs+=("$g") ns+=("$n") rs+=("$r") rgs+=("$rg") rns+=("$rn") rpgs+=("$rpg") rpns+=("$rpn")
  # shellcheck disable=SC2059
  printf "$num" "$i" "$d" "$p" "$g" "$n" "$r" "$rg" "$rn" "$rpg" "$rpn" "$du" "$pu" "$gu" "$nu"
done
d=$(median "${ds[@]}") p=$(median "${ps[@]}") g=$(median "${gs[@]}") n=$(median "${ns[@]}")
r=$(median "${rs[@]}") rg=$(median "${rgs[@]}") rn=$(median "${rns[@]}") rpg=$(median "${rpgs[@]}") rpn=$(median "${rpns[@]}")
du=$(median "${dus[@]}") pu=$(median "${pus[@]}") gu=$(median "${gus[@]}") nu=$(median "${nus[@]}")
# shellcheck disable=SC2059
printf "$num" median "$d" "$p" "$g" "$n" "$r" "$rg" "$rn" "$rpg" "$rpn" "$du" "$pu" "$gu" "$nu"
result "proxied service vs direct (wrk -c$CONNS, examples/app)" "$p" "$d" "$r" "req/s"
result "bare Go ReverseProxy vs direct (peer of the line above)" "$g" "$d" "$rg" "req/s"
result "nginx reverse proxy vs direct (peer of the line above)" "$n" "$d" "$rn" "req/s"
result "proxied service, pier vs nginx in front of the same app" "$p" "$n" "$rpn" "req/s"
# wrk counts a request without an answer within 2 s as a timeout.
if grep -qE "Non-2xx|Socket errors" "$tmp/wrk.log"; then
  awk '/^== / {url = $2} /Non-2xx|Socket errors/ {print url ":" $0}' "$tmp/wrk.log"
  echo "errors during the run"; exit 1
fi
if [ "$(echo "$r >= 0.8" | bc -l)" = 1 ]; then echo "goal met: pier >= 0.8x direct"; else echo "goal missed: pier < 0.8x direct"; fi
