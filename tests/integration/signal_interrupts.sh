#!/usr/bin/env bash
# A signal during a blocking recv, send, poll, select or epoll_wait behaves as on TCP: a handler
# without SA_RESTART ends a socket call (Python raises the handler's exception at once, not when
# the peer acts), one with SA_RESTART lets it go on; poll, select and epoll end with EINTR
# either way; the mask of ppoll/pselect/epoll_pwait holds signals back or lets them in for the
# whole call. Same transcript over plain TCP and with the shim preloaded; every blocked call
# waits on shared memory. Run twice: with the default spin (signals land in the kernel sleep)
# and with a 1 s spin, so that every signal lands while the shim spins in user space, where
# only its trampoline (common/sys/signal_seen.hpp) tells the wait.
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
for spin in default 1000000; do
    echo "== spin: $spin"
    if [ "$spin" = default ]; then unset RDMASOCK_SPIN_US RDMASOCK_SPIN_MAX_US
    else export RDMASOCK_SPIN_US=$spin RDMASOCK_SPIN_MAX_US=$spin; fi
    compare_transcripts "$ROOT/tests/integration/helpers/signal_interrupts.py" client 3
    compare_transcripts "$BUILD/signal_check" client 10
done
it_finish
