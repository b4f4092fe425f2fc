#!/usr/bin/env bash
# Socket options whose effect only the kernel's socket has (common/connection/kernel_only.hpp): SO_PEEK_OFF,
# TCP_INQ, SO_TIMESTAMP, SO_ZEROCOPY with MSG_ZEROCOPY, TCP_ULP, and one set on a listener. The
# shim hands a connection on shared memory back to TCP when one is set. Same transcript over plain
# TCP and under the shim.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
compare_transcripts "$ROOT/tests/integration/helpers/kernel_only.py"
for opt in SO_PEEK_OFF TCP_INQ SO_TIMESTAMP SO_ZEROCOPY TCP_ULP; do
    grep -q "transport=tcp .*reason=handed back to tcp: $opt\$" "$IT_TMP/shim.err" ||
        it_fail "the connection on shm was not handed back to TCP for $opt: $(cat "$IT_TMP/shim.err")"
done
it_finish
