#!/usr/bin/env bash
# Every ratio of the performance work against its peer, in one table. It
# runs the other bench scripts with their knobs (each starts its own
# servers on loopback, pins them to CPU 0 and the load tool to CPU 1, and
# interleaves Pier and the peer in REPEAT rounds) and the MCP benchmark,
# collects their machine-readable results (RESULTS) and per-run CPU
# records (RUNSTATS, bench/runstat.sh), and prints one markdown table of
# medians and ratios, then the runs that other processes disturbed.
#
#   bash bench/peers.sh                      # 5 rounds of 5 s: about 15 min
#   REPEAT=1 DURATION=2 bash bench/peers.sh  # a quick pass
#   PARTS="edge dns" bash bench/peers.sh     # some parts only
#
#   part      script              comparisons
#   edge      bench/edge.sh       HTTP/1.1 1 KiB, 64 KiB and 1 MiB, plain and TLS, vs nginx
#                                 (wrk), by throughput and by server CPU per request;
#                                 HTTP/2 vs nginx (h2load -c64 -m10), both by CPU too;
#                                 nginx pinned to TLS 1.3 with Pier's cipher (checked);
#                                 the order alternates every round; HTTP/3 vs Pier's
#                                 own HTTP/2 (bench/httpload); p99 at 1 KiB vs nginx
#                                 at the same paced load (P99_RATE, default 10000 req/s)
#   dns       bench/dns.sh        DNS vs NSD (dnsperf)
#   api       bench/wrk.sh        search_domains and estimate vs bare net/http (wrk)
#   services  bench/services.sh   proxied examples/app vs direct (wrk)
#   mcp       go test ./bench/    MCP tools/call vs REST (BenchmarkMCPSearchDomains)
#   mcphttp   bench/mcp.sh        MCP tools/call vs REST over real HTTP (wrk -c16), keyed
#                                 and anonymous, with server CPU per request
#   agent     go test ./bench/    a keyed cached read vs the anonymous one, and create_quote on
#                                 SQLite and PostgreSQL (BenchmarkServerCPU*, the server in a
#                                 process of its own): server CPU per request from /proc, against
#                                 the goals (keyed ≤ 1.5× anonymous, create_quote ≤ 250 µs),
#                                 and requests a second beside it; then create_quote's floor on
#                                 SQLite: its store calls alone, a quote a transaction and four
#                                 (BenchmarkQuoteStoreFloor)
#   cli       hyperfine           `pier --version` vs a bare cobra binary (bench/barecobra)
#   launch    go test ./bench/    50-file launch to the first HTTPS 200 (BenchmarkLaunchLatency),
#                                 against the issue's goals (p50 25 ms, 5 MB per launch)
#   digest    go test ./bench/    20,000-file digest deploy and a one-file relaunch
#                                 (BenchmarkDigestDeploy), against the goals (5 s, 300 ms)
#   deploys   bench/deploys.sh    1,000, 20,000 and 100,000 files with the CLI exec'd, to the
#                                 first HTTPS 200 and a one-file change, against the goals
#                                 (3 s, 15 s, 150 ms); not in the default PARTS (minutes)
#
# Rows whose peer is a goal rather than a program print the goal as the
# peer and goal/pier as the ratio, so that at least 1.0 means met.
#
# A run is flagged when the two CPUs' busy time, less the CPU time of the
# processes under test (servers and their children, and the load tool),
# passes FLAG_OTHER of a core (default 0.25): other work on the machine
# took part of the run. It installs nginx, NSD, wrk, h2load
# (nghttp2-client) and dnsperf from Debian when missing, and fails if one
# cannot be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=${REPEAT:-5}
DURATION=${DURATION:-5} # seconds per run
DURATION=${DURATION%s}
P99_RATE=${P99_RATE:-10000}
MCP_N=${MCP_N:-20000}
READ_N=${READ_N:-20000}  # requests per keyed/anonymous read run (agent)
WRITE_N=${WRITE_N:-4000} # create_quote requests per engine and run (agent)
PARTS=${PARTS:-edge dns api services mcp mcphttp agent cli launch digest}
export FLAG_OTHER=${FLAG_OTHER:-0.25}
[[ "$REPEAT" =~ ^[1-9][0-9]?$ ]] || { echo "peers.sh: REPEAT must be 1 to 99" >&2; exit 1; }
[[ "$DURATION" =~ ^[1-9][0-9]{0,2}$ ]] || { echo "peers.sh: DURATION must be 1 to 999 seconds" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "peers.sh: needs two CPUs (server on CPU 0, load on CPU 1)" >&2; exit 1; }

# Tools: command, then the Debian package that has it.
tools=(wrk:wrk h2load:nghttp2-client /usr/sbin/nginx:nginx /usr/sbin/nsd:nsd dnsperf:dnsperf
  jq:jq bc:bc curl:curl openssl:openssl python3:python3 taskset:util-linux hyperfine:hyperfine)
have() { if [[ $1 == /* ]]; then [ -x "$1" ]; else command -v "$1" >/dev/null; fi; }
need=()
for t in "${tools[@]}"; do have "${t%%:*}" || need+=("${t#*:}"); done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}" >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null; } ||
    echo "peers.sh: apt-get could not install ${need[*]}" >&2
fi
for t in "${tools[@]}"; do
  have "${t%%:*}" || { echo "peers.sh: ${t%%:*} is missing and Debian's ${t#*:} could not be installed; install it and run again" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export RESULTS=$tmp/results RUNSTATS=$tmp/runstats
: >"$RESULTS"
: >"$RUNSTATS"
# shellcheck source=bench/runstat.sh
. bench/runstat.sh

cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
ver() { "$@" 2>&1 | head -1; }
load0=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date -u +%Y-%m-%dT%H:%MZ)
echo "bench/peers.sh: parts: $PARTS; $REPEAT rounds of ${DURATION} s per side; load average $load0" >&2

failed=()
part() { # name command...
  local name=$1
  shift
  echo "== $name: $*" >&2
  if ! "$@" >"$tmp/$name.log" 2>&1; then
    failed+=("$name")
    echo "!! $name failed; the end of its output:" >&2
    tail -20 "$tmp/$name.log" >&2
  fi
  grep -v '^  runs:' "$tmp/$name.log" | tail -15 >&2
}
for p in $PARTS; do
  case $p in
  edge) part edge env PEERS=nginx H2=1 H3=1 P99=1 P99_RATE="$P99_RATE" DURATION="${DURATION}s" REPEAT="$REPEAT" bash bench/edge.sh ;;
  dns) part dns env DURATION="$DURATION" REPEAT="$REPEAT" bash bench/dns.sh ;;
  api) part api env DURATION="${DURATION}s" REPEAT="$REPEAT" bash bench/wrk.sh ;;
  services) part services env DURATION="${DURATION}s" REPEAT="$REPEAT" bash bench/services.sh ;;
  mcp)
    # In one process: Pier in-process on loopback, the client interleaving
    # one REST request and one tools/call per iteration; both CPUs.
    mcp() {
      local out r rs=() ms=() es=()
      go test -c -o "$tmp/bench.test" ./bench/
      for _ in $(seq "$REPEAT"); do
        runstat_begin
        out=$(cd bench && "$tmp/bench.test" -test.run '^$' -test.bench MCPSearchDomains -test.benchtime "${MCP_N}x" -test.count 1)
        runstat_end "mcp+rest (one process)"
        echo "$out"
        r=$(awk '/^BenchmarkMCPSearchDomains/ { for (i = 2; i < NF; i++) { if ($(i+1) == "ratio") r = $i; if ($(i+1) == "mcp-ns/call") m = $i; if ($(i+1) == "rest-ns/req") e = $i } } END { print r, m, e }' <<<"$out")
        read -r a b c <<<"$r"
        [ -n "$a" ] || { echo "no ratio in the benchmark's output"; return 1; }
        rs+=("$a") ms+=("$b") es+=("$c")
      done
      med() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
      result "MCP tools/call vs REST, search_domains (Go benchmark)" "$(awk -v n="$(med "${ms[@]}")" 'BEGIN { printf "%.0f", 1e9 / n }')" \
        "$(awk -v n="$(med "${es[@]}")" 'BEGIN { printf "%.0f", 1e9 / n }')" "$(med "${rs[@]}")" "calls/s, one at a time"
    }
    part mcp mcp
    ;;
  mcphttp) part mcphttp env DURATION="${DURATION}s" REPEAT="$REPEAT" bash bench/mcp.sh ;;
  agent)
    # An agent's requests: a key on the cached search, and a write. The
    # client and the server (this test binary again, in its own process)
    # share both CPUs; what to read is the server's CPU per request, which
    # the benchmark takes from /proc and the sharing barely moves.
    agent() {
      local out
      go test -c -o "$tmp/bench.test" ./bench/
      for _ in $(seq "$REPEAT"); do
        runstat_begin
        out=$(cd bench && "$tmp/bench.test" -test.run '^$' -test.bench 'ServerCPURead' -test.benchtime "${READ_N}x" -test.count 1)
        out+=$'\n'$(cd bench && "$tmp/bench.test" -test.run '^$' -test.bench 'ServerCPUCreateQuote' -test.benchtime "${WRITE_N}x" -test.count 1)
        runstat_end "keyed read and create_quote (server in its own process)"
        echo "$out"
        # name ns/op server-µs/op, per benchmark
        awk '/^BenchmarkServerCPU/ { n = $1; sub(/-[0-9]+$/, "", n); for (i = 2; i < NF; i++) { if ($(i+1) == "ns/op") ns = $i; if ($(i+1) == "server-µs/op") us = $i } print n, ns, us }' <<<"$out" >"$tmp/agent.txt"
        get() { awk -v n="$1" -v f="$2" '$1 == n { print $f }' "$tmp/agent.txt"; }
        local an ak au ku sq sqn pg pgn
        an=$(get BenchmarkServerCPURead/search/anonymous 2) au=$(get BenchmarkServerCPURead/search/anonymous 3)
        ak=$(get BenchmarkServerCPURead/search/keyed 2) ku=$(get BenchmarkServerCPURead/search/keyed 3)
        sqn=$(get BenchmarkServerCPUCreateQuote/sqlite 2) sq=$(get BenchmarkServerCPUCreateQuote/sqlite 3)
        pgn=$(get BenchmarkServerCPUCreateQuote/postgres 2) pg=$(get BenchmarkServerCPUCreateQuote/postgres 3)
        [ -n "$ku" ] && [ -n "$sq" ] || { echo "missing results in the benchmarks' output"; return 1; }
        result "keyed search_domains vs anonymous, 4 clients (Go benchmark)" "$(bc -l <<<"1000000000 / $ak")" "$(bc -l <<<"1000000000 / $an")" "$(bc -l <<<"$an / $ak")" "req/s"
        result "keyed search_domains, server CPU vs the goal of 1.5× anonymous" "$ku" "$(bc -l <<<"1.5 * $au")" "$(bc -l <<<"1.5 * $au / $ku")" "server µs/req, goal"
        result "create_quote on SQLite, 4 clients (Go benchmark)" "$(bc -l <<<"1000000000 / $sqn")" "$(bc -l <<<"1000000000 / $sqn")" 1 "req/s, no peer"
        result "create_quote on SQLite, server CPU vs the goal" "$sq" 250 "$(bc -l <<<"250 / $sq")" "server µs/req, goal"
        if [ -n "$pg" ]; then
          result "create_quote on PostgreSQL, 4 clients (Go benchmark)" "$(bc -l <<<"1000000000 / $pgn")" "$(bc -l <<<"1000000000 / $pgn")" 1 "req/s, no peer"
          result "create_quote on PostgreSQL, server CPU (without PostgreSQL's) vs the goal" "$pg" 250 "$(bc -l <<<"250 / $pg")" "server µs/req, goal"
        fi
      done
      # The floor: what the store alone costs a held quote on SQLite, whose
      # engine runs in the server's process. The server's CPU comes down
      # towards it, not below it.
      go test -c -o "$tmp/store.test" ./server/internal/store/
      for _ in $(seq "$REPEAT"); do
        out=$("$tmp/store.test" -test.run '^$' -test.bench QuoteStoreFloor -test.benchtime "${WRITE_N}x" -test.count 1)
        echo "$out"
        local alone grouped
        alone=$(awk '/^BenchmarkQuoteStoreFloor\/alone/ { for (i = 2; i < NF; i++) if ($(i+1) == "cpu-µs/op") print $i }' <<<"$out")
        grouped=$(awk '/^BenchmarkQuoteStoreFloor\/grouped/ { for (i = 2; i < NF; i++) if ($(i+1) == "cpu-µs/op") print $i }' <<<"$out")
        [ -n "$alone" ] && [ -n "$grouped" ] || { echo "missing results in the floor benchmark's output"; return 1; }
        result "create_quote's store calls alone on SQLite, a quote a transaction, vs the goal" "$alone" 250 "$(bc -l <<<"250 / $alone")" "cpu µs/quote, goal"
        result "create_quote's store calls alone on SQLite, four a transaction, vs the goal" "$grouped" 250 "$(bc -l <<<"250 / $grouped")" "cpu µs/quote, goal"
      done
    }
    part agent agent
    ;;
  cli)
    # Wall time of a whole start, without a shell, on CPU 0: the client
    # binary as `make build` makes it (static, without cgo), and the bare
    # cobra binary built the same way.
    cli() {
      local p b
      CGO_ENABLED=0 go build -o "$tmp/pier" ./cmd/pier
      CGO_ENABLED=0 go build -o "$tmp/bare" ./bench/barecobra
      for _ in $(seq "$REPEAT"); do
        runstat_begin
        taskset -c 0 hyperfine -N -w 30 -r 300 --export-json "$tmp/cli.json" "$tmp/bare --version" "$tmp/pier --version" >/dev/null
        runstat_end "cli start"
        read -r b p < <(jq -r '[.results[].median * 1000] | @tsv' "$tmp/cli.json")
        echo "bare $b ms, pier $p ms (hyperfine median of 300)"
        result "CLI start, pier --version vs bare cobra (hyperfine median)" "$p" "$b" "$(bc -l <<<"$b / $p")" "ms"
        result "CLI start, pier --version vs the goal of 3 ms (hyperfine median)" "$p" 3 "$(bc -l <<<"3 / $p")" "ms, goal"
      done
    }
    part cli cli
    ;;
  launch)
    launch() {
      local out
      go test -c -o "$tmp/bench.test" ./bench/
      for _ in $(seq "$REPEAT"); do
        runstat_begin
        out=$(cd bench && "$tmp/bench.test" -test.run '^$' -test.bench 'LaunchLatency$' -test.benchmem -test.benchtime 4x -test.count 1)
        runstat_end "launch latency (one process)"
        echo "$out"
        read -r p50 mb < <(awk '/^BenchmarkLaunchLatency/ { for (i = 2; i < NF; i++) { if ($(i+1) == "p50-ms") p = $i; if ($(i+1) == "B/op") b = $i; if ($(i+1) == "launches/op") n = $i } } END { print p, b / n / 1e6 }' <<<"$out")
        [ -n "$p50" ] || { echo "no p50 in the benchmark's output"; return 1; }
        result "50-file launch to the first HTTPS 200, p50, vs the goal" "$p50" 25 "$(bc -l <<<"25 / $p50")" "ms, goal"
        result "50-file launch, MB allocated per launch, vs the goal" "$mb" 5 "$(bc -l <<<"5 / $mb")" "MB, goal"
      done
    }
    part launch launch
    ;;
  digest)
    digest() {
      local out
      go test -c -o "$tmp/bench.test" ./bench/
      for _ in $(seq "$REPEAT"); do
        runstat_begin
        out=$(cd bench && "$tmp/bench.test" -test.run '^$' -test.bench 'DigestDeploy$' -test.benchtime 1x -test.count 1 -test.timeout 30m)
        runstat_end "digest deploy (one process)"
        echo "$out"
        read -r first one sent < <(awk '/^BenchmarkDigestDeploy/ { for (i = 2; i < NF; i++) { if ($(i+1) == "first-s") f = $i; if ($(i+1) == "one-file-ms") o = $i; if ($(i+1) == "files-sent-after-one-change") s = $i } } END { print f, o, s }' <<<"$out")
        [ -n "$first" ] || { echo "no first-s in the benchmark's output"; return 1; }
        result "20,000 files of 1 KiB to the first HTTPS 200, vs the goal" "$first" 5 "$(bc -l <<<"5 / $first")" "s, goal"
        result "one-file relaunch of 20,000 files (${sent%.*} sent), vs the goal" "$one" 300 "$(bc -l <<<"300 / $one")" "ms, goal"
      done
    }
    part digest digest
    ;;
  deploys) part deploys env ROUNDS="$REPEAT" bash bench/deploys.sh ;;
  *) echo "peers.sh: unknown part $p (edge, dns, api, services, mcp, mcphttp, agent, cli, launch, digest, deploys)" >&2; exit 1 ;;
  esac
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)

echo
echo "bench/peers.sh, $start: $(nproc) × $cpu, $(uname -r); load average $load0 before, $load1 after"
echo "$(go version | cut -d' ' -f3), $(ver /usr/sbin/nginx -v), $(ver /usr/sbin/nsd -v), $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2), $(ver h2load --version), $(dnsperf -h 2>&1 | awk '/^Version/ {print "dnsperf " $2}'), quic-go $(go list -m -f '{{.Version}}' github.com/quic-go/quic-go)"
echo "REPEAT=$REPEAT rounds of DURATION=${DURATION} s per side, Pier and the peer interleaved; servers on CPU 0, load on CPU 1; medians, and ratios as medians of the rounds' ratios"
echo
echo "| comparison | pier | peer | ratio | unit |"
echo "|---|---:|---:|---:|---|"
# One row per comparison; a comparison recorded once per round (the
# cli, launch and digest parts) shows the median of its rounds.
python3 - "$RESULTS" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, pier, peer, ratio, unit = line.rstrip("\n").split("\t")
    rows.setdefault((name, unit), []).append((float(pier), float(peer), float(ratio)))
f = lambda v: f"{v:.2f}" if v < 100 else f"{v:.0f}"
for (name, unit), vs in rows.items():
    pier, peer, ratio = (statistics.median(v[i] for v in vs) for i in range(3))
    n = f" (median of {len(vs)})" if len(vs) > 1 else ""
    print(f"| {name}{n} | {f(pier)} | {f(peer)} | {ratio:.2f} | {unit} |")
PY
echo
total=$(wc -l <"$RUNSTATS")
flagged=$(grep -c ' FLAGGED$' "$RUNSTATS" || true)
echo "Runs: $total; flagged (other processes took more than $FLAG_OTHER of a core): $flagged."
if [ "$flagged" -gt 0 ]; then
  echo
  echo "| flagged run | wall s | under test, cores | load tool, cores | CPU 0 % | CPU 1 % | other, cores |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  # label words, then wall server client cpu0 cpu1 other flag
  awk '$NF == "FLAGGED" { l = $1; for (i = 2; i <= NF - 7; i++) l = l " " $i
    printf "| %s | %s | %s | %s | %s | %s | %s |\n", l, $(NF-6), $(NF-5), $(NF-4), $(NF-3), $(NF-2), $(NF-1) }' "$RUNSTATS"
fi
awk '{ print $(NF-1) }' "$RUNSTATS" | sort -g | awk '{ o[NR] = $1 } END { if (NR) printf "\nOther processes per run: median %.2f of a core, max %.2f.\n", o[int((NR+1)/2)], o[NR] }'
if [ ${#failed[@]} -gt 0 ]; then
  echo "Parts that failed: ${failed[*]} (their rows are missing)."
  exit 1
fi
