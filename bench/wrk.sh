#!/usr/bin/env bash
# Drives wrk against `pier server` and a bare net/http server that returns the
# same bytes, in one run, and prints requests per second and the ratio
# pier/bare for search_domains and estimate. Servers are pinned to CPU 0 and
# wrk to CPU 1, so both sides get the same share of the machine.
#
#   bash bench/wrk.sh            # 10 s per run
#   DURATION=30s bash bench/wrk.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10s}
CONNS=${CONNS:-32}
if ! command -v wrk >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk bc >/dev/null
fi
mkdir -p bin
go build -o bin/pier ./cmd/pier
go build -o bin/bare ./bench/bare

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

PIER=127.0.0.1:18080
PIER_DATA_DIR=$tmp/data taskset -c 0 ./bin/pier server --http-addr $PIER --log-level warn \
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

rps() { # url [script]
  local args=(-t1 -c"$CONNS" -d"$DURATION" --latency)
  [ -n "${2:-}" ] && args+=(-s "$2")
  taskset -c 1 wrk "${args[@]}" "$1" | tee -a "$tmp/wrk.log" | awk '/Requests\/sec/ {print $2}'
}

echo "wrk -t1 -c$CONNS -d$DURATION; servers on CPU 0, wrk on CPU 1"
ps=$(rps "http://$PIER$SEARCH");               bs=$(rps "http://127.0.0.1:18081$SEARCH")
pe=$(rps "http://$PIER/v1/estimate" "$tmp/post.lua"); be=$(rps "http://127.0.0.1:18082/v1/estimate" "$tmp/post.lua")
printf '%-16s %12s %12s %8s\n' operation pier_rps bare_rps ratio
printf '%-16s %12.0f %12.0f %8.2f\n' search_domains "$ps" "$bs" "$(echo "$ps / $bs" | bc -l)"
printf '%-16s %12.0f %12.0f %8.2f\n' estimate "$pe" "$be" "$(echo "$pe / $be" | bc -l)"
grep -E "Non-2xx|Socket errors" "$tmp/wrk.log" && { echo "errors during the run"; exit 1; } || true
