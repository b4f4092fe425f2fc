#!/usr/bin/env bash
# The way back to TCP over RDMA (issue #13; docs/protocol.md, "Downgrade over RDMA"),
# inside the Soft-RoCE VM:  scripts/rdma-vm tests/rdma/downgrade_rdma.sh
#  1. Sockets that leave the shim's hands mid-stream (tests/integration/helpers/handover.py:
#     exec, SCM_RIGHTS, a forked child writing while its parent closes, vfork + dup2,
#     fdopen, splice, an asyncio peer) with both ends on
#     rdma: the same transcript as plain TCP, every connection back on tcp but splice's (the
#     shim moves spliced bytes itself: shim/splice_ring.hpp; that one stays on rdma).
#  2. The queue pair forced into error at a random point (RDMASOCK_FAULT=rdma-qp-error on
#     both ends) and hand-overs at random points, both directions streaming at once, every
#     byte checked: the stream continues on TCP (tests/integration/downgrade_stress.sh).
# Sizes are small: the guest emulates its CPU. DOWNGRADE_RDMA_MB scales them (default 8).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
LIB=$(readlink -f "$BUILD/librdmasock.so")
MB=${DOWNGRADE_RDMA_MB:-8}
export STREAM_CHECK_ADDR=${RDMA_VM_ADDR:-127.0.0.1} HANDOVER_ADDR=${RDMA_VM_ADDR:-127.0.0.1}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cases="exec scm_rights scm_rights_keep fork vfork_dup2 fdopen splice exec_asyncio_peer"
prog=tests/integration/helpers/handover.py
. tests/rdma/bounded.sh
bounded 200 python3 "$prog" $cases >"$tmp/tcp.txt" 2>"$tmp/tcp.err" || { echo "FAIL: plain run (exit status $?)"; cat "$tmp/tcp.err"; exit 1; }
bounded 200 env LD_PRELOAD="$LIB" RDMASOCK_TRANSPORT=rdma RDMASOCK_STATS=1 RDMASOCK_LOG=info python3 "$prog" $cases \
    >"$tmp/shim.txt" 2>"$tmp/shim.err" || { echo "FAIL: shimmed run (exit status $?)"; cat "$tmp/shim.txt" "$tmp/shim.err"; exit 1; }
diff -u "$tmp/tcp.txt" "$tmp/shim.txt" || { echo "FAIL: the transcripts differ"; cat "$tmp/shim.err"; exit 1; }
n=$(wc -w <<<"$cases")
ups=$(grep -c "upgraded to rdma" "$tmp/shim.err" || true)
handed=$(grep -c "transport=tcp .*reason=handed back to tcp" "$tmp/shim.err" || true)
peers=$(grep -c "transport=tcp .*reason=the peer handed the stream back to tcp" "$tmp/shim.err" || true)
cat "$tmp/tcp.txt"
echo "handover cases: $n, ends upgraded to rdma: $ups, handed back: $handed, peers that followed: $peers"
[ "$ups" -ge $((2 * n)) ] || { echo "FAIL: expected both ends of $n connections on rdma"; cat "$tmp/shim.err"; exit 1; }
[ "$peers" -ge $((n - 1)) ] || { echo "FAIL: expected $((n - 1)) clients to follow the hand-over"; cat "$tmp/shim.err"; exit 1; }
# (The two exec'd servers print no statistics line: the process that handed over became another
# program; the splice case hands nothing over.)
[ "$handed" -ge $((n - 3)) ] || { echo "FAIL: expected the server ends to hand over"; cat "$tmp/shim.err"; exit 1; }
if grep -E "rdmasock\[[0-9]+\]: error" "$tmp/shim.err"; then echo "FAIL: the shim logged errors"; exit 1; fi
echo "PASS: handover cases over rdma"
bytes=$((MB * 1048576))
DOWNGRADE_TRANSPORT=rdma DOWNGRADE_FAULT=rdma-qp-error DOWNGRADE_BYTES=$bytes DOWNGRADE_ROUNDS="4 2" \
    tests/integration/downgrade_stress.sh
DOWNGRADE_TRANSPORT=rdma DOWNGRADE_FAULT=handover DOWNGRADE_BYTES=$bytes DOWNGRADE_ROUNDS="3 2" \
    tests/integration/downgrade_stress.sh
