#!/usr/bin/env bash
# run-tests: beside the VM
# shutdown() from another thread wakes a thread blocked in recv (it returns 0) or in a send on a
# full buffer (EPIPE), as TCP does: same transcript over plain TCP and with the shim preloaded,
# every connection on shared memory when the call blocks.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
compare_transcripts "$ROOT/tests/integration/helpers/shutdown_wakes.py" client 3 server 3
it_finish
