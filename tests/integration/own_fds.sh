#!/usr/bin/env bash
# A process that closes every fd it did not keep (a loop of close() over every number,
# close_range around its socket, closefrom after a dup2) and goes on using the connection, waiting
# on it directly or through an epoll set (tests/programs/own_fds_check.cpp). The shim's own fds
# (doorbells, an epoll set's eventfd) are not the program's to close: same transcript over plain
# TCP and under the shim (the counts of open fds included), and the file the program opens next
# holds only what it wrote.
export RDMASOCK_SHM_AFTER_US=0  # the switch at once: this suite asserts which connections reach the rings, and when
. "$(dirname "${BASH_SOURCE[0]}")/helpers/lib.sh"
compare_transcripts "$BUILD/own_fds_check" client 7 server 7
it_finish
