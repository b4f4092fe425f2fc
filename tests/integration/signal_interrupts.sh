#!/usr/bin/env bash
# run-tests: beside the VM
# A signal during a blocking recv, send, poll, select or epoll_wait behaves as on TCP: a handler
# without SA_RESTART ends a socket call (Python raises the handler's exception at once, not when
# the peer acts), one with SA_RESTART lets it go on; poll, select and epoll end with EINTR
# either way; the mask of ppoll/pselect/epoll_pwait holds signals back or lets them in for the
# whole call. Same transcript over plain TCP and with the shim preloaded; every blocked call
# waits on shared memory. Run twice: with the default spin (signals land in the kernel sleep)
# and with a 1 s spin, so that every signal lands while the shim spins in user space, where
# only its trampoline (common/sys/signal_seen.hpp) tells the wait. Then once before the switch.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
for spin in default 1000000; do
    echo "== spin: $spin"
    if [ "$spin" = default ]; then unset RDMASOCK_SPIN_US RDMASOCK_SPIN_MAX_US
    else export RDMASOCK_SPIN_US=$spin RDMASOCK_SPIN_MAX_US=$spin; fi
    compare_transcripts "$ROOT/tests/integration/helpers/signal_interrupts.py" client 3
    compare_transcripts "$BUILD/signal_check" client 10
done
# Once more with every connection kept in its rendezvous phases (bytes over TCP, the shim's own
# waits and direction locks): RDMASOCK_SHM_AFTER_US far beyond the run. A second reader waiting
# behind a first one asleep in recv slept on a mutex there: the signal never ended its call, and
# it then slept for good on the socket the first had emptied (two_readers_case).
echo "== before the switch"
unset RDMASOCK_SPIN_US RDMASOCK_SPIN_MAX_US
RDMASOCK_SHM_AFTER_US=60000000 compare_transcripts "$BUILD/signal_check"
it_finish
