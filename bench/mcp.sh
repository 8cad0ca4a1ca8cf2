#!/usr/bin/env bash
# MCP over real HTTP against REST: the same domain search as a keyed REST
# GET and as the keyed tools/call search_domains POST an MCP client sends,
# and the same two without a key, each driven by wrk at CONNS connections
# (default 16) against one `pier server` pinned to CPU 0, wrk on CPU 1.
# Prints requests per second and the server's CPU per request (its CPU
# time from /proc over the requests wrk completed) for each, and the
# ratios mcp/rest (throughput) and rest/mcp (CPU per request): at least
# 0.85 is the goal for the keyed pair, on both.
#
#   bash bench/mcp.sh                  # 5 rounds of 5 s
#   REPEAT=3 DURATION=10s bash bench/mcp.sh
#   RESULTS=file RUNSTATS=file bash bench/mcp.sh   # for bench/peers.sh
#
# The order alternates between rounds (REST first in odd rounds, MCP
# first in even ones). Both answers are checked to carry the same
# envelope before anything is timed.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-5s}
CONNS=${CONNS:-16}
REPEAT=${REPEAT:-5}
# shellcheck source=bench/runstat.sh
. bench/runstat.sh
need=()
for t in wrk jq bc curl; do command -v $t >/dev/null || need+=("$t"); done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
mkdir -p bin
go build -o bin/pier-server ./cmd/pier-server

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

PIER=127.0.0.1:18086
for port in 18086 18087 18088 18089; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "mcp.sh: port $port is taken" >&2; exit 1; fi
done
export PIER_DATA_DIR=$tmp/data PIER_BASE_URL=http://$PIER
mkdir -p "$PIER_DATA_DIR"
key=$(./bin/pier-server admin create-key --json | jq -r .apiKey)
taskset -c 0 ./bin/pier-server server --http-addr $PIER --https-addr 127.0.0.1:18087 --dns-addr 127.0.0.1:18088 --smtp-addr 127.0.0.1:18089 --log-level warn \
  --rate-limit search=1000000000:1000000000 --rate-limit mcp=1000000000:1000000000 2>"$tmp/pier.log" &
pids+=($!)
pier_pid=$!
for _ in $(seq 100); do curl -fsS "http://$PIER/healthz" >/dev/null 2>&1 && break; sleep 0.1; done

SEARCH="/v1/domains/search?q=acme&tldAllowlist=com,dev,io&maxFirstYearPriceUsd=50"
CALL='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_domains","arguments":{"q":"acme","tldAllowlist":["com","dev","io"],"maxFirstYearPriceUsd":50}}}'
mcp_headers=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-03-26')
for auth in "Authorization: Bearer $key" "X-None: 1"; do
  rest=$(curl -fsS -H "$auth" "http://$PIER$SEARCH" | jq -S .)
  mcp=$(curl -fsS -H "$auth" "${mcp_headers[@]}" -d "$CALL" "http://$PIER/mcp" | jq -S .result.structuredContent)
  [ "$rest" = "$mcp" ] || { echo "mcp.sh: the tool's structuredContent is not the REST envelope ($auth)"; exit 1; }
done

lua() { # file [authorization]
  {
    echo "wrk.method = \"POST\""
    echo "wrk.body = '$CALL'"
    echo 'wrk.headers["Content-Type"] = "application/json"'
    echo 'wrk.headers["Accept"] = "application/json, text/event-stream"'
    echo 'wrk.headers["MCP-Protocol-Version"] = "2025-03-26"'
    if [ -n "${2:-}" ]; then echo "wrk.headers[\"Authorization\"] = \"$2\""; fi
  } >"$1"
}
lua "$tmp/mcp-key.lua" "Bearer $key"
lua "$tmp/mcp-anon.lua"
echo "wrk.headers[\"Authorization\"] = \"Bearer $key\"" >"$tmp/rest-key.lua"
: >"$tmp/rest-anon.lua"

# run LABEL URL SCRIPT: prints req/s and server CPU µs per request.
run() {
  local out
  runstat_begin "$pier_pid"
  out=$(taskset -c 1 wrk -t1 -c"$CONNS" -d"$DURATION" -s "$3" "$2" | tee -a "$tmp/wrk.log")
  runstat_end "$1"
  awk -v cpu="$RS_SERVER" '/requests in/ {n = $1} /Requests\/sec/ {r = $2} END {printf "%s %.2f\n", r, (n > 0 ? cpu * 1e6 / n : 0)}' <<<"$out"
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

echo "wrk -t1 -c$CONNS -d$DURATION, $REPEAT rounds, order alternating; pier on CPU 0, wrk on CPU 1; medians (a ratio is the median of the rounds'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-22s %10s %10s %9s %9s %9s %12s\n' case "mcp req/s" "rest req/s" "mcp/rest" "mcp µs" "rest µs" "cpu rest/mcp"
for kind in key anon; do
  mr=() rr=() mc=() rc=() ratio=() cratio=()
  for i in $(seq "$REPEAT"); do
    if [ $((i % 2)) = 1 ]; then
      read -r r1 c1 < <(run "rest $kind" "http://$PIER$SEARCH" "$tmp/rest-$kind.lua")
      read -r m1 d1 < <(run "mcp $kind" "http://$PIER/mcp" "$tmp/mcp-$kind.lua")
    else
      read -r m1 d1 < <(run "mcp $kind" "http://$PIER/mcp" "$tmp/mcp-$kind.lua")
      read -r r1 c1 < <(run "rest $kind" "http://$PIER$SEARCH" "$tmp/rest-$kind.lua")
    fi
    mr+=("$m1") rr+=("$r1") mc+=("$d1") rc+=("$c1")
    ratio+=("$(echo "$m1 / $r1" | bc -l)") cratio+=("$(echo "$c1 / $d1" | bc -l)")
  done
  m=$(median "${mr[@]}") r=$(median "${rr[@]}") md=$(median "${mc[@]}") rd=$(median "${rc[@]}")
  q=$(median "${ratio[@]}") cq=$(median "${cratio[@]}")
  label=$([ "$kind" = key ] && echo "keyed" || echo "anonymous")
  printf '%-22s %10.0f %10.0f %9.2f %9.2f %9.2f %12.2f\n' "search_domains, $label" "$m" "$r" "$q" "$md" "$rd" "$cq"
  printf '  runs: mcp %s | rest %s | mcp µs/req %s | rest µs/req %s\n' "${mr[*]}" "${rr[*]}" "${mc[*]}" "${rc[*]}" >&2
  result "MCP tools/call vs REST over HTTP, $label search_domains (wrk -c$CONNS)" "$m" "$r" "$q" "req/s"
  result "MCP tools/call vs REST over HTTP, $label search_domains, server CPU per request (ratio rest/mcp)" "$md" "$rd" "$cq" "µs/req"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
grep -E "Non-2xx|Socket errors" "$tmp/wrk.log" && { echo "errors during the run"; exit 1; } || true
