#!/usr/bin/env bash
# tests/robustness/run.sh -- every robustness script in turn (what `make robustness` runs), full size:
# hostile peers, dead peers, churn of N=10000 connections, valgrind, registry race, isolation. Prints one
# PASS/FAIL line per script and exits 1 if any failed (their output is in $BUILD/robustness-logs/).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
logs="$BUILD/robustness-logs"
mkdir -p "$logs"
failed=()
for t in hostile_peers dead_peers churn valgrind registry_race isolation; do
    start=$SECONDS
    if bash "tests/robustness/$t.sh" >"$logs/$t.log" 2>&1; then echo "PASS $t ($((SECONDS - start))s)"
    else failed+=("$t"); echo "FAIL $t ($((SECONDS - start))s), log $logs/$t.log"; tail -n 15 "$logs/$t.log"; fi
done
[[ ${#failed[@]} -eq 0 ]] || { echo "robustness: failed: ${failed[*]}"; exit 1; }
echo "robustness: all passed"
