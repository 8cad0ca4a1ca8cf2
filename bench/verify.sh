#!/usr/bin/env bash
# The ES256 verification rate of `pier verify-sandbox-proof` against a local
# `pier server`, beside crypto/ecdsa's P-256 Verify, in one run; and the
# end-to-end numbers of the same runs. See bench/README.md for how to read
# them.
#
#   bash bench/verify.sh                  # ROUNDS=5, BENCHTIME=2s, RUNS=50
#   ROUNDS=9 BENCHTIME=3s RUNS=200 bash bench/verify.sh
#
# 1. The peer, `go test crypto/ecdsa -bench Verify/P256`, beside its copy
#    BenchmarkECDSAVerifyP256, to show that the copy measures the same.
# 2. ROUNDS rounds of BenchmarkECDSAVerifyP256 then
#    BenchmarkVerifySandboxProofES256 (verifier.Verify, --tamper-check,
#    against the server over loopback), each in one `go test` process:
#      ratio         signatures checked / time spent checking them, over the
#                    peer loop run after each verification for as many
#                    signatures (the goal: 0.85)
#      ratio-alone   the same rate over BenchmarkECDSAVerifyP256, run just
#                    before in the same process
#      e2e-ratio     signatures / the whole run's wall time, over the peer
#      runs/s and where a run's time went (fetch, sig, other)
#    and the median of each column.
# 3. The whole-run rates of BenchmarkVerifySandboxProof: end to end, the
#    release already downloaded, the marginal cost of one more signature.
# 4. The pier binary, RUNS times with --tamper-check: process start, eight
#    downloads, every check.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
BENCHTIME=${BENCHTIME:-2s}
RUNS=${RUNS:-50}
ADDR=${ADDR:-127.0.0.1:18099}
BASE=http://$ADDR

mkdir -p bin
go build -o bin/pier ./cmd/pier
go build -o bin/pier-server ./cmd/pier-server
tmp=$(mktemp -d)
pid=""
cleanup() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi; rm -rf "$tmp"; }
trap cleanup EXIT
go test -c -o "$tmp/bench.test" ./bench

PIER_DATA_DIR=$tmp/data ./bin/pier-server server --http-addr "$ADDR" --https-addr 127.0.0.1:0 --dns-addr 127.0.0.1:0 --log-level warn 2>"$tmp/pier.log" &
pid=$!
for _ in $(seq 100); do
  if curl -fsS "$BASE/.well-known/sandbox-reference.json" 2>/dev/null | grep -q '"available"'; then break; fi
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/pier.log"; exit 1; }
  sleep 0.1
done

# metric FILE BENCH UNIT: the value before UNIT on BENCH's result line.
metric() { awk -v name="$2" -v unit="$3" '$1 ~ "^Benchmark"name"(-[0-9]+)?$" {for (i = 2; i < NF; i++) if ($(i+1) == unit) print $i}' "$1"; }
median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2] + v[NR/2+1]) / 2}'; }

echo "== 1. the peer: crypto/ecdsa Verify/P256 and its copy (ns/op)"
go test crypto/ecdsa -run '^$' -bench 'Verify/P256$' -benchtime "$BENCHTIME" | tee "$tmp/stdlib.txt" | grep '^Benchmark' || true
"$tmp/bench.test" -test.run '^$' -test.bench '^BenchmarkECDSAVerifyP256$' -test.benchtime "$BENCHTIME" | tee "$tmp/copy.txt" | grep '^Benchmark' || true
stdlib_ns=$(awk '$1 ~ /^BenchmarkVerify\/P256/ {print $3}' "$tmp/stdlib.txt")
copy_ns=$(awk '$1 ~ /^BenchmarkECDSAVerifyP256/ {print $3}' "$tmp/copy.txt")
awk -v a="$stdlib_ns" -v b="$copy_ns" 'BEGIN {printf "stdlib %.0f ns/op, copy %.0f ns/op: copy/stdlib %.2f\n", a, b, b/a}'

echo
echo "== 2. the verifier's ES256 rate inside end-to-end runs against $BASE"
printf '%-5s %9s %9s %7s %7s %9s %7s %7s %6s %6s %6s\n' round es256/s peer/s ratio alone e2e/s e2e runs/s fetch% sig% other%
: >"$tmp/rounds.txt"
for r in $(seq "$ROUNDS"); do
  PIER_BENCH_BASE_URL=$BASE "$tmp/bench.test" -test.run '^$' -test.bench '^(BenchmarkECDSAVerifyP256|BenchmarkVerifySandboxProofES256)$' \
    -test.benchtime "$BENCHTIME" >"$tmp/round.txt"
  f=$tmp/round.txt n=VerifySandboxProofES256
  row="$r $(metric "$f" $n es256/s) $(metric "$f" $n peer-es256/s) $(metric "$f" $n ratio-interleaved) $(metric "$f" $n ratio)"
  row="$row $(metric "$f" $n e2e-es256/s) $(metric "$f" $n e2e-ratio) $(metric "$f" $n runs/s) $(metric "$f" $n fetch-%) $(metric "$f" $n sig-%) $(metric "$f" $n other-%)"
  [ "$(echo "$row" | wc -w)" -eq 11 ] || { cat "$tmp/round.txt"; echo "round $r: missing metrics"; exit 1; }
  echo "$row" >>"$tmp/rounds.txt"
  echo "$row" | awk '{printf "%-5s %9.0f %9.0f %7.3f %7.3f %9.0f %7.3f %7.1f %6.1f %6.1f %6.1f\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11}'
done
med=(median)
for col in $(seq 2 11); do med+=("$(awk -v c="$col" '{print $c}' "$tmp/rounds.txt" | median)"); done
echo "${med[*]}" | awk '{printf "%-5s %9.0f %9.0f %7.3f %7.3f %9.0f %7.3f %7.1f %6.1f %6.1f %6.1f\n", "med", $2, $3, $4, $5, $6, $7, $8, $9, $10, $11}'
min_ratio=$(awk '{print $4}' "$tmp/rounds.txt" | sort -g | head -1)
min_alone=$(awk '{print $5}' "$tmp/rounds.txt" | sort -g | head -1)

echo
echo "== 3. whole-run rates (BenchmarkVerifySandboxProof): signatures per second of a whole run"
PIER_BENCH_BASE_URL=$BASE "$tmp/bench.test" -test.run '^$' -test.bench '^BenchmarkVerifySandboxProof$' -test.benchtime "$BENCHTIME" >"$tmp/whole.txt"
for sub in ecdsa-P256 end-to-end reference per-signature; do
  awk -v s="$sub" '$1 ~ "^BenchmarkVerifySandboxProof/"s"(-[0-9]+)?$" {
    r = ""; q = ""; for (i = 2; i < NF; i++) { if ($(i+1) == "es256/s") r = $i; if ($(i+1) == "ratio") q = $i }
    printf "%-14s %9.0f es256/s  ratio %s\n", s, r, (q == "" ? "1" : sprintf("%.3f", q)) }' "$tmp/whole.txt"
done

echo
echo "== 4. the pier binary, $RUNS runs with --tamper-check"
./bin/pier verify-sandbox-proof --base-url "$BASE" --tamper-check --json >"$tmp/report.json"
grep -q '"verdict": "accept"' "$tmp/report.json" || { cat "$tmp/report.json"; echo "the reference proof was rejected"; exit 1; }
# Signatures per run: those the report checked, plus the one the tamper
# check tries.
sigs=$(grep -cE '"id": "(proof\.signature|mandate\.signature|receipt\.signature|gate\.decision\.signature)"' "$tmp/report.json")
sigs=$((sigs + 1))
start=$(date +%s.%N)
for _ in $(seq "$RUNS"); do
  ./bin/pier verify-sandbox-proof --base-url "$BASE" --tamper-check >/dev/null
done
end=$(date +%s.%N)
peer=${med[2]}
awk -v n="$RUNS" -v s="$sigs" -v a="$start" -v b="$end" -v p="$peer" \
  'BEGIN {t = (b-a)/n; printf "%.1f ms/run, %d signatures/run: %.0f es256/s, ratio %.3f to the peer\n", t*1000, s, s/t, s/t/p}'

echo
awk -v m="${med[3]}" -v lo="$min_ratio" -v a="${med[4]}" -v alo="$min_alone" -v e="${med[6]}" 'BEGIN {
  printf "ES256 verification rate / crypto/ecdsa: median %.3f (lowest round %.3f); against the peer run alone %.3f (lowest %.3f); goal 0.85: %s\n",
    m, lo, a, alo, (m >= 0.85 ? "met" : "NOT met")
  printf "whole end-to-end run (downloads and every check): %.3f of the peer; see bench/README.md\n", e }'
