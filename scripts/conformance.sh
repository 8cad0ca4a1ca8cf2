#!/usr/bin/env bash
# Runs the public conformance suites against a Pier server started here on
# loopback with a throwaway data directory: an anonymous run, then a
# governed run chained to it, then the offline verification of the chain.
# Reports land in ${CONFORMANCE_OUT:-conformance-reports}/ and chain: the
# first run links to the newest report already there, when the reports
# there verify as one chain, signed by the signing key and ending at the
# head recorded in ${CONFORMANCE_HEAD:-$CONFORMANCE_OUT.head} (the digest of
# the newest report, which each run writes); otherwise they are moved aside
# and a fresh chain starts. The signing key is $CONFORMANCE_KEY, created
# there when missing, or else pier's default (conformance.jwk in its config
# directory); `pier conformance jwks` prints its public JWKS for auditors.
#
#   bash scripts/conformance.sh            # what `make conformance` runs
#   PIER=bin/pier bash scripts/conformance.sh  # with bin/pier-server beside it
#   CONFORMANCE_OUT=chain/reports CONFORMANCE_KEY=chain/key/conformance.jwk bash scripts/conformance.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PIER=${PIER:-bin/pier}
OUT=${CONFORMANCE_OUT:-conformance-reports}
[ -x "$PIER" ] || go build -o "$PIER" ./cmd/pier
# `pier server` hands over to pier-server, found beside pier.
[ -x "$(dirname "$PIER")/pier-server" ] || [ -n "${PIER_SERVER_BIN:-}" ] || go build -o "$(dirname "$PIER")/pier-server" ./cmd/pier-server

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

stamp=$(date -u +%Y%m%dT%H%M%SZ)
HEAD_FILE=${CONFORMANCE_HEAD:-$OUT.head}
JWKS=$data/conformance-jwks.json

key=()
if [ -n "${CONFORMANCE_KEY:-}" ]; then
  if [ -f "$CONFORMANCE_KEY" ]; then
    chmod 600 "$CONFORMANCE_KEY" # a restored file may come back wider
  else
    mkdir -p "$(dirname "$CONFORMANCE_KEY")"
    "$PIER" holder keygen --key "$CONFORMANCE_KEY"
  fi
  key=(--key "$CONFORMANCE_KEY")
fi

# Reports chain: each run links to the newest report already in $OUT, once
# those verify as one chain signed by the signing key and ending at the
# recorded head. A chain that does not (or with no key or head to check it
# against) is kept aside, never extended; the runs here then start a fresh
# one.
if ls "$OUT"/*.json >/dev/null 2>&1 && ! {
  [ -s "$HEAD_FILE" ] && "$PIER" conformance jwks "${key[@]}" >"$JWKS" 2>/dev/null &&
    "$PIER" conformance verify --chain "$OUT" --keys "$JWKS" --head "$(cat "$HEAD_FILE")" >/dev/null
}; then
  echo "conformance: the reports in $OUT do not verify as one chain signed by the signing key up to the head in $HEAD_FILE; moved to $OUT.unverified-$stamp, starting a fresh chain" >&2
  mv "$OUT" "$OUT.unverified-$stamp"
fi
mkdir -p "$OUT"
prev=()
last=$(ls -1 "$OUT"/*.json 2>/dev/null | sort | tail -n 1 || true)
[ -n "$last" ] && prev=(--previous "$last")

json() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

"$PIER" conformance run --profile anonymous "${key[@]}" "${prev[@]}" --out "$OUT/$stamp-1-anonymous.json"
# The governed suite needs a key that may quote and launch, and a project
# whose budget covers its quote, so that the quote decides ALLOW and holds.
project=$("$PIER" admin create-project --data-dir "$data" --name conformance --budget-usd 50 --json | json projectId)
PIER_API_KEY=$("$PIER" admin create-key --data-dir "$data" --name conformance --json | json apiKey) \
  "$PIER" conformance run --profile governed "${key[@]}" --project "$project" \
  --previous "$OUT/$stamp-1-anonymous.json" --out "$OUT/$stamp-2-governed.json"
# The key exists now (the first run may have made the default one): its
# public JWKS is what an auditor trusts, and the governed report the head.
"$PIER" conformance jwks "${key[@]}" >"$JWKS"
head=$("$PIER" conformance verify "$OUT/$stamp-2-governed.json" --keys "$JWKS" --json |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["reports"][0]["digest"])')
"$PIER" conformance verify --chain "$OUT" --keys "$JWKS" --head "$head"
printf '%s\n' "$head" >"$HEAD_FILE"

# Against Pier every probe a profile runs passes: a skip means this script
# failed to set up what the probe needs, and fails the run too.
python3 - "$OUT/$stamp-1-anonymous.json" "$OUT/$stamp-2-governed.json" <<'PY'
import json, sys
bad = []
for path in sys.argv[1:]:
    report = json.load(open(path))
    for suite in report["suites"]:
        runs = suite["id"] != "governed" or report["profile"] == "governed"
        want = "pass" if runs else "not_run"
        bad += [f"{path}: {p['id']} is {p['status']}, not {want}" for p in suite["probes"] if p["status"] != want]
if bad:
    print("conformance: not every probe passed:", *bad, sep="\n  ", file=sys.stderr)
    sys.exit(1)
PY
