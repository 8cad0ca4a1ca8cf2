#!/usr/bin/env bash
# Idle CPU: how much of a core an idle embedded server (SQLite) uses.
# Starts `pier server` with a fresh data directory, waits WARMUP for start-up
# work to settle, then reads the process's user+system CPU time from
# /proc/PID/stat before and after DURATION seconds. Goal: under 0.2 % of one
# core (see bench/README.md).
#
#   bash bench/idle.sh                 # 60 s
#   DURATION=120 bash bench/idle.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-60}
WARMUP=${WARMUP:-20}
GOAL=${GOAL:-0.2}
mkdir -p bin
go build -o bin/pier ./cmd/pier
go build -o bin/pier-server ./cmd/pier-server
tmp=$(mktemp -d)
PIER_DATA_DIR=$tmp ./bin/pier-server server --http-addr 127.0.0.1:18390 --https-addr 127.0.0.1:18743 --dns-addr 127.0.0.1:18353 \
  --smtp-addr 127.0.0.1:18325 --log-level warn 2>"$tmp/pier.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do curl -fsS http://127.0.0.1:18390/healthz >/dev/null 2>&1 && break; sleep 0.1; done
sleep "$WARMUP"
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
a=$(ticks)
sleep "$DURATION"
b=$(ticks)
pct=$(awk -v t=$((b - a)) -v hz="$hz" -v s="$DURATION" 'BEGIN { printf "%.3f", 100 * t / hz / s }')
echo "idle server (SQLite): $((b - a)) ticks of 1/$hz s over ${DURATION} s = ${pct} % of one core (goal < ${GOAL} %)"
awk -v p="$pct" -v g="$GOAL" 'BEGIN { exit !(p < g) }' && echo "goal met" || { echo "goal missed"; exit 1; }
