#!/usr/bin/env bash
# run-tests: beside the VM
# pthread_cancel of threads blocked in recv, read, poll, select, epoll_wait and send on
# shimmed sockets (tests/programs/cancel_check.cpp): the thread ends as over TCP, the
# connection stays whole, a disabled cancellation leaves the calls alone, and a request
# made before a call acts at its entry. Same transcript over plain TCP and under the shim:
# on the rings (the switch at once), and once more with the connections kept in their
# rendezvous phases (TCP through the shim's own waits), where a blocking recv of 0 bytes
# returned 0 to a cancel request instead of ending the thread until 2026-11-30.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
RDMASOCK_SHM_AFTER_US=0 compare_transcripts "$BUILD/cancel_check" client 10 server 10
RDMASOCK_SHM_AFTER_US=60000000 compare_transcripts "$BUILD/cancel_check"
it_finish
