#!/usr/bin/env bash
# run-tests: beside the VM
# An edge-triggered waiter thread and a nonblocking reader thread on one connection (tokio's
# driver and worker): every byte must reach the reader through edges alone. A receive that lost
# the readers' lock to the waiter's look at the ring said EAGAIN beside unread bytes whose edge
# was spent, and such a reader slept beside them for good (seen in a tokio sweep, 2026-12-03;
# this program did not hit that window before the fix in the runs tried: it guards the pattern).
# Same transcript over plain TCP and shimmed.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
compare_transcripts "$ROOT/tests/integration/helpers/et_reader_race.py" client 1 server 1
it_finish
