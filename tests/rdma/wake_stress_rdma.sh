#!/usr/bin/env bash
# The sleep/wake race of tests/integration/wake_stress.sh over the RDMA transport
# (completion-channel doorbells, docs/waiting.md), inside the Soft-RoCE VM:
#   scripts/rdma-vm tests/rdma/wake_stress_rdma.sh
# Both ends of build/wake_stress shimmed with RDMASOCK_TRANSPORT=rdma on a 4K ring,
# spin 0 (every wait asleep) and 5 us; poll/ppoll, select/pselect, epoll (LT, ET)
# and blocking calls; echo rounds and both directions at once. Every byte is
# checked; 15 s without progress fails (a lost wake-up). Volumes are small: the
# guest emulates its CPU. STRESS_MB (default 1) scales them.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
LIB=$(readlink -f "$BUILD/librdmasock.so")
MB=${STRESS_MB:-1}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export RDMASOCK_RING_SIZE=4K RDMASOCK_STATS=1 RDMASOCK_TRANSPORT=rdma
total_waits=0 total_sleeps=0
run() {  # shape wait megabytes spin_us seed
    local bytes=$(($3 * 1000000))
    if ! LD_PRELOAD=$LIB RDMASOCK_SPIN_US=$4 timeout 600 "$BUILD/wake_stress" "$1" "$2" "$bytes" "$5" >"$tmp/out" 2>"$tmp/err"; then
        echo "FAIL: $1 $2 spin=$4 seed=$5"; cat "$tmp/out" "$tmp/err"; exit 1
    fi
    for role in client server; do
        grep -q "role=$role transport=rdma" "$tmp/err" || { echo "FAIL: $1 $2: $role not on rdma"; cat "$tmp/err"; exit 1; }
    done
    echo "$1 $2 spin=$4us: $(tr '\n' ' ' <"$tmp/out")"
    total_waits=$((total_waits + $(grep -o '[0-9]* \(waits\|blocking calls\)' "$tmp/out" | awk '{s+=$1} END {print s}')))
    total_sleeps=$((total_sleeps + $(grep -o '[0-9]* kernel sleeps of which [0-9]*' "$tmp/out" | awk '{s+=$1-$5} END {print s}')))
}
seed=${STRESS_SEED:-$RANDOM}
echo "seed base $seed"
for w in poll select epoll epoll-et blocking; do
    run echo "$w" "$MB" 0 $((seed + 1))
    run echo "$w" "$MB" 5 $((seed + 2))
done
for w in poll epoll epoll-et blocking; do run stream "$w" "$MB" 0 $((seed + 3)); done
echo "PASS: $total_waits waits and blocking calls, $total_sleeps kernel sleeps outside pauses, over rdma"
