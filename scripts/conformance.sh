#!/usr/bin/env bash
# Runs the public conformance suites against a Pier server started here on
# loopback with a throwaway data directory: an anonymous run, then a
# governed run chained to it, then the offline verification of the chain.
# Reports land in ${CONFORMANCE_OUT:-conformance-reports}/.
#
#   bash scripts/conformance.sh            # what `make conformance` runs
#   PIER=bin/pier bash scripts/conformance.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PIER=${PIER:-bin/pier}
OUT=${CONFORMANCE_OUT:-conformance-reports}
[ -x "$PIER" ] || go build -o "$PIER" ./cmd/pier

data=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$data"' EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http=$(port)
export PIER_DATA_DIR=$data PIER_BASE_URL=http://127.0.0.1:$http
"$PIER" server --data-dir "$data" --http-addr 127.0.0.1:"$http" --https-addr 127.0.0.1:"$(port)" \
  --dns-addr 127.0.0.1:"$(port)" --smtp-addr 127.0.0.1:"$(port)" --log-level warn &
server=$!
for _ in $(seq 1 100); do
  curl -fsS "$PIER_BASE_URL/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done

mkdir -p "$OUT"
# Reports chain: each run links to the newest report already in $OUT.
prev=()
last=$(ls -1 "$OUT"/*.json 2>/dev/null | sort | tail -n 1 || true)
[ -n "$last" ] && prev=(--previous "$last")
stamp=$(date -u +%Y%m%dT%H%M%SZ)

"$PIER" conformance run --profile anonymous "${prev[@]}" --out "$OUT/$stamp-1-anonymous.json"
PIER_API_KEY=$("$PIER" admin create-key --data-dir "$data" --name conformance --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["apiKey"])') \
  "$PIER" conformance run --profile governed --previous "$OUT/$stamp-1-anonymous.json" --out "$OUT/$stamp-2-governed.json"
"$PIER" conformance verify --chain "$OUT"
