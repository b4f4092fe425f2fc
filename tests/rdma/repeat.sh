#!/usr/bin/env bash
# Runs one test command N times and counts (a rare failure needs many runs to show):
#   scripts/rdma-vm -- tests/rdma/repeat.sh 15 tests/rdma/shim_pair.sh rdma 2M \
#       RDMASOCK_TRANSPORT=rdma RDMASOCK_RING_SIZE=4K -- RDMASOCK_TRANSPORT=rdma RDMASOCK_RING_SIZE=4K
# The log of each failed run is printed (its last 20 lines); exit status 1 if any failed.
set -u
n=${1:?usage: repeat.sh N command...}
shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
pass=0 fail=0
for i in $(seq 1 "$n"); do
    if "$@" >"$log" 2>&1; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL run $i"
        tail -n 20 "$log"
    fi
done
echo "repeat: $pass passed, $fail failed ($*)"
[ "$fail" = 0 ]
