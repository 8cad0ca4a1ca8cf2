#!/usr/bin/env bash
# Serves the same two files (1 KiB and 64 KiB) from Pier's edge and nginx
# over HTTP/2 on TLS (the same ECDSA P-256 certificate kind), and drives each
# with h2load. Servers are pinned to CPU 0 and h2load to CPU 1. Prints
# requests per second and the ratio pier/nginx (goal: >= 0.7 at 1 KiB and
# >= 1.0 at 64 KiB), the median of interleaved rounds, and the same for
# requests per CPU second each server used (steadier when other work
# shares CPU 0).
#
#   bash bench/h2.sh                       # 5 rounds of 10 s per server and size
#   DURATION=5 REPEAT=3 bash bench/h2.sh
#   PROFILE=1k bash bench/h2.sh            # first prints perf's profile of pier
#                                          # under the 1 KiB load (PROFILE=64k too)
#   PIER_FLAGS=--edge-fast-path=false bash bench/h2.sh   # net/http's h2 server
#
# h2load connects to 127.0.0.1 (--connect-to) while its URL names Pier's
# preview host, so SNI and :authority are the preview host's, as a browser
# sends them; nginx serves any name.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/static.sh
. bench/static.sh
DURATION=${DURATION:-10}
REPEAT=${REPEAT:-5}
CONNS=${CONNS:-64}
STREAMS=${STREAMS:-10}
PIER_FLAGS=${PIER_FLAGS:-}
need=()
command -v h2load >/dev/null || need+=(nghttp2-client)
command -v nginx >/dev/null || need+=(nginx)
command -v bc >/dev/null || need+=(bc)
command -v openssl >/dev/null || need+=(openssl)
command -v nghttp >/dev/null || need+=(nghttp2-client)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
mkdir -p bin
go build -o bin/pier ./cmd/pier
go build -o bin/pier-server ./cmd/pier-server

static_site

PIER_HTTP=127.0.0.1:18690 PIER_TLS=18643 NGINX_TLS=18645
for port in 18690 18643 18645 18653 18625; do
  if ss -Hltn "sport = :$port" | grep -q .; then echo "port $port is in use (another benchmark?)"; exit 1; fi
done
export PIER_DATA_DIR=$tmp/data PIER_BASE_URL=http://$PIER_HTTP
mkdir -p "$PIER_DATA_DIR"
export PIER_API_KEY=$(./bin/pier-server admin create-key --json | jq -r .apiKey)
project=$(./bin/pier-server admin create-project --name bench --json | jq -r .projectId)
# shellcheck disable=SC2086
taskset -c 0 ./bin/pier-server server --http-addr $PIER_HTTP --https-addr 127.0.0.1:$PIER_TLS --dns-addr 127.0.0.1:18653 \
  --smtp-addr 127.0.0.1:18625 --log-level warn $PIER_FLAGS 2>"$tmp/pier.log" &
pids+=($!)
for _ in $(seq 100); do curl -fsS "http://$PIER_HTTP/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
preview=$(./bin/pier launch "$site" --project "$project" --name bench 2>"$tmp/launch.log")
host=${preview#https://}; host=${host%%/*}; host=${host%%:*}
echo "pier edge site: $preview"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null
start_nginx "$tmp" "$site" "http2_max_requests 1000000;" "listen 127.0.0.1:$NGINX_TLS ssl http2;
		ssl_certificate $tmp/cert.pem;
		ssl_certificate_key $tmp/key.pem;
		ssl_protocols TLSv1.2 TLSv1.3; # 1.3 as with Pier (Debian's 1.22 offers 1.2 only by default)"
pids+=("$nginx_pid")
sleep 0.5

# Both servers must answer each file with the same bytes over h2 first.
for f in 1k.txt 64k.txt; do
  want=$(sha256sum <"$site/$f")
  for port in $PIER_TLS $NGINX_TLS; do
    got=$(curl -fsSk --http2 --connect-to "$host:$port:127.0.0.1:$port" -w '%{http_version}' -o "$tmp/got" \
      "https://$host:$port/$f") || { echo "no answer on port $port"; cat "$tmp"/*.log; exit 1; }
    [ "$got" = 2 ] || { echo "port $port answered HTTP/$got, not h2"; exit 1; }
    [ "$(sha256sum <"$tmp/got")" = "$want" ] || { echo "port $port serves other bytes"; exit 1; }
  done
done

# cpu: the CPU seconds the processes of a server (its pid and children) used.
cpu() {
  local t=0 p
  for p in $1 $(pgrep -P "$1" || true); do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo "$t"
}
tck=$(getconf CLK_TCK)
# rps prints requests per second and requests per CPU second of the server,
# its CPU time read over the run's DURATION. h2load sometimes lingers after
# its timed run against nginx's 64 KiB answers (both busy, the numbers
# already final); it is stopped after DURATION + 15 s and its report read.
rps() { # port file pid
  local c0 c1 h k0 k1
  c0=$(cpu "$3")
  timeout -s INT -k 5 $((DURATION + 15)) taskset -c 1 h2load -c"$CONNS" -m"$STREAMS" -D"$DURATION" \
    --connect-to "127.0.0.1:$1" "https://$host:$1/$2" >"$tmp/h2load.out" 2>&1 &
  h=$!
  sleep 0.2
  k0=$(cpu "$h")
  sleep "$(echo "$DURATION - 0.7" | bc -l)"
  k1=$(cpu "$h")
  sleep 0.5
  c1=$(cpu "$3")
  wait $h || true
  cat "$tmp/h2load.out" >>"$tmp/h2load.log"
  # Every request must have succeeded with a 2xx.
  awk -v cpu="$((c1 - c0))" -v tck="$tck" '/^requests:/ {n=$8; if ($10+$12+$14 != 0) bad=1} /^status codes:/ {if ($5+$7+$9 != 0) bad=1}
       /^finished in/ {r=$4} END {if (bad || r == "" || cpu == 0) print "error"; else printf "%s %.0f\n", r, n * tck / cpu}' "$tmp/h2load.out"
  echo "  port $1 $2: $(awk '/^(TLS Protocol|Cipher|Application protocol):/ {printf "%s ", $0}' "$tmp/h2load.out")server CPU $(((c1 - c0) * 100 / tck / DURATION)) %, h2load CPU $(echo "($k1 - $k0) * 100 / $tck / ($DURATION - 0.7)" | bc) %" >>"$tmp/cpu.log"
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

if [ -n "${PROFILE:-}" ]; then
  command -v perf >/dev/null || { apt-get update -qq && apt-get install -y -qq linux-perf >/dev/null; }
  rps $PIER_TLS "$PROFILE.txt" "${pids[0]}" >/dev/null &
  sleep 1; perf record -q -F 499 -g -o "$tmp/perf.data" -p "${pids[0]}" -- sleep $((DURATION - 2)) 2>/dev/null; wait $!
  perf report -q -i "$tmp/perf.data" --no-children --sort symbol --stdio -g none >"$tmp/self.txt" 2>/dev/null || true
  perf report -q -i "$tmp/perf.data" --children --sort symbol --stdio -g none >"$tmp/children.txt" 2>/dev/null || true
  echo "self:"; head -30 "$tmp/self.txt"; echo "with callees:"; head -40 "$tmp/children.txt"
fi

echo "h2load -c$CONNS -m$STREAMS -D$DURATION, $REPEAT rounds of pier, nginx; medians; servers on CPU 0, h2load on CPU 1; load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %10s %10s %11s %13s %13s %11s\n' size pier nginx pier/nginx "pier req/cpu" "nginx req/cpu" pier/nginx
fail=0
for f in 1k.txt 64k.txt; do
  ps=() ns=() rs=() pe=() ne=() re=()
  for _ in $(seq "$REPEAT"); do
    pi=$(rps $PIER_TLS "$f" "${pids[0]}"); ni=$(rps $NGINX_TLS "$f" "${pids[1]}")
    if [ "$pi" = error ] || [ "$ni" = error ]; then echo "failed requests (see h2load's output)"; tail -30 "$tmp/h2load.log"; exit 1; fi
    read -r pi pc <<<"$pi"; read -r ni nc <<<"$ni"
    ps+=("$pi") ns+=("$ni") rs+=("$(echo "$pi / $ni" | bc -l)")
    pe+=("$pc") ne+=("$nc") re+=("$(echo "$pc / $nc" | bc -l)")
  done
  p=$(median "${ps[@]}") n=$(median "${ns[@]}") r=$(median "${rs[@]}")
  printf '%-8s %10.0f %10.0f %11.2f %13.0f %13.0f %11.2f\n' "${f%.txt}" "$p" "$n" "$r" "$(median "${pe[@]}")" "$(median "${ne[@]}")" "$(median "${re[@]}")"
  printf '  runs: pier %s | nginx %s | ratios %s | per CPU second: pier %s | nginx %s\n' "${ps[*]}" "${ns[*]}" "$(printf '%.2f ' "${rs[@]}")" "${pe[*]}" "${ne[*]}" >&2
  goal=0.7; [ "$f" = 64k.txt ] && goal=1.0
  if [ "$(echo "$r < $goal" | bc -l)" = 1 ]; then fail=1; fi
done
cat "$tmp/cpu.log" >&2
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$fail" = 0 ]; then echo "goal met: pier >= 0.7x nginx at 1 KiB and >= 1.0x at 64 KiB"; else echo "goal missed (see the ratios)"; fi
