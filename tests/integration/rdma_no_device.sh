#!/usr/bin/env bash
# RDMASOCK_TRANSPORT=rdma on a host without RDMA (this machine, CI): the real
# device scan finds nothing, the client sends no HELLO, and the connection
# carries every byte over TCP. The RDMA paths themselves run in the Soft-RoCE VM
# (make test-rdma).
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
set -euo pipefail
cd "$(dirname "$0")/../.."
export STREAM_CHECK_ADDR=127.0.0.1
R=RDMASOCK_TRANSPORT=rdma
out=$(tests/rdma/shim_pair.sh tcp 8M $R -- $R)
echo "$out"
grep -q "reason=no RDMA" <<<"$out"
# A server that wants rdma, a client that wants shm (side channel): the server never
# offers, the client gives up when the server's first bytes come, bytes intact.
out=$(tests/rdma/shim_pair.sh tcp 8M $R --)
echo "$out"
grep -q "reason=the server made no offer" <<<"$out"
# A client whose first look at the registry missed the listener (fault registry-miss: as a
# listener that publishes between that look and the SYN) looks again after connect: it
# offers rdma after all, so its reason is the missing device, not a missing listener. The
# Python echo server keeps listening while it serves (stream_check's one-shot server closes
# its listener, and with it its registry entry, right after accept).
. tests/integration/helpers/free_port.sh
port=$(free_port)
tmp=$(mktemp -d /tmp/rdma_no_device.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
LIB=$(readlink -f build/librdmasock.so)
env LD_PRELOAD="$LIB" $R RDMASOCK_STATS=1 timeout 60 python3 tests/integration/helpers/py_echo_server.py "$port" \
    >"$tmp/srv.out" 2>"$tmp/srv.err" &
srv=$!
for _ in $(seq 1 200); do ss -ltn "sport = :$port" | grep -q LISTEN && break; sleep 0.05; done
env LD_PRELOAD="$LIB" $R RDMASOCK_FAULT=registry-miss RDMASOCK_STATS=1 timeout 60 \
    python3 tests/integration/helpers/py_client.py "$port" >"$tmp/cli.out" 2>"$tmp/cli.err"
wait "$srv"
cat "$tmp/cli.out" "$tmp/cli.err" "$tmp/srv.out" "$tmp/srv.err"
grep -q "^py_client: OK" "$tmp/cli.out"
grep -q "role=client.*reason=no RDMA" "$tmp/cli.err"
echo "PASS: no device, no peer support: both stay on TCP with every byte"
