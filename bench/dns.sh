#!/usr/bin/env bash
# Pier's authoritative DNS against NSD, serving the same zone on loopback,
# measured with dnsperf. Prints queries per second per server, each
# server's CPU use during its runs, the queries it answered per second of
# its CPU, and the ratios pier/nsd of both (goal: >= 0.8; see
# bench/README.md for which to read).
#
#   bash bench/dns.sh                    # 3 rounds of 10 s per server
#   DURATION=5 REPEAT=5 CLIENTS=16 bash bench/dns.sh
#   QUERIES=random bash bench/dns.sh     # random names under the zone (NXDOMAIN), no answer cached
#   PIER_BIN=/tmp/pier-old bash bench/dns.sh   # another build of pier-server (or a pier from before the split)
#   RESULTS=file RUNSTATS=file bash bench/dns.sh   # for bench/peers.sh
#
# Pier's zone is a real launch's: `pier server` (response rate limiting
# off, --dns-rrl-rate 0) launches examples/site with a domain bought from
# the sandbox registrar, and NSD serves the master file of that zone from
# the project's leave package (pier export). Both servers run at once,
# pinned to CPU 0 (NSD with one server process, rrl off); dnsperf runs on
# CPU 1 against one, then the other, in each round. The queries are what a
# resolver asks of such a zone (A and AAAA of the apex and www, NS, SOA,
# CAA, a missing name), with EDNS and the DO bit, as resolvers send them.
#
# Each server's CPU use is its process time (user + system) over the run's
# wall time, and CPU 0's and CPU 1's busy share comes from /proc/stat: a
# server well under 100 % was held back by dnsperf (client-bound), not by
# itself, and then queries per CPU-second compares the servers where
# queries per second cannot; a busy CPU 0 when the server was not means
# another process shared it. Rounds are on stderr; the table on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10}
REPEAT=${REPEAT:-3}
CLIENTS=${CLIENTS:-8}
OUTSTANDING=${OUTSTANDING:-200}
QUERIES=${QUERIES:-zone} # zone: a resolver's questions; random: random names under the zone
DNSPERF_FLAGS=${DNSPERF_FLAGS:--D}
# shellcheck source=bench/runstat.sh
. bench/runstat.sh
need=()
command -v dnsperf >/dev/null || need+=(dnsperf)
[ -x /usr/sbin/nsd ] || need+=(nsd)
command -v jq >/dev/null || need+=(jq)
command -v curl >/dev/null || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
# PIER_BIN runs another build of pier-server (an older commit's, say) in place
# of this tree's; before pier and pier-server were apart, pier was that binary.
PIER_BIN=${PIER_BIN:-bin/pier-server}
if [ "$PIER_BIN" = bin/pier-server ]; then mkdir -p bin && go build -o bin/pier-server ./cmd/pier-server; fi

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

PIER_HTTP=127.0.0.1:18190 PIER_DNS_PORT=18153 NSD_PORT=18154
# Another server on these ports would answer in its place: stop early.
if ss -Htln 'sport = :18190' | grep -q . || ss -Htln 'sport = :18543' | grep -q .; then
  echo "$(basename "$0"): 127.0.0.1:18190 or :18543 is in use by another process; stop it and run again" >&2
  exit 1
fi
export PIER_DATA_DIR=$tmp/data PIER_BASE_URL=http://$PIER_HTTP
mkdir -p "$PIER_DATA_DIR"
export PIER_API_KEY=$("$PIER_BIN" admin create-key --scopes read,quote,launch,buy_domain --json | jq -r .apiKey)
project=$("$PIER_BIN" admin create-project --name dnsbench --json | jq -r .projectId)
setsid taskset -c 0 "$PIER_BIN" server --http-addr $PIER_HTTP --https-addr 127.0.0.1:18543 \
  --dns-addr 127.0.0.1:$PIER_DNS_PORT --dns-rrl-rate 0 --smtp-addr 127.0.0.1:18125 --log-level warn 2>"$tmp/pier.log" &
pier_pid=$!
pids+=($pier_pid)
for _ in $(seq 100); do curl -fsS "http://$PIER_HTTP/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
kill -0 $pier_pid 2>/dev/null || { echo "pier server did not start (ports in use?):" >&2; cat "$tmp/pier.log" >&2; exit 1; }
domain=$("$PIER_BIN" domains search dnsbench --json | jq -r '[.data.candidates[] | select(.available) | .domain][0]')
"$PIER_BIN" launch examples/site --project "$project" --name dnsbench --domain "$domain" >/dev/null 2>"$tmp/launch.log" ||
  { cat "$tmp/launch.log" >&2; exit 1; }
"$PIER_BIN" export "$project" --out "$tmp/leave" >/dev/null
zonefile=$tmp/leave/zones/$domain.zone
[ -s "$zonefile" ] || { echo "no zone file for $domain in the leave package" >&2; exit 1; }

mkdir -p "$tmp/nsd"
cat >"$tmp/nsd/nsd.conf" <<EOF
server:
  ip-address: 127.0.0.1@$NSD_PORT
  port: $NSD_PORT
  do-ip6: no
  username: ""
  chroot: ""
  zonesdir: "$tmp/nsd"
  database: ""
  zonelistfile: "$tmp/nsd/zone.list"
  xfrdfile: "$tmp/nsd/xfrd.state"
  xfrdir: "$tmp/nsd"
  pidfile: "$tmp/nsd/nsd.pid"
  logfile: "$tmp/nsd/nsd.log"
  server-count: 1
  verbosity: 1
  hide-version: yes
  hide-identity: yes
  rrl-ratelimit: 0
  rrl-whitelist-ratelimit: 0
remote-control:
  control-enable: no
zone:
  name: $domain
  zonefile: "$zonefile"
EOF
setsid taskset -c 0 /usr/sbin/nsd -d -c "$tmp/nsd/nsd.conf" >"$tmp/nsd/out.log" 2>&1 &
nsd_pid=$!
pids+=($nsd_pid)

cat >"$tmp/queries" <<EOF
www.$domain A
$domain A
www.$domain AAAA
$domain AAAA
$domain NS
$domain SOA
$domain CAA
www.$domain A
nope.$domain A
$domain A
EOF
cp "$tmp/queries" "$tmp/check"
if [ "$QUERIES" = random ]; then
  # A "water torture" attack: a million names never asked before, random
  # labels under the zone, each answered NXDOMAIN (the run asks fewer than
  # that, so no name repeats and no answer comes from a cache).
  awk -v d="$domain" 'BEGIN { srand(7); for (i = 0; i < 1000000; i++) printf "r%x%x.%s A\n", int(rand() * 2^31), i, d }' >"$tmp/queries"
fi

# Both answer the same before anything is timed.
for port in $PIER_DNS_PORT $NSD_PORT; do
  for _ in $(seq 100); do
    dnsperf -s 127.0.0.1 -p $port -d "$tmp/check" -n 1 -t 1 2>/dev/null | grep -q 'Queries completed: *10 ' && break
    sleep 0.1
  done
done
echo "zone $domain, $(grep -c . "$zonefile") lines; pier $("$PIER_BIN" --version 2>/dev/null | head -1), $(/usr/sbin/nsd -v 2>&1 | head -1), dnsperf $(dnsperf -h 2>&1 | awk '/^Version/ {print $2}')" >&2
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# proctime PGID: user+system clock ticks of every process in the group
# (the fields after the command name, which may hold spaces: NSD's do).
proctime() {
  { cat /proc/[0-9]*/stat 2>/dev/null || true; } |
    awk -v g="$1" '{ sub(/^.*\) /, ""); if ($3 == g) t += $12 + $13 } END { print t + 0 }'
}
# cpubusy: "busy total" ticks of cpu0 and cpu1.
cpubusy() { awk '/^cpu[01] / {b=$2+$3+$4+$7+$8+$9; printf "%d %d ", b, b+$5+$6} END {print ""}' /proc/stat; }
hz=$(getconf CLK_TCK)

run() { # port pgid → "qps server% queries-per-CPU-second cpu0% cpu1% lost"
  local t0 t1 b0 a0 b1 a1 e0 z0 e1 z1 start end out qps lost
  t0=$(proctime "$2"); read -r b0 a0 b1 a1 < <(cpubusy)
  start=$(date +%s.%N)
  runstat_begin "$pier_pid" "$nsd_pid"
  out=$(taskset -c 1 dnsperf -s 127.0.0.1 -p "$1" -d "$tmp/queries" -c "$CLIENTS" -q "$OUTSTANDING" -l "$DURATION" $DNSPERF_FLAGS 2>&1)
  runstat_end "$([ "$2" = "$pier_pid" ] && echo pier || echo nsd) dns"
  end=$(date +%s.%N)
  t1=$(proctime "$2"); read -r e0 z0 e1 z1 < <(cpubusy)
  qps=$(awk '/Queries per second:/ {print $4}' <<<"$out")
  lost=$(awk '/Queries lost:/ {print $3}' <<<"$out")
  awk -v q="$qps" -v t="$((t1 - t0))" -v hz="$hz" -v s="$start" -v e="$end" \
    -v b0="$((e0 - b0))" -v a0="$((z0 - a0))" -v b1="$((e1 - b1))" -v a1="$((z1 - a1))" -v lost="$lost" \
    'BEGIN { cpu = t / hz; printf "%.0f %.0f %.0f %.0f %.0f %s\n", q, 100*cpu/(e-s), (cpu > 0 ? q*(e-s)/cpu : 0), 100*b0/a0, 100*b1/a1, lost }'
}

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a/b : 0) }'; }

declare -a pq pc pe nq nc ne rq re
row='%-6s %-5s %9s %8s %10s %6s %6s %6s\n'
printf "$row" round server qps server% q/cpu-s cpu0% cpu1% lost >&2
for r in $(seq "$REPEAT"); do
  # Pier first in odd rounds, NSD first in even ones.
  if [ $((r % 2)) = 1 ]; then
    read -r q c e c0 c1 l < <(run $PIER_DNS_PORT $pier_pid); printf "$row" "$r" pier "$q" "$c" "$e" "$c0" "$c1" "$l" >&2; pq+=("$q") pc+=("$c") pe+=("$e")
    read -r q c e c0 c1 l < <(run $NSD_PORT $nsd_pid); printf "$row" "$r" nsd "$q" "$c" "$e" "$c0" "$c1" "$l" >&2; nq+=("$q") nc+=("$c") ne+=("$e")
  else
    read -r q c e c0 c1 l < <(run $NSD_PORT $nsd_pid); printf "$row" "$r" nsd "$q" "$c" "$e" "$c0" "$c1" "$l" >&2; nq+=("$q") nc+=("$c") ne+=("$e")
    read -r q c e c0 c1 l < <(run $PIER_DNS_PORT $pier_pid); printf "$row" "$r" pier "$q" "$c" "$e" "$c0" "$c1" "$l" >&2; pq+=("$q") pc+=("$c") pe+=("$e")
  fi
  rq+=("$(ratio "${pq[-1]}" "${nq[-1]}")") re+=("$(ratio "${pe[-1]}" "${ne[-1]}")")
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

echo
echo "| server | qps | server CPU | queries per CPU-second |"
echo "|---|---:|---:|---:|"
echo "| pier | $(median "${pq[@]}") | $(median "${pc[@]}") % | $(median "${pe[@]}") |"
echo "| nsd | $(median "${nq[@]}") | $(median "${nc[@]}") % | $(median "${ne[@]}") |"
echo "| pier/nsd | $(median "${rq[@]}") | | $(median "${re[@]}") |"
echo
echo "medians of $REPEAT rounds; the ratios are medians of the rounds' ratios (qps: ${rq[*]}; per CPU-second: ${re[*]})."
for i in "${!nc[@]}"; do
  if [ "${nc[$i]}" -lt 90 ]; then
    echo "NSD used ${nc[$i]} % of its CPU in round $((i + 1)): dnsperf on one CPU, not NSD, set the pace; compare queries per CPU-second."
    break
  fi
done
m=$(median "${rq[@]}") e=$(median "${re[@]}")
result "DNS vs NSD (dnsperf -c$CLIENTS -q$OUTSTANDING)" "$(median "${pq[@]}")" "$(median "${nq[@]}")" "$m" "qps"
result "DNS vs NSD, per server CPU-second" "$(median "${pe[@]}")" "$(median "${ne[@]}")" "$e" "q/CPU-s"
echo "goal pier/nsd >= 0.8: qps $(awk -v r="$m" 'BEGIN { print (r >= 0.8 ? "met" : "not met") }'), per CPU-second $(awk -v r="$e" 'BEGIN { print (r >= 0.8 ? "met" : "not met") }')"
