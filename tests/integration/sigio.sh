#!/usr/bin/env bash
# Signal-driven I/O (O_ASYNC via fcntl, FIOASYNC via ioctl): SIGIO on arriving bytes as on TCP.
# The shim hands a connection on shared memory back to TCP when O_ASYNC is set, and keeps one
# that never left TCP there. Same transcript over plain TCP and under the shim.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
compare_transcripts "$ROOT/tests/integration/helpers/sigio.py"
grep -q "role=client transport=tcp .*reason=handed back to tcp: O_ASYNC (signal-driven I/O)" "$IT_TMP/shim.err" ||
    it_fail "the connection on shm was not handed back to TCP: $(cat "$IT_TMP/shim.err")"
it_finish
