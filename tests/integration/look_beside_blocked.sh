#!/usr/bin/env bash
# run-tests: beside the VM
# Looks (FIONREAD, epoll ET/LT, select, poll) and calls that may not block (MSG_DONTWAIT recv and
# send), made while another thread is blocked in recv or send on the same socket, answer at once
# as on TCP: same transcript over plain TCP and under the shim (both ends in one process, on shm).
# Before: a blocked reader held the read lock while it waited, and FIONREAD waited behind it for good;
# on a connection still in the same-host rendezvous a MSG_DONTWAIT send waited for good behind a
# blocked sender (the writers' lock).
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
compare_transcripts "$ROOT/tests/integration/helpers/look_beside_blocked.py" client 1 server 1
it_finish
