#!/usr/bin/env bash
# RDMASOCK_TRANSPORT=rdma on a host without RDMA (this machine, CI): the real
# device scan finds nothing, the client sends no HELLO, and the connection
# carries every byte over TCP. The RDMA paths themselves run in the Soft-RoCE VM
# (make test-rdma).
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
# offers rdma after all, so its reason is the missing device, not a missing listener.
out=$(tests/rdma/shim_pair.sh tcp 1M $R -- $R RDMASOCK_FAULT=registry-miss)
echo "$out"
grep -q "role=client.*reason=no RDMA" <<<"$out"
echo "PASS: no device, no peer support: both stay on TCP with every byte"
