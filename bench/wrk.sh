#!/usr/bin/env bash
# Drives wrk against `pier server` and a bare net/http server that returns the
# same bytes, in one run, and prints requests per second and the ratio
# pier/bare for search_domains and estimate. Servers are pinned to CPU 0 and
# wrk to CPU 1, so both sides get the same share of the machine.
#
#   bash bench/wrk.sh            # 10 s per run
#   DURATION=30s bash bench/wrk.sh
#   REPEAT=5 bash bench/wrk.sh    # 5 rounds, interleaved; medians
#   RESULTS=file RUNSTATS=file bash bench/wrk.sh   # for bench/peers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10s}
CONNS=${CONNS:-32}
REPEAT=${REPEAT:-1}
# shellcheck source=bench/runstat.sh
. bench/runstat.sh
if ! command -v wrk >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk bc >/dev/null
fi
mkdir -p bin
go build -o bin/pier ./cmd/pier
go build -o bin/pier-server ./cmd/pier-server
go build -o bin/bare ./bench/bare

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

PIER=127.0.0.1:18080
PIER_DATA_DIR=$tmp/data taskset -c 0 ./bin/pier-server server --http-addr $PIER --log-level warn \
  --rate-limit search=1000000000:1000000000 2>"$tmp/pier.log" &
pids+=($!)
for _ in $(seq 50); do curl -fsS "http://$PIER/healthz" >/dev/null 2>&1 && break; sleep 0.1; done

SEARCH="/v1/domains/search?q=acme&tldAllowlist=com,dev,io&maxFirstYearPriceUsd=50"
ESTIMATE='{"workload":"database_backed_app","monthlyRequests":2000000}'
curl -fsS "http://$PIER$SEARCH" >"$tmp/search.json"
curl -fsS -H 'Content-Type: application/json' -d "$ESTIMATE" "http://$PIER/v1/estimate" >"$tmp/estimate.json"

taskset -c 0 ./bin/bare -addr 127.0.0.1:18081 -body "$tmp/search.json" & pids+=($!)
taskset -c 0 ./bin/bare -addr 127.0.0.1:18082 -body "$tmp/estimate.json" & pids+=($!)
sleep 0.3

cat >"$tmp/post.lua" <<LUA
wrk.method = "POST"
wrk.body   = '$ESTIMATE'
wrk.headers["Content-Type"] = "application/json"
LUA

rps() { # label url [script]
  local args=(-t1 -c"$CONNS" -d"$DURATION" --latency)
  [ -n "${3:-}" ] && args+=(-s "$3")
  runstat_begin "${pids[@]}"
  taskset -c 1 wrk "${args[@]}" "$2" | tee -a "$tmp/wrk.log" | awk '/Requests\/sec/ {print $2}'
  runstat_end "$1"
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

echo "wrk -t1 -c$CONNS -d$DURATION, $REPEAT rounds (medians; a ratio is the median of the rounds'); servers on CPU 0, wrk on CPU 1"
pss=() bss=() rs=() pes=() bes=() re=()
for _ in $(seq "$REPEAT"); do
  ps=$(rps "pier search" "http://$PIER$SEARCH"); bs=$(rps "bare search" "http://127.0.0.1:18081$SEARCH")
  pe=$(rps "pier estimate" "http://$PIER/v1/estimate" "$tmp/post.lua"); be=$(rps "bare estimate" "http://127.0.0.1:18082/v1/estimate" "$tmp/post.lua")
  pss+=("$ps") bss+=("$bs") rs+=("$(echo "$ps / $bs" | bc -l)") pes+=("$pe") bes+=("$be") re+=("$(echo "$pe / $be" | bc -l)")
done
ps=$(median "${pss[@]}") bs=$(median "${bss[@]}") pe=$(median "${pes[@]}") be=$(median "${bes[@]}")
printf '%-16s %12s %12s %8s\n' operation pier_rps bare_rps ratio
printf '%-16s %12.0f %12.0f %8.2f\n' search_domains "$ps" "$bs" "$(median "${rs[@]}")"
printf '%-16s %12.0f %12.0f %8.2f\n' estimate "$pe" "$be" "$(median "${re[@]}")"
result "search_domains vs bare net/http (wrk -c$CONNS)" "$ps" "$bs" "$(median "${rs[@]}")" "req/s"
result "estimate vs bare net/http (wrk -c$CONNS)" "$pe" "$be" "$(median "${re[@]}")" "req/s"
grep -E "Non-2xx|Socket errors" "$tmp/wrk.log" && { echo "errors during the run"; exit 1; } || true
