#!/usr/bin/env bash
# run-tests: beside the VM
# splice() on connections carried on a ring (helpers/splice_ring.py): socket -> pipe after the peer
# wrote and closed unread (the hand-over it used to take lost those bytes), both ways through pipes,
# nothing to move, a full pipe, the kernel's argument checks. Same transcript over plain TCP and
# with the shim preloaded; every connection stays on shared memory.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
# (On a busy machine a connection may finish its rendezvous late and stay on TCP: 3 of 5.)
compare_transcripts "$ROOT/tests/integration/helpers/splice_ring.py" client 3 server 3
it_finish
