#!/usr/bin/env bash
# Digest deploys with the CLI exec'd as a user runs it: `pier launch DIR`
# of a site of N files of 1 KiB (folders of 100, an index.html among them)
# against one `pier server` (SQLite, the local CA) on loopback, timed until
# its preview host answers the site's index over HTTPS with 200
# (bench/httpwait, one kept connection trusting only the server's CA;
# CURL=1 for an exec'd curl a poll, as before 2026-11-27); then ROUNDS times one file changed and
# `pier launch DIR` again, timed until that file answers with its new
# content. The CLI keeps its digest cache under PIER_CACHE_DIR, as under
# the user's cache directory. A deploy of 5,000 files or more starts the
# CLI's watcher of the site (pier __watch), as it does for a user: the
# first deploy starts it, the first change takes its token with a walk of
# the whole site, and the changes after go by its answer (round 1 against
# rounds 2 and on). WATCHER=off runs every deploy without it
# (PIER_WATCHER=off); under CI=true none starts unless WATCHER=on.
#
#   bash bench/deploys.sh                      # 1,000, 20,000 and 100,000 files
#   SIZES="1000 20000" ROUNDS=5 bash bench/deploys.sh
#   WATCHER=off bash bench/deploys.sh          # every deploy walks the whole site
#   CURL=1 SIZES=1000 bash bench/deploys.sh   # wait with curl, as before
#   RESULTS=file RUNSTATS=file bash bench/deploys.sh   # as bench/peers.sh does
#   PERF=/tmp/perf.data SIZES=20000 ROUNDS=1 bash bench/deploys.sh
#       # perf record -g of the server during each first deploy, to PERF.N
#   CLIPERF=/tmp/cli.perf SIZES=20000 ROUNDS=3 bash bench/deploys.sh
#       # perf record -g of each exec'd CLI, to CLIPERF.sN.K
#
# Goals (issue "Performance, part three"): 20,000 files <= 3 s and 100,000
# <= 15 s to the first HTTPS 200; a one-file change <= 150 ms at every size.
# Each row prints the wall time, the server's CPU time (from /proc) and the
# CLI's (user + system, from the rusage of its process).
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-1000 20000 100000}
ROUNDS=${ROUNDS:-3}
# shellcheck source=bench/runstat.sh
. bench/runstat.sh
for t in jq bc curl python3; do command -v $t >/dev/null || { echo "deploys.sh: needs $t" >&2; exit 1; }; done
mkdir -p bin
CGO_ENABLED=0 go build -o bin/pier ./cmd/pier # static, as make build makes it
go build -o bin/pier-server ./cmd/pier-server
CGO_ENABLED=0 go build -o bin/httpwait ./bench/httpwait

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

PORT=${PORT:-18096} # the API's; the next three are HTTPS, DNS and SMTP
API=127.0.0.1:$PORT
for port in $PORT $((PORT + 1)) $((PORT + 2)) $((PORT + 3)); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "deploys.sh: port $port is taken" >&2; exit 1; fi
done
export PIER_DATA_DIR=$tmp/data
mkdir -p "$PIER_DATA_DIR"
key=$(./bin/pier-server admin create-key --scopes read,quote,launch --json | jq -r .apiKey)
project=$(./bin/pier-server admin create-project --name bench --budget-usd 1000 --json | jq -r .projectId)
./bin/pier-server server --http-addr $API --https-addr 127.0.0.1:$((PORT + 1)) --dns-addr 127.0.0.1:$((PORT + 2)) --smtp-addr 127.0.0.1:$((PORT + 3)) --log-level warn 2>"$tmp/pier.log" &
pids+=($!)
pier_pid=$!
for _ in $(seq 100); do curl -fsS "http://$API/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
./bin/pier-server ca >"$tmp/ca.pem"
export PIER_BASE_URL=http://$API PIER_API_KEY=$key PIER_CACHE_DIR=$tmp/cache
if [ -n "${WATCHER:-}" ]; then export PIER_WATCHER=$WATCHER; fi

# site DIR N: N files of 1 KiB of fresh text, folders of 100.
site() {
  python3 - "$1" "$2" <<'PY'
import base64, os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    sub = os.path.join(d, "p", "%04d" % (i // 100))
    if i % 100 == 0:
        os.makedirs(sub, exist_ok=True)
    with open(os.path.join(sub, "%06d.html" % i), "wb") as f:
        f.write(base64.b64encode(os.urandom(768)))
with open(os.path.join(d, "index.html"), "w") as f:
    f.write("<!doctype html><title>%d files</title>" % n)
PY
}

now() { date +%s%N; }
server_cpu() { awk '{print $14 + $15}' "/proc/$pier_pid/stat"; }
tick=$(getconf CLK_TCK)

# served URL FILE: waits until URL answers 200 with FILE's bytes, polling
# every 2 ms over one kept HTTPS connection that trusts only the server's
# CA (bench/httpwait). CURL=1 polls with an exec'd curl instead, as this
# script did before: each poll then pays curl's start and a full TLS
# handshake, 10 to 30 ms on the 2-core machine.
served() {
  local url=$1 want=$2 hostport port
  hostport=${url#https://}; hostport=${hostport%%/*}
  port=${hostport##*:}
  if [ "${CURL:-0}" != 1 ]; then
    ./bin/httpwait -cacert "$tmp/ca.pem" -addr "127.0.0.1:$port" -timeout 60s "$url" "$want"
    return
  fi
  local host=${hostport%:*}
  for _ in $(seq 30000); do
    if curl -fsS --cacert "$tmp/ca.pem" --resolve "$host:$port:127.0.0.1" "$url" -o "$tmp/got" 2>/dev/null && cmp -s "$tmp/got" "$want"; then
      return 0
    fi
    sleep 0.002
  done
  echo "deploys.sh: $url never served $want" >&2
  return 1
}

# deploy DIR NAME PATH: pier launch, then waits for PATH; prints the wall
# ms, the server's CPU ms, the CLI's CPU ms and the preview URL.
deploy() {
  local dir=$1 name=$2 path=$3 t0 c0 out preview
  c0=$(server_cpu)
  t0=$(now)
  local perf=()
  if [ -n "${CLIPERF:-}" ]; then perf=(perf record -g -q -F 2000 -o "$CLIPERF.$name.$(now)" --); fi
  out=$(/usr/bin/time -f '%U %S' -o "$tmp/cli.time" "${perf[@]}" ./bin/pier launch "$dir" --project "$project" --name "$name" 2>"$tmp/cli.err") || { cat "$tmp/cli.err" >&2; return 1; }
  preview=
  [[ $out =~ (^|$'\n')(https://[^[:space:]]+) ]] && preview=${BASH_REMATCH[2]}
  [ -n "$preview" ] || { echo "deploys.sh: no preview URL in: $out" >&2; return 1; }
  served "${preview%/}/$path" "$dir/$path"
  local t1 c1
  t1=$(now)
  c1=$(server_cpu)
  read -r u s <"$tmp/cli.time"
  echo "$(( (t1 - t0) / 1000000 )) $(( (c1 - c0) * 1000 / tick )) $(bc <<<"($u + $s) * 1000 / 1") $preview"
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

printf '%-9s %-16s %10s %12s %10s %8s\n' files case "wall ms" "server cpu ms" "cli cpu ms" goal
for n in $SIZES; do
  dir=$tmp/site-$n
  site "$dir" "$n"
  sync
  runstat_begin "$pier_pid"
  if [ -n "${PERF:-}" ]; then perf record -g -q -o "$PERF.$n" -p "$pier_pid" 2>/dev/null & perf_pid=$!; sleep 0.5; fi
  read -r wall scpu ccpu _ < <(deploy "$dir" "s$n" index.html)
  if [ -n "${PERF:-}" ]; then kill -INT "$perf_pid"; wait "$perf_pid" || true; fi
  runstat_end "first deploy of $n files"
  goal=-
  case $n in 20000) goal=3000 ;; 100000) goal=15000 ;; esac
  printf '%-9s %-16s %10s %12s %10s %8s\n' "$n" "first deploy" "$wall" "$scpu" "$ccpu" "$goal"
  [ "$goal" = - ] || result "$n files of 1 KiB to the first HTTPS 200, CLI exec'd, vs the goal" "$wall" "$goal" "$(bc -l <<<"$goal / $wall")" "ms, goal"
  walls=() scpus=() ccpus=()
  for r in $(seq "$ROUNDS"); do
    f=p/0000/000007.html
    echo "<p>change $r at $(now)</p>" >"$dir/$f"
    runstat_begin "$pier_pid"
    read -r wall scpu ccpu _ < <(deploy "$dir" "s$n" "$f")
    runstat_end "one-file change of $n files"
    walls+=("$wall") scpus+=("$scpu") ccpus+=("$ccpu")
    echo "  round $r: $wall ms (server $scpu ms, cli $ccpu ms)" >&2
  done
  w=$(median "${walls[@]}")
  printf '%-9s %-16s %10s %12s %10s %8s\n' "$n" "one-file change" "$w" "$(median "${scpus[@]}")" "$(median "${ccpus[@]}")" 150
  result "one-file change of $n files to HTTPS, CLI exec'd (median of $ROUNDS), vs the goal" "$w" 150 "$(bc -l <<<"150 / $w")" "ms, goal"
  rm -rf "$dir"
done
