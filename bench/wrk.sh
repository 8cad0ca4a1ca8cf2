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

rps() { # label url pid [script] → "req/s server-CPU-µs-per-request"
  local args=(-t1 -c"$CONNS" -d"$DURATION" --latency) out
  [ -n "${4:-}" ] && args+=(-s "$4")
  runstat_begin "$3"
  out=$(taskset -c 1 wrk "${args[@]}" "$2" | tee -a "$tmp/wrk.log")
  runstat_end "$1"
  awk -v cpu="$RS_SERVER" '/requests in/ {n = $1} /Requests\/sec/ {r = $2} END {printf "%s %.2f\n", r, (n > 0 ? cpu * 1e6 / n : 0)}' <<<"$out"
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

# round OP URL BARE_URL BARE_PID [script]: one round of an operation, Pier
# first in odd rounds and the bare server first in even ones; appends to
# the OP's arrays through the globals p b pc bc.
pier_pid=${pids[0]}
round() {
  if [ $(($1 % 2)) = 1 ]; then
    read -r p pc < <(rps "pier $2" "$3" "$pier_pid" "${6:-}")
    read -r b bc < <(rps "bare $2" "$4" "$5" "${6:-}")
  else
    read -r b bc < <(rps "bare $2" "$4" "$5" "${6:-}")
    read -r p pc < <(rps "pier $2" "$3" "$pier_pid" "${6:-}")
  fi
}

echo "wrk -t1 -c$CONNS -d$DURATION, $REPEAT rounds, order alternating (medians; a ratio is the median of the rounds'); servers on CPU 0, wrk on CPU 1"
pss=() bss=() rs=() pes=() bes=() re=() psc=() bsc=() pec=() bec=()
for i in $(seq "$REPEAT"); do
  round "$i" search "http://$PIER$SEARCH" "http://127.0.0.1:18081$SEARCH" "${pids[1]}"
  pss+=("$p") bss+=("$b") rs+=("$(echo "$p / $b" | bc -l)") psc+=("$pc") bsc+=("$bc")
  round "$i" estimate "http://$PIER/v1/estimate" "http://127.0.0.1:18082/v1/estimate" "${pids[2]}" "$tmp/post.lua"
  pes+=("$p") bes+=("$b") re+=("$(echo "$p / $b" | bc -l)") pec+=("$pc") bec+=("$bc")
done
ps=$(median "${pss[@]}") bs=$(median "${bss[@]}") pe=$(median "${pes[@]}") be=$(median "${bes[@]}")
psc=$(median "${psc[@]}") bsc=$(median "${bsc[@]}") pec=$(median "${pec[@]}") bec=$(median "${bec[@]}")
printf '%-16s %12s %12s %8s %12s %12s\n' operation pier_rps bare_rps ratio "pier µs/req" "bare µs/req"
printf '%-16s %12.0f %12.0f %8.2f %12.2f %12.2f\n' search_domains "$ps" "$bs" "$(median "${rs[@]}")" "$psc" "$bsc"
printf '%-16s %12.0f %12.0f %8.2f %12.2f %12.2f\n' estimate "$pe" "$be" "$(median "${re[@]}")" "$pec" "$bec"
result "search_domains vs bare net/http (wrk -c$CONNS)" "$ps" "$bs" "$(median "${rs[@]}")" "req/s"
result "search_domains vs bare net/http, server CPU per request" "$psc" "$bsc" "$(echo "$bsc / $psc" | bc -l)" "µs/req"
result "estimate vs bare net/http (wrk -c$CONNS)" "$pe" "$be" "$(median "${re[@]}")" "req/s"
result "estimate vs bare net/http, server CPU per request" "$pec" "$bec" "$(echo "$bec / $pec" | bc -l)" "µs/req"
grep -E "Non-2xx|Socket errors" "$tmp/wrk.log" && { echo "errors during the run"; exit 1; } || true
