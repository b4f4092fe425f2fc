#!/usr/bin/env bash
# run-tests: beside the VM
# A connection's first calls, before anything crossed it (under the shim its bytes still go over
# TCP, through a wait of the shim's own: common/connection/connection_tcp_io.cpp): SO_RCVTIMEO, MSG_DONTWAIT,
# MSG_OOB, MSG_WAITALL across sends and ended by a signal, MSG_PEEK, recv of 0 bytes, a handler
# that raises, EOF, SO_SNDTIMEO on a full connection; the client waiting first, then the server
# (tests/integration/helpers/first_calls.py). Same transcript over plain TCP and under the shim.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
compare_transcripts "$ROOT/tests/integration/helpers/first_calls.py" client 2 server 2
it_finish
