#!/usr/bin/env bash
# fork() while a thread sleeps in recv, send, poll or epoll_wait on a shimmed connection, and the
# child sends on it or closes it (tests/programs/fork_wait_check.cpp): the child does not hang on
# the locks the sleeping thread holds in the parent, and its close does not undo the parent's
# epoll arms; a child whose first call is shutdown(SHUT_WR) ends the stream for both processes.
# Same transcript over plain TCP and under the shim.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
compare_transcripts "$BUILD/fork_wait_check"
# Each connection reached the rings before its fork: on shm to the end, or handed back to TCP
# because the child used it (the statistics line of each process's ends).
for role in client server; do
    n=$(_it_stats_lines "$IT_TMP/shim.err" "$role" |
        grep -c -E "transport=shm |reason=the peer handed the stream back|reason=a forked child" || true)
    (( n >= 9 )) || it_fail "role=$role: $n of 9 connections reached the rings"
done
it_finish
