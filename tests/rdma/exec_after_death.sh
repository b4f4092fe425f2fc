#!/usr/bin/env bash
# tests/integration/exec_after_death.sh over rdma, in the Soft-RoCE VM: a peer that wrote
# 300000 bytes and ended (exit, close) before we read them; the program we exec then reads
# every byte and EOF (as over TCP) or gets an error, never EOF after fewer bytes.
# A clean close writes the peer's end-of-stream record after its bytes and flushes every write:
# the receiver keeps what is in its ring for the exec'd program, which must read all of it, then EOF.
# An exit without the close (os._exit) leaves no record: its last posted writes may never have
# landed, so the shim cannot say the stream is whole and resets (an error, as before).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
LIB=$(readlink -f "$BUILD/librdmasock.so")
export CHECK_ADDR=${RDMA_VM_ADDR:-127.0.0.1}
prog=tests/integration/helpers/exec_after_death.py
. tests/rdma/bounded.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
for how in exit close; do
    bounded 60 python3 "$prog" "$how" >"$tmp/tcp.txt" 2>&1
    grep -qx "read 300000 then EOF" "$tmp/tcp.txt" || { echo "FAIL: plain run ($how): $(cat "$tmp/tcp.txt")"; fail=1; }
    bounded 60 env LD_PRELOAD="$LIB" RDMASOCK_TRANSPORT=rdma RDMASOCK_LOG=info python3 "$prog" "$how" >"$tmp/shim.txt" 2>"$tmp/shim.err"
    if grep -qx "read 300000 then EOF" "$tmp/shim.txt" || { [ "$how" = exit ] && grep -qxE "read [0-9]+ then [A-Za-z]+Error" "$tmp/shim.txt"; }; then
        echo "peer $how: $(cat "$tmp/shim.txt") (TCP: every byte, then EOF)"
    else
        echo "FAIL: peer $how: a cut stream that looks complete, or worse: $(cat "$tmp/shim.txt" "$tmp/shim.err")"
        fail=1
    fi
    grep -q "upgraded to rdma" "$tmp/shim.err" || { echo "FAIL: peer $how: never on rdma: $(cat "$tmp/shim.err")"; fail=1; }
done
exit $fail
