#!/usr/bin/env bash
# The peer's end shows in poll and epoll no earlier than TCP's FIN could land: not while more than
# a receive buffer is unread ahead of it (helpers/end_window.py; the haproxy short stream of
# docs/compatibility.md). Same transcript over plain TCP and with the shim, all on shared memory.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
compare_transcripts "$ROOT/tests/integration/helpers/end_window.py" client 2 server 2
it_finish
