#!/usr/bin/env bash
# run-tests: beside the VM
# Edge-triggered epoll at the socket's state changes: our shutdown each way, the peer's FIN,
# its RST (after a FIN, or alone from a peer that died with bytes unread). TCP wakes every
# waiter then and an EPOLLET interest reports its whole mask again (EPOLLOUT too); data alone
# brings no EPOLLOUT edge. 4 masks x 10 events, same transcript over plain TCP and shimmed.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
it_need_python
compare_transcripts "$ROOT/tests/integration/helpers/epoll_state_edges.py" client 40
it_finish
