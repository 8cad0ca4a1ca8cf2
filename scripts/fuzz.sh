#!/usr/bin/env bash
# Runs every native Go fuzz target in the module for FUZZTIME each
# (default 10s), one at a time. Each target's committed seed corpus
# (testdata/fuzz/<Name>/) and its f.Add seeds run first; new failing
# inputs are written there for `go test` to replay.
#
#   make fuzz                    # 10 s per target
#   FUZZTIME=1m make fuzz        # longer, locally
#   FUZZ=FuzzServeDNS make fuzz  # one target
#   FUZZMINIMIZETIME=60s make fuzz  # minimise what is found (Go's default)
#
# Minimising is off by default: a short run that ends while a worker
# minimises a new input is reported by Go as "fuzzing process hung or
# terminated unexpectedly while minimizing" (golang/go#52569), a failure
# of the fuzzer rather than of the code. A crash is still written to
# testdata/fuzz, as found. A failing target's whole output is printed.
#
# A run whose only failure is Go's coordinator reporting "context deadline
# exceeded" as the fuzz time ends, with no failing input written (a worker
# slow to stop, not a finding of the code), is run once more; a second
# failure fails.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-0}
only=${FUZZ:-}
fail=0
n=0
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    [ -n "$only" ] && [ "$target" != "$only" ] && continue
    n=$((n + 1))
    echo "--- $pkg $target ($FUZZTIME)"
    out=$(mktemp)
    run() { go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "$pkg" >"$out" 2>&1; }
    ok=0
    if run; then
      ok=1
    elif grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input written' "$out"; then
      echo "the fuzzer stopped late (context deadline exceeded, no failing input); running $target again"
      run && ok=1
    fi
    if [ $ok = 1 ]; then
      tail -n 3 "$out"
    else
      cat "$out"
      fail=1
    fi
    rm -f "$out"
  done
done
echo "ran $n fuzz targets"
exit $fail
