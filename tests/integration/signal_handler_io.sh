#!/usr/bin/env bash
# A signal handler that sends on, shuts down or closes the socket its own thread is blocked on
# (in recv, send, poll, epoll_wait) or leaves with siglongjmp, and a close from another thread
# while a recv waits
# (tests/programs/handler_io_check.cpp). Over TCP the handler runs once the interrupted call has
# left the socket, and a restarted call looks its number up again: no deadlock, EBADF after a
# close, EINTR without SA_RESTART, the peer sees no end of stream while a call is still in
# progress. Same transcript over plain TCP and under the shim, with the default spin and with a
# 1 s spin (every signal lands while the shim spins in user space).
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
for spin in default 1000000; do
    echo "== spin: $spin"
    if [ "$spin" = default ]; then unset RDMASOCK_SPIN_US RDMASOCK_SPIN_MAX_US
    else export RDMASOCK_SPIN_US=$spin RDMASOCK_SPIN_MAX_US=$spin; fi
    compare_transcripts "$BUILD/handler_io_check" client 13
done
it_finish
