#!/usr/bin/env bash
# A Python helper of tests/integration/helpers, or a program of tests/programs, run twice
# inside the Soft-RoCE VM, over plain TCP and with the shim on rdma (both ends in the
# helper's process or its children), on the VM's rxe address: the transcripts must be equal
# and at least MIN_RDMA ends on rdma (COMPARE_TRANSPORT=shm: on shared memory instead).
#   tests/rdma/compare_rdma.sh HELPER.py MIN_RDMA [ARGS...]
#   tests/rdma/compare_rdma.sh PROGRAM MIN_RDMA [ARGS...]      ($BUILD/PROGRAM)
# It listens on $SHUTDOWN_WAKES_ADDR / $HANDOVER_ADDR / $CHECK_ADDR (set here to the VM's address).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
LIB=$(readlink -f "$BUILD/librdmasock.so")
if [[ "$1" == *.py ]]; then cmd=(python3 "tests/integration/helpers/$1"); else cmd=("$BUILD/$1"); fi
min=$2
shift 2
T=${COMPARE_TRANSPORT:-rdma}
export SHUTDOWN_WAKES_ADDR=${RDMA_VM_ADDR:-127.0.0.1} HANDOVER_ADDR=${RDMA_VM_ADDR:-127.0.0.1} CHECK_ADDR=${RDMA_VM_ADDR:-127.0.0.1}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
. tests/rdma/bounded.sh
t0=$SECONDS
bounded 200 "${cmd[@]}" "$@" >"$tmp/tcp.txt" 2>"$tmp/tcp.err" || { echo "FAIL: plain run (exit status $?)"; cat "$tmp/tcp.txt" "$tmp/tcp.err"; exit 1; }
t1=$SECONDS
bounded 200 env LD_PRELOAD="$LIB" RDMASOCK_TRANSPORT="$T" RDMASOCK_STATS=1 "${cmd[@]}" "$@" >"$tmp/shim.txt" 2>"$tmp/shim.err" ||
    { echo "FAIL: shimmed run (exit status $?)"; cat "$tmp/shim.txt" "$tmp/shim.err"; exit 1; }
# A record, not a bound: a late wake-up leaves the same transcript but a longer run.
echo "plain run $((t1 - t0)) s, shimmed run $((SECONDS - t1)) s"
cat "$tmp/tcp.txt"
diff -u "$tmp/tcp.txt" "$tmp/shim.txt" || { echo "FAIL: the transcripts differ"; cat "$tmp/shim.err"; exit 1; }
n=$(grep -c "transport=$T" "$tmp/shim.err" || true)
[ "$n" -ge "$min" ] || { echo "FAIL: $n ends on $T, expected $min"; cat "$tmp/shim.err"; exit 1; }
echo "same transcript as TCP, $n ends on $T"
