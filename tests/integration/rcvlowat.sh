#!/usr/bin/env bash
# run-tests: beside the VM
# SO_RCVLOWAT: poll/select/epoll and recv wait for the low-water mark as on TCP. The shim hands a
# connection on shared memory back to TCP when the option is set, keeps the connections of a
# listener with the option on TCP, and a socket that had it before connect. Same transcript over
# plain TCP and under the shim.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
compare_transcripts "$ROOT/tests/integration/helpers/rcvlowat.py"
grep -q "role=client transport=tcp .*reason=handed back to tcp: SO_RCVLOWAT" "$IT_TMP/shim.err" ||
    it_fail "the connection on shm was not handed back to TCP: $(cat "$IT_TMP/shim.err")"
grep -q "role=client transport=tcp .*reason=SO_RCVLOWAT was set" "$IT_TMP/shim.err" ||
    it_fail "the socket with SO_RCVLOWAT before connect left TCP: $(cat "$IT_TMP/shim.err")"
it_finish
