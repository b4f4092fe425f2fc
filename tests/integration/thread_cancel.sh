#!/usr/bin/env bash
# pthread_cancel of threads blocked in recv, read, poll, select, epoll_wait and send on
# shimmed sockets (tests/programs/cancel_check.cpp): the thread ends as over TCP, the
# connection stays whole, a disabled cancellation leaves the calls alone, and a request
# made before a call acts at its entry. Same transcript over plain TCP and under the shim.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
compare_transcripts "$BUILD/cancel_check" client 10 server 10
it_finish
