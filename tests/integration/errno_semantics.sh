#!/usr/bin/env bash
# errno after calls that succeed: the kernel leaves it alone, so must the shim (its own calls on
# the way fail with EAGAIN and the like). Same transcript over plain TCP and under the shim,
# both ends on shared memory; the transcript says which calls changed errno, if any.
set -euo pipefail
BUILD=${BUILD:-build}
LIB=$(readlink -f "$BUILD/librdmasock.so")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
timeout 120 "$BUILD/errno_check" >"$tmp/tcp.txt" || { echo "FAIL: plain run exited $?"; cat "$tmp/tcp.txt"; exit 1; }
LD_PRELOAD=$LIB RDMASOCK_STATS=1 timeout 120 "$BUILD/errno_check" >"$tmp/shim.txt" 2>"$tmp/stats.txt" ||
    { echo "FAIL: shimmed run exited $?"; cat "$tmp/shim.txt" "$tmp/stats.txt"; exit 1; }
if ! diff -u "$tmp/tcp.txt" "$tmp/shim.txt"; then echo "FAIL: errno differs from TCP"; exit 1; fi
grep -q "role=server transport=shm" "$tmp/stats.txt" || { echo "FAIL: not upgraded"; cat "$tmp/stats.txt"; exit 1; }
grep -q "role=client transport=shm" "$tmp/stats.txt" || { echo "FAIL: not upgraded"; cat "$tmp/stats.txt"; exit 1; }
echo "PASS: $(wc -l <"$tmp/tcp.txt") lines identical on tcp and shm"
