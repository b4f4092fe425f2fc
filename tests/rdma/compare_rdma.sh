#!/usr/bin/env bash
# A Python helper of tests/integration/helpers run twice inside the Soft-RoCE VM, over
# plain TCP and with the shim on rdma (both ends in the helper's process), on the VM's
# rxe address: the transcripts must be equal and at least MIN_RDMA ends on rdma.
#   tests/rdma/compare_rdma.sh HELPER.py MIN_RDMA [ARGS...]
# The helper listens on $SHUTDOWN_WAKES_ADDR / $HANDOVER_ADDR (set here to the VM's address).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
LIB=$(readlink -f "$BUILD/librdmasock.so")
prog=tests/integration/helpers/$1 min=$2
shift 2
export SHUTDOWN_WAKES_ADDR=${RDMA_VM_ADDR:-127.0.0.1} HANDOVER_ADDR=${RDMA_VM_ADDR:-127.0.0.1}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
timeout 200 python3 "$prog" "$@" >"$tmp/tcp.txt" 2>"$tmp/tcp.err" || { echo "FAIL: plain run"; cat "$tmp/tcp.txt" "$tmp/tcp.err"; exit 1; }
LD_PRELOAD=$LIB RDMASOCK_TRANSPORT=rdma RDMASOCK_STATS=1 timeout 200 python3 "$prog" "$@" >"$tmp/shim.txt" 2>"$tmp/shim.err" ||
    { echo "FAIL: shimmed run"; cat "$tmp/shim.txt" "$tmp/shim.err"; exit 1; }
cat "$tmp/tcp.txt"
diff -u "$tmp/tcp.txt" "$tmp/shim.txt" || { echo "FAIL: the transcripts differ"; cat "$tmp/shim.err"; exit 1; }
n=$(grep -c "transport=rdma" "$tmp/shim.err" || true)
[ "$n" -ge "$min" ] || { echo "FAIL: $n ends on rdma, expected $min"; cat "$tmp/shim.err"; exit 1; }
echo "same transcript as TCP, $n ends on rdma"
