#!/usr/bin/env bash
# poll/ppoll/select/epoll (LT, ET, ONESHOT, RDHUP, EINTR, timeouts, mixed fds,
# two sets, dup+close) observed on plain TCP and under the shim must be identical,
# and the shimmed run must really use shared memory.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
set -euo pipefail
BUILD=${BUILD:-build}
LIB=$(readlink -f "$BUILD/librdmasock.so")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
timeout 60 "$BUILD/readiness_check" >"$tmp/tcp.txt"
LD_PRELOAD=$LIB RDMASOCK_STATS=1 timeout 60 "$BUILD/readiness_check" >"$tmp/shim.txt" 2>"$tmp/stats.txt"
if ! diff -u "$tmp/tcp.txt" "$tmp/shim.txt"; then echo "FAIL: readiness differs from TCP"; exit 1; fi
grep -q "role=server transport=shm" "$tmp/stats.txt" || { echo "FAIL: not upgraded"; cat "$tmp/stats.txt"; exit 1; }
grep -q "role=client transport=shm" "$tmp/stats.txt" || { echo "FAIL: not upgraded"; cat "$tmp/stats.txt"; exit 1; }
echo "PASS: $(wc -l <"$tmp/tcp.txt") scenarios identical on tcp and shm"
