#!/usr/bin/env bash
# The ES256 verification rate of `pier verify-sandbox-proof` against a local
# `pier server`, beside crypto/ecdsa's own P-256 Verify benchmark, in one run.
#
#   bash bench/verify.sh              # RUNS=50 command runs, BENCHTIME=2s
#   RUNS=200 BENCHTIME=5s bash bench/verify.sh
#
# It prints ES256 verifications per second and the ratio to crypto/ecdsa for:
#   cli          the pier binary run RUNS times with --tamper-check: process
#                start, every download over loopback, every check
#   end-to-end   the same verification in-process (verifier.Verify)
#   reference    the release already downloaded (verifier.VerifyFiles)
#   per-sig      the marginal cost of one more signature in a proof
# See bench/README.md for how to read them.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-50}
BENCHTIME=${BENCHTIME:-2s}
ADDR=${ADDR:-127.0.0.1:18099}
BASE=http://$ADDR

mkdir -p bin
go build -o bin/pier ./cmd/pier
tmp=$(mktemp -d)
pid=""
cleanup() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi; rm -rf "$tmp"; }
trap cleanup EXIT

PIER_DATA_DIR=$tmp/data ./bin/pier server --http-addr "$ADDR" --https-addr 127.0.0.1:0 --dns-addr 127.0.0.1:0 --log-level warn 2>"$tmp/pier.log" &
pid=$!
for _ in $(seq 100); do
  if curl -fsS "$BASE/.well-known/sandbox-reference.json" 2>/dev/null | grep -q '"available"'; then break; fi
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/pier.log"; exit 1; }
  sleep 0.1
done

# The peer: crypto/ecdsa's benchmark, as the issue names it.
ecdsa_ns=$(go test crypto/ecdsa -run '^$' -bench 'Verify/P256$' -benchtime "$BENCHTIME" | awk '/^BenchmarkVerify\/P256/ {print $3}')
ecdsa_rate=$(awk -v ns="$ecdsa_ns" 'BEGIN {printf "%.0f", 1e9/ns}')

# The command itself, end to end. Signatures per run: those the report
# checked, plus the one the tamper check tries.
./bin/pier verify-sandbox-proof --base-url "$BASE" --tamper-check --json >"$tmp/report.json"
grep -q '"verdict": "accept"' "$tmp/report.json" || { cat "$tmp/report.json"; echo "the reference proof was rejected"; exit 1; }
sigs=$(grep -cE '"id": "(proof\.signature|mandate\.signature|receipt\.signature|gate\.decision\.signature)"' "$tmp/report.json")
sigs=$((sigs + 1))
start=$(date +%s.%N)
for _ in $(seq "$RUNS"); do
  ./bin/pier verify-sandbox-proof --base-url "$BASE" --tamper-check >/dev/null
done
end=$(date +%s.%N)
cli_rate=$(awk -v n="$RUNS" -v s="$sigs" -v a="$start" -v b="$end" 'BEGIN {printf "%.0f", n*s/(b-a)}')

# The same verification in-process, against the same server.
PIER_BENCH_BASE_URL=$BASE go test ./bench -run '^$' -bench 'VerifySandboxProof' -benchtime "$BENCHTIME" | tee "$tmp/bench.txt" >&2

rate() { awk -v name="$1" '$1 ~ "VerifySandboxProof/"name"-" {for (i = 1; i < NF; i++) if ($(i+1) == "es256/s") print $i}' "$tmp/bench.txt"; }
printf '\n%-12s %12s %8s\n' "measure" "es256/s" "ratio"
printf '%-12s %12s %8s\n' "ecdsa" "$ecdsa_rate" "1.00"
for row in "cli $cli_rate" "end-to-end $(rate end-to-end)" "reference $(rate reference)" "per-sig $(rate per-signature)"; do
  set -- $row
  awk -v n="$1" -v r="$2" -v p="$ecdsa_rate" 'BEGIN {printf "%-12s %12.0f %8.2f\n", n, r, r/p}'
done
echo "(signatures per reference run: $sigs; goal: ratio >= 0.85)"
