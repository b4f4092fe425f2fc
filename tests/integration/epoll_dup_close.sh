#!/usr/bin/env bash
# A socket in an epoll set, dup'd, closed under the registered number first and then under the
# other: the set reports as on TCP in between, and the registration (and under the shim the
# connection's eventfds) goes with the socket's last fd. Same transcript over plain TCP and shimmed.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
compare_transcripts "$ROOT/tests/integration/helpers/epoll_dup_close.py" client 3 server 3
it_finish
