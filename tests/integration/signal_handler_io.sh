#!/usr/bin/env bash
# run-tests: beside the VM
# A signal handler that sends on, shuts down or closes the socket its own thread is blocked on
# (in recv, send, poll, epoll_wait) or leaves with siglongjmp, and a close from another thread
# while a recv waits
# (tests/programs/handler_io_check.cpp). Over TCP the handler runs once the interrupted call has
# left the socket, and a restarted call looks its number up again: no deadlock, EBADF after a
# close, EINTR without SA_RESTART, the peer sees no end of stream while a call is still in
# progress. Same transcript over plain TCP and under the shim, with the default spin and with a
# 1 s spin (every signal lands while the shim spins in user space), and once more with each wait
# the connection's first (before the shim switched it to its rings).
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
for spin in default 1000000; do
    echo "== spin: $spin"
    if [ "$spin" = default ]; then unset RDMASOCK_SPIN_US RDMASOCK_SPIN_MAX_US
    else export RDMASOCK_SPIN_US=$spin RDMASOCK_SPIN_MAX_US=$spin; fi
    compare_transcripts "$BUILD/handler_io_check" client 13
done
# The connection's first wait, while the shim still carries its bytes over TCP (before the
# switch): a blocking kernel call there held the connection's lock while handlers ran at once,
# so a handler that sent on a full connection deadlocked and one that jumped out left the
# connection hung (cases D and N, before 2026-11-27).
echo "== the first wait, before the switch"
unset RDMASOCK_SPIN_US RDMASOCK_SPIN_MAX_US
HANDLER_IO_FIRST=1 compare_transcripts "$BUILD/handler_io_check"
it_finish
