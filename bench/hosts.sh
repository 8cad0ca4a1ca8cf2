#!/usr/bin/env bash
# Unknown Hosts against a known site, end to end: Pier's edge (SQLite, the
# in-memory host index on) serves a launched site, and wrk asks it, over
# plain HTTP/1.1 keep-alive, for the site's 1 KiB page by its preview host,
# then for the same path under random hosts no site has (404), both
# requested through the same Lua, in alternating order. Prints
# requests per second and Pier's CPU per request for each, and the ratio
# random/known of requests a second (goal: >= 0.8). Pier is pinned to CPU
# 0 and wrk to CPU 1.
#
#   bash bench/hosts.sh                  # 3 rounds of 5 s each
#   DURATION=10s REPEAT=5 CONNS=32 bash bench/hosts.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-5s}
REPEAT=${REPEAT:-3}
CONNS=${CONNS:-32}
for c in wrk jq curl taskset; do command -v $c >/dev/null || { echo "hosts.sh: needs $c" >&2; exit 1; }; done
mkdir -p bin && go build -o bin/pier-server ./cmd/pier-server && go build -o bin/pier ./cmd/pier

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

addr=127.0.0.1:18290
if ss -Htln 'sport = :18290' | grep -q .; then echo "hosts.sh: $addr is in use; stop it and run again" >&2; exit 1; fi
export PIER_DATA_DIR=$tmp/data PIER_BASE_URL=http://$addr
mkdir -p "$PIER_DATA_DIR" "$tmp/site"
head -c 1024 /dev/zero | tr '\0' 'x' >"$tmp/site/1k.txt"
echo '<h1>hosts</h1>' >"$tmp/site/index.html"
export PIER_API_KEY=$(bin/pier-server admin create-key --scopes read,quote,launch --json | jq -r .apiKey)
project=$(bin/pier-server admin create-project --name hostsbench --json | jq -r .projectId)
setsid taskset -c 0 bin/pier-server server --http-addr $addr --https-addr 127.0.0.1:18643 --dns-addr 127.0.0.1:18253 \
  --smtp-addr 127.0.0.1:18225 --log-level warn 2>"$tmp/pier.log" &
pid=$!
pids+=($pid)
for _ in $(seq 100); do curl -fsS "http://$addr/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
preview=$(bin/pier launch "$tmp/site" --project "$project" --name hosts --json 2>"$tmp/launch.log" | jq -r .data.previewUrl) ||
  { cat "$tmp/launch.log" >&2; exit 1; }
host=${preview#https://}; host=${host%%/*}; host=${host%%:*}
cat >"$tmp/random.lua" <<'LUA'
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/1k.txt", { ["Host"] = string.format("r%x-%d.localhost", math.random(0, 2^30), n) })
end
LUA
# The known site's requests are made by the same Lua, so that wrk spends
# the same on each request of both runs: the ratio is the server's.
cat >"$tmp/known.lua" <<'LUA'
local n = 0
request = function()
  n = n + 1
  local _ = string.format("r%x-%d.localhost", math.random(0, 2^30), n)
  return wrk.format("GET", "/1k.txt", { ["Host"] = os.getenv("KNOWN_HOST") })
end
LUA
ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
# run LABEL wrk-args… → "req/s µs-of-CPU-per-request"
run() {
  local t0 t1 out rps reqs
  t0=$(ticks)
  out=$(taskset -c 1 wrk -t1 -c"$CONNS" -d"$DURATION" "$@")
  t1=$(ticks)
  rps=$(awk '/^Requests\/sec/ { print $2 }' <<<"$out")
  reqs=$(awk '/requests in/ { print $1 }' <<<"$out")
  echo "$rps $(awk -v d=$((t1 - t0)) -v hz="$hz" -v r="$reqs" 'BEGIN { printf "%.1f", d / hz * 1e6 / r }')"
}
echo "pier edge site: $preview; wrk -t1 -c$CONNS -d$DURATION, $REPEAT rounds; load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
curl -fsS -o /dev/null -H "Host: $host" "http://$addr/1k.txt"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: nobody-here.localhost' "http://$addr/1k.txt")" = 404 ]
echo "| round | known site req/s | µs CPU/req | random hosts (404) req/s | µs CPU/req | random/known |"
echo "|---|---:|---:|---:|---:|---:|"
export KNOWN_HOST=$host
for i in $(seq "$REPEAT"); do
  # The known site first in odd rounds, the random hosts first in even ones.
  if [ $((i % 2)) = 1 ]; then
    read -r kr kc < <(run -s "$tmp/known.lua" "http://$addr/")
    read -r rr rc < <(run -s "$tmp/random.lua" "http://$addr/")
  else
    read -r rr rc < <(run -s "$tmp/random.lua" "http://$addr/")
    read -r kr kc < <(run -s "$tmp/known.lua" "http://$addr/")
  fi
  echo "| $i | $kr | $kc | $rr | $rc | $(awk -v a="$rr" -v b="$kr" 'BEGIN { printf "%.2f", a / b }') |"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
