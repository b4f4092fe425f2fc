#!/usr/bin/env bash
# run-tests: beside the VM
# Bytes sent to a socket shut both ways but still open: dropped, and both ends reset, as TCP does
# (helpers/shut_both_ways.py). Same transcript over plain TCP and with the shim preloaded, every
# connection on shared memory.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
compare_transcripts "$ROOT/tests/integration/helpers/shut_both_ways.py" client 4 server 4
it_finish
