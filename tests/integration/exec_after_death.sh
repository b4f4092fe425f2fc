#!/usr/bin/env bash
# A peer wrote 300000 bytes and ended (killed, or a clean close) before we read them; then we
# exec a program that reads the inherited socket. TCP: it reads them all, then EOF. The shim
# hands the connection back to TCP at the exec, and the peer is no longer there to send its
# unread ring bytes again: the receiver keeps them beside the socket for the exec'd program
# (common/shm/leftover.hpp), which reads them all, then EOF (until 2026-11-27 it read 0 bytes, then
# EOF; until issue 36, ECONNRESET). tests/rdma/exec_after_death.sh: over rdma (every byte, then EOF
# after a clean close; an error after an exit without one).
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
d="$IT_TMP"
prog="$ROOT/tests/integration/helpers/exec_after_death.py"
for how in exit close; do
    without_shim -t 60 "$PYTHON" "$prog" "$how" >"$d/tcp.txt" 2>"$d/tcp.err" || it_fail "plain run exited $?: $(cat "$d/tcp.err")"
    grep -qx "read 300000 then EOF" "$d/tcp.txt" || it_fail "plain run ($how): $(cat "$d/tcp.txt")"
    with_shim -t 60 env RDMASOCK_LOG=info "$PYTHON" "$prog" "$how" >"$d/shim.txt" 2>"$d/shim.err" ||
        it_fail "shimmed run exited $?: $(cat "$d/shim.txt" "$d/shim.err")"
    # The receiver keeps what the gone peer left in the ring (common/shm/leftover.hpp): every byte, then EOF.
    grep -qx "read 300000 then EOF" "$d/shim.txt" || it_fail "peer $how: $(cat "$d/shim.txt" "$d/shim.err") (TCP: every byte, then EOF)"
    grep -q "upgraded to shm" "$d/shim.err" || it_fail "peer $how: the connection was never on shm: $(cat "$d/shim.err")"
done
it_finish
