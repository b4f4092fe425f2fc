#!/usr/bin/env bash
# tests/integration/takeover_after_close.sh over rdma, in the Soft-RoCE VM: the client sends
# 200 KB..2 MB and closes; then the server hands the socket to a forked child, execs a reader from
# a forked child, or passes it with SCM_RIGHTS. TCP: the new owner reads every byte, then EOF.
# The ring is the server's registered memory and its queue pair the server's: a forked child reads
# the copy the fork made of it (copy-on-fork kernels), the peer's end-of-stream record saying it is
# whole (Connection::keep_after_gone_in_band). Before: the child got EIO, the exec'd program read
# 0 bytes then EOF (a cut stream that looked complete).
# With RDMASOCK_FAULT=rdma-dontfork (the pages MADV_DONTFORK, as on kernels without copy-on-fork)
# the child has no ring: ECONNRESET then, never an EOF after fewer bytes.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
LIB=$(readlink -f "$BUILD/librdmasock.so")
prog=tests/integration/helpers/takeover_after_close.py
. tests/rdma/bounded.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
for how in fork exec scm; do
    for seed in 1 2; do
        tests/rdma/compare_rdma.sh takeover_after_close.py 2 "$how" "$seed" >"$tmp/out" 2>&1 ||
            { cat "$tmp/out"; fail=1; }
        grep -h "seed" "$tmp/out" | head -1
    done
done
for how in fork exec; do
    bounded 100 env CHECK_ADDR="${RDMA_VM_ADDR:-127.0.0.1}" LD_PRELOAD="$LIB" RDMASOCK_TRANSPORT=rdma \
        RDMASOCK_FAULT=rdma-dontfork RDMASOCK_LOG=info python3 "$prog" "$how" 1 >"$tmp/df.txt" 2>"$tmp/df.err"
    if grep -qE ": ok$| 0 then ConnectionResetError: DIFFERENT$" "$tmp/df.txt"; then
        echo "MADV_DONTFORK, $how: $(cat "$tmp/df.txt") (every byte, or ECONNRESET)"
    else
        echo "FAIL: MADV_DONTFORK, $how: a cut stream that looks complete, or worse: $(cat "$tmp/df.txt" "$tmp/df.err")"
        fail=1
    fi
done
exit $fail
