#!/usr/bin/env bash
# Runs every native Go fuzz target in the module for FUZZTIME each
# (default 10s), one at a time. Each target's committed seed corpus
# (testdata/fuzz/<Name>/) and its f.Add seeds run first; new failing
# inputs are written there for `go test` to replay.
#
#   make fuzz                    # 10 s per target
#   FUZZTIME=1m make fuzz        # longer, locally
#   FUZZ=FuzzServeDNS make fuzz  # one target
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}
only=${FUZZ:-}
fail=0
n=0
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    [ -n "$only" ] && [ "$target" != "$only" ] && continue
    n=$((n + 1))
    echo "--- $pkg $target ($FUZZTIME)"
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1 | tail -n 3; then
      fail=1
    fi
  done
done
echo "ran $n fuzz targets"
exit $fail
